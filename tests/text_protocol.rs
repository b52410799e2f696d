//! Whole runs through the real binary against the mock's OpenAI route with
//! a local model (`-m ollama:…`, `--backend none`): the stream sanitizer
//! keeps leaked template tokens out of what is shown and stored and turns a
//! token-framed call into a real one; and with `AH_TOOL_PROTOCOL=text` the
//! model gets no tools but `##file:`/`##run` blocks, run once each as steps
//! even when the reply streams in tiny pieces, confined and policy-checked,
//! with the results sent back as the next user message.

use std::process::Output;

use crate::support::host::{Host, describe, json_file, query};
use crate::support::mock::{MockServer, RecordedRequest, Reply, Turn};
use serde_json::{Value, json};

fn run(host: &Host, mock: &MockServer, protocol: &str, extra: &[&str]) -> Output {
    host.ah_openai(&mock.openai_url())
        .env("AH_TOOL_PROTOCOL", protocol)
        .args([
            "--backend",
            "none",
            "--review",
            "auto",
            "-m",
            "ollama:coder",
        ])
        .args(extra)
        .arg("do the task")
        .output()
        .unwrap_or_else(|e| panic!("run ah: {e}"))
}

/// The text of the last message of `request`, which must be the user's.
fn last_user_text(request: &RecordedRequest) -> String {
    let last = request.messages().last().cloned().unwrap_or(Value::Null);
    assert_eq!(last["role"], json!("user"), "{last}");
    last["content"].as_str().unwrap_or_default().to_string()
}

/// Every text stored in the session database.
fn stored_texts(host: &Host) -> String {
    let rows = query(
        &host.sessions()[0],
        "SELECT content FROM content_blocks WHERE content IS NOT NULL",
    );
    rows.iter().map(|row| row[0].to_string()).collect()
}

#[test]
fn blocks_streamed_in_pieces_run_once_as_steps_and_results_come_back_as_text() {
    let host = Host::git(&[("README.md", "demo\n")]);
    let reply = "I will add the script, then run it.\n\
                 ##file:src/hello.py\n```python\nprint('hi')\n```\n\
                 ##run\n```sh\npython3 src/hello.py; echo ran >> log.txt\n```\n";
    let mock = MockServer::start(vec![
        // Three-character deltas in five-byte HTTP chunks: every block is
        // cut many times over.
        Turn::reply(Reply::new().text(reply))
            .piece_size(3)
            .chunk_size(5),
        Turn::reply(Reply::new().text("Done.")),
    ]);
    let out = run(&host, &mock, "text", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(host.read("src/hello.py"), "print('hi')\n");
    assert_eq!(host.read("log.txt"), "ran\n", "the command ran once");

    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests[0].body.get("tools").is_none(), "no native tools");
    let system = requests[0].messages()[0]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(
        system.contains("##file:PATH") && system.contains("```sh"),
        "{system}"
    );
    // The prompt names the blocks, never a tool the model cannot call.
    assert!(
        system.contains("Write a file whole in a `##file:` block to create or change it.")
            && system.contains("- `##run` output is truncated when long"),
        "{system}"
    );
    for absent in ["`edit`", "`apply_patch`", "`read`", "`bash`", "{{"] {
        assert!(!system.contains(absent), "{absent} in {system}");
    }
    let results = last_user_text(&requests[1]);
    assert!(
        results.contains(
            "1. ##file:src/hello.py: done\n```\nCreated /work/src/hello.py (12 bytes)\n```"
        ),
        "{results}"
    );
    assert!(
        results.contains("2. ##run python3 src/hello.py"),
        "{results}"
    );
    assert!(results.contains("hi\n"), "{results}");
    // The reply went back as the model wrote it, blocks included.
    let sent = requests[1].messages();
    assert_eq!(sent[sent.len() - 2]["content"], json!(reply));

    // Two steps, one per block, through Run: step files and commits.
    let run_dir = host.run();
    let write = json_file(&run_dir.join("steps/step-1.meta.json"));
    assert_eq!(write["tool"], json!("write"));
    assert_eq!(write["input"]["path"], json!("src/hello.py"));
    assert!(
        write["commit"].as_str().is_some_and(|c| c.len() == 40),
        "{write}"
    );
    let bash = json_file(&run_dir.join("steps/step-2.meta.json"));
    assert_eq!(bash["tool"], json!("bash"));
    assert!(!run_dir.join("steps/step-3.meta.json").exists());
}

#[test]
fn blocks_outside_work_on_denied_paths_or_too_large_are_refused() {
    let host = Host::git(&[("README.md", "demo\n")]);
    let big = "x".repeat(1024 * 1024 + 1);
    let reply = format!(
        "##file:/etc/ah-escape.txt\n```\nno\n```\n\
         ##file:../outside.txt\n```\nno\n```\n\
         ##file:locked/secret.txt\n```\nno\n```\n\
         ##file:big.txt\n```\n{big}\n```\n\
         ##file:ok.txt\n```\nyes\n```\n\
         ##run\n```python\nprint()\n```\n"
    );
    let mock = MockServer::start(vec![
        // In big pieces: the mock takes about a millisecond per delta.
        Turn::reply(Reply::new().text(reply)).piece_size(64 * 1024),
        Turn::reply(Reply::new().text("Understood.")),
    ]);
    // Deny wins over an allow that also matches.
    let out = run(
        &host,
        &mock,
        "text",
        &["--allow", "locked/**", "--deny", "locked/**"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(host.read("ok.txt"), "yes\n");
    for gone in ["locked/secret.txt", "big.txt"] {
        assert!(!host.project.join(gone).exists(), "{gone}");
    }
    assert!(
        !host
            .project
            .parent()
            .map(|p| p.join("outside.txt").exists())
            .unwrap_or(true)
    );
    assert!(!std::path::Path::new("/etc/ah-escape.txt").exists());

    let results = last_user_text(&mock.requests()[1]);
    assert!(results.contains("1. ##file:/etc/ah-escape.txt: failed\n```\npath \"/etc/ah-escape.txt\" is outside /work"), "{results}");
    assert!(
        results.contains(
            "2. ##file:../outside.txt: failed\n```\npath \"../outside.txt\" is outside /work"
        ),
        "{results}"
    );
    assert!(results.contains("3. ##file:locked/secret.txt: failed\n```\nwriting /work/locked/secret.txt is not allowed"), "{results}");
    assert!(
        results.contains(
            "4. ##file:big.txt: not written: 1048578 bytes is over the 1048576-byte limit"
        ),
        "{results}"
    );
    assert!(results.contains("5. ##file:ok.txt: done"), "{results}");
    assert!(
        results.contains("6. ##run: not run: its block must be tagged sh"),
        "{results}"
    );
    // Only the blocks that reached the write tool are steps.
    let steps: Vec<String> = (1..=5)
        .filter(|n| {
            host.run()
                .join(format!("steps/step-{n}.meta.json"))
                .exists()
        })
        .map(|n| {
            json_file(&host.run().join(format!("steps/step-{n}.meta.json")))["input"]["path"]
                .to_string()
        })
        .collect();
    assert_eq!(
        steps,
        [
            "\"/etc/ah-escape.txt\"",
            "\"../outside.txt\"",
            "\"locked/secret.txt\"",
            "\"ok.txt\""
        ]
    );
}

#[test]
fn leaked_template_tokens_are_dropped_and_a_framed_call_runs_as_a_tool_call() {
    let host = Host::git(&[("README.md", "demo\n")]);
    let leaked = "Checking.<|start|>assistant<|channel|>commentary to=functions.bash \
                  <|constrain|>json<|message|>{\"command\":\"echo hi > out.txt\"}<|call|>";
    let fenced = "Done.<|end|>\n```text\nkept: <|end|>\n```\n";
    let mock = MockServer::start(vec![
        Turn::reply(Reply::new().text(leaked))
            .piece_size(4)
            .chunk_size(7),
        Turn::reply(Reply::new().text(fenced)).piece_size(2),
    ]);
    let out = run(&host, &mock, "native", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(host.read("out.txt"), "hi\n", "the framed call ran");

    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    assert!(
        requests[0].body["tools"].is_array(),
        "native tools are sent"
    );
    let sent = requests[1].messages();
    let assistant = &sent[sent.len() - 2];
    assert_eq!(assistant["content"], json!("Checking."));
    let call = &assistant["tool_calls"][0];
    assert_eq!(call["function"]["name"], json!("bash"));
    let id = call["id"].as_str().unwrap_or_default();
    assert!(id.starts_with("call_"), "{call}");
    let result = sent.last().cloned().unwrap_or(Value::Null);
    assert_eq!(result["role"], json!("tool"));
    assert_eq!(result["tool_call_id"], json!(id));

    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("Checking."), "{stdout}");
    assert!(
        stdout.contains("Done.\n```text\nkept: <|end|>\n```"),
        "{stdout}"
    );
    let stored = stored_texts(&host);
    assert!(
        !stored.contains("<|call|>") && !stored.contains("commentary"),
        "{stored}"
    );
    assert!(
        stored.contains("kept: <|end|>"),
        "fences stay verbatim: {stored}"
    );
    assert_eq!(stored.matches("<|").count(), 1, "{stored}");
}

#[test]
fn an_unknown_tool_protocol_is_a_usage_error() {
    let host = Host::git(&[("README.md", "demo\n")]);
    let mock = MockServer::start(vec![]);
    let out = run(&host, &mock, "json", &[]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("AH_TOOL_PROTOCOL=\"json\" is not a tool protocol"),
        "{stderr}"
    );
    assert!(mock.requests().is_empty());
}

#[test]
fn a_model_repeating_its_blocks_is_told_then_stopped_by_loop_detection() {
    let host = Host::git(&[("README.md", "demo\n")]);
    // Ten identical blocks a turn: with the window of 10, one detection per
    // turn, and the third stops the run.
    let reply = "##run\n```sh\necho same\n```\n".repeat(10);
    let mut turns: Vec<Turn> = (0..3)
        .map(|_| Turn::reply(Reply::new().text(reply.clone())).piece_size(64))
        .collect();
    turns.push(Turn::reply(Reply::new().text("never asked for")));
    let mock = MockServer::start(turns);
    let out = run(&host, &mock, "text", &[]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("stopped: the model repeated itself 3 times"),
        "{stderr}"
    );
    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(mock.pending_turns(), 1);
    let told = last_user_text(&requests[1]);
    assert!(told.contains("10. ##run echo same: done"), "{told}");
    assert!(
        told.contains("[ah: loop detected] Your last 10 tool calls repeat the same call 10 times"),
        "{told}"
    );
    assert!(host.run().join("steps/step-30.meta.json").exists());
    assert!(!host.run().join("steps/step-31.meta.json").exists());
}

#[test]
fn the_tool_limit_counts_blocks_and_the_rest_are_answered_not_run() {
    let host = Host::git(&[("README.md", "demo\n")]);
    let reply = "##file:one.txt\n```\n1\n```\n##file:two.txt\n```\n2\n```\n";
    let mock = MockServer::start(vec![
        Turn::reply(Reply::new().text(reply)),
        Turn::reply(Reply::new().text("never asked for")),
    ]);
    let out = run(&host, &mock, "text", &["--max-tools", "1"]);
    // Stopped by the limit: the patch is saved, not applied.
    assert_eq!(out.status.code(), Some(4), "{}", describe(&out));
    assert!(!host.project.join("one.txt").exists());
    let patch = std::fs::read_to_string(host.run().join("session.patch")).unwrap();
    assert!(patch.contains("+++ b/one.txt"), "{patch}");
    assert!(!patch.contains("two.txt"), "{patch}");
    assert_eq!(mock.requests().len(), 1, "the limit ends the run");
    assert_eq!(mock.pending_turns(), 1);
    let db = &host.sessions()[0];
    let told = query(
        db,
        "SELECT b.content FROM content_blocks b JOIN messages m ON m.id = b.message_id \
         WHERE m.role = 'user' AND b.content LIKE '[ah: results%'",
    );
    let told = told[0][0].as_str().unwrap_or_default();
    assert!(told.contains("1. ##file:one.txt: done"), "{told}");
    assert!(
        told.contains("2. ##file:two.txt: not run: the tool call limit (--max-tools) was reached"),
        "{told}"
    );
}
