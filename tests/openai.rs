//! Whole runs through the real binary with an OpenAI-API model (`-m
//! openai:…`, `-m ollama:…`) against the mock's `/v1/chat/completions`
//! route, `--backend none`: what ah sends (system message, tools with
//! `apply_patch` instead of `edit`, tool results as `role: tool`), how
//! streamed tool calls run, how `apply_patch` lands on the host all or
//! nothing, and how rate limits are retried.

use std::process::Output;
use std::time::{Duration, Instant};

use crate::support::host::{Host, describe, json_file, query};
use crate::support::mock::{MockServer, RecordedRequest, Reply, Turn};
use serde_json::{Value, json};

fn run(host: &Host, mock: &MockServer, model: &str, extra: &[&str], task: &str) -> Output {
    host.ah_openai(&mock.openai_url())
        .args(["--backend", "none", "--review", "auto", "-m", model])
        .args(extra)
        .arg(task)
        .output()
        .unwrap_or_else(|e| panic!("run ah: {e}"))
}

/// The `role: tool` message answering `call_id` in `request`.
fn tool_message<'a>(request: &'a RecordedRequest, call_id: &str) -> &'a Value {
    request
        .messages()
        .iter()
        .find(|m| m["role"] == json!("tool") && m["tool_call_id"] == json!(call_id))
        .unwrap_or_else(|| panic!("no tool message for {call_id} in {}", request.body))
}

fn patch_turn(id: &str, patch: &str) -> Turn {
    Turn::reply(Reply::new().tool_use(id, "apply_patch", json!({ "input": patch })))
}

#[test]
fn a_text_answer_from_an_openai_model() {
    let host = Host::git(&[("a.txt", "one\n")]);
    // Seven-byte HTTP chunks split SSE frames and JSON anywhere.
    let mock = MockServer::start(vec![
        Turn::reply(Reply::new().text("Hello from GPT.").usage(900, 12)).chunk_size(7),
    ]);
    let out = run(&host, &mock, "openai:gpt-4.1", &[], "say hi");
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("Hello from GPT."));

    let requests = mock.requests();
    assert_eq!(requests.len(), 1);
    let first = &requests[0];
    assert_eq!(first.path, "/v1/chat/completions");
    assert_eq!(first.header("authorization"), Some("Bearer sk-test-openai"));
    assert_eq!(first.header("x-api-key"), None, "no Anthropic key leaks");
    assert_eq!(first.body["model"], json!("gpt-4.1"));
    assert_eq!(first.body["stream"], json!(true));
    assert_eq!(first.body["stream_options"], json!({"include_usage": true}));
    assert!(first.body["max_completion_tokens"].as_u64().is_some());
    let sent = first.messages();
    assert_eq!(sent[0]["role"], json!("system"));
    assert!(
        sent[0]["content"]
            .as_str()
            .unwrap_or("")
            .contains("You are ah")
    );
    assert_eq!(sent[1], json!({"role": "user", "content": "say hi"}));

    // OpenAI models edit with apply_patch; Claude models keep edit.
    let tools: Vec<&str> = first.body["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {}", first.body))
        .iter()
        .map(|t| {
            assert_eq!(t["type"], json!("function"), "{t}");
            assert_eq!(t["function"]["parameters"]["type"], json!("object"), "{t}");
            t["function"]["name"].as_str().unwrap_or_default()
        })
        .collect();
    assert_eq!(tools, ["read", "write", "apply_patch", "bash"]);
    // The system prompt names the edit tool the model has, not Claude's.
    let system = first.system();
    assert!(
        system.contains(
            "Prefer `apply_patch` for changes to existing files and `write` for new files."
        ) && system.contains("- `apply_patch` needs the context lines"),
        "{system}"
    );
    for absent in ["`edit`", "old_string", "{{"] {
        assert!(!system.contains(absent), "{absent} in {system}");
    }
    // The patch goes in `input`, as in the apply_patch tool the models know.
    let apply_patch = &first.body["tools"][2]["function"]["parameters"];
    assert_eq!(apply_patch["required"], json!(["input"]), "{apply_patch}");
    assert_eq!(apply_patch["properties"]["input"]["type"], json!("string"));

    let db = &host.sessions()[0];
    let usage = query(
        db,
        "SELECT input_tokens, output_tokens FROM messages WHERE role = 'assistant'",
    );
    assert_eq!(usage, vec![vec![json!(900), json!(12)]]);
    let manifest = json_file(&host.run().join("manifest.json"));
    assert_eq!(manifest["model"], json!("openai:gpt-4.1"));
}

#[test]
fn a_tool_call_streamed_in_pieces_runs_and_its_result_goes_back_as_role_tool() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let input = json!({"path": "notes/ünï.txt", "content": "line \"1\"\n\tdone\n"});
    let mock = MockServer::start(vec![
        // One- and two-character argument pieces cut inside escapes and
        // multi-byte characters' neighbours; 5-byte HTTP chunks cut the rest.
        Turn::reply(
            Reply::new()
                .text("Writing.")
                .tool_use("call_w1", "write", input.clone()),
        )
        .piece_size(2)
        .chunk_size(5),
        Turn::reply(Reply::new().text("Written.")),
    ]);
    let out = run(&host, &mock, "openai:gpt-4o", &[], "write the notes");
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(host.read("notes/ünï.txt"), "line \"1\"\n\tdone\n");

    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    let sent = requests[1].messages();
    let assistant = &sent[sent.len() - 2];
    assert_eq!(assistant["role"], json!("assistant"));
    assert_eq!(assistant["content"], json!("Writing."));
    let call = &assistant["tool_calls"][0];
    assert_eq!(call["id"], json!("call_w1"));
    assert_eq!(call["function"]["name"], json!("write"));
    let arguments: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap_or(""))
            .unwrap_or_else(|e| panic!("arguments are JSON: {e}"));
    assert_eq!(arguments, input);
    let result = tool_message(&requests[1], "call_w1");
    assert_eq!(sent.last(), Some(result), "the result is the last message");
    assert_eq!(
        result["content"],
        json!("Created /work/notes/ünï.txt (15 bytes)")
    );
}

#[test]
fn apply_patch_adds_updates_moves_and_deletes_on_the_host() {
    let host = Host::git(&[
        (
            "src/lib.py",
            "def f():\n    return 1\n\n\ndef g():\n    return 2\n",
        ),
        ("old/name.txt", "keep me\n"),
        ("gone.txt", "bye\n"),
    ]);
    let patch = "*** Begin Patch\n\
        *** Add File: docs/new.md\n+# New\n+text\n\
        *** Update File: src/lib.py\n@@ def g():\n-    return 2\n+    return 3\n\
        *** Update File: old/name.txt\n*** Move to: new/name.txt\n-keep me\n+kept\n\
        *** Delete File: gone.txt\n\
        *** End Patch";
    let mock = MockServer::start(vec![
        patch_turn("call_p1", patch),
        Turn::reply(Reply::new().text("Patched.")),
    ]);
    let out = run(&host, &mock, "openai:gpt-4.1", &[], "reshape");
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(host.read("docs/new.md"), "# New\ntext\n");
    assert_eq!(
        host.read("src/lib.py"),
        "def f():\n    return 1\n\n\ndef g():\n    return 3\n"
    );
    assert_eq!(host.read("new/name.txt"), "kept\n");
    assert!(!host.project.join("old/name.txt").exists());
    assert!(!host.project.join("gone.txt").exists());
    assert_eq!(host.git_out(&["status", "--porcelain"]), "", "committed");

    let requests = mock.requests();
    let result = tool_message(&requests[1], "call_p1");
    assert_eq!(
        result["content"],
        json!(
            "Applied the patch:\nA /work/docs/new.md\nM /work/src/lib.py\n\
             M /work/new/name.txt (moved from /work/old/name.txt)\nD /work/gone.txt\n"
        )
    );
    // One step, committed, touching all five paths.
    let step = json_file(&host.run().join("steps/step-1.meta.json"));
    assert_eq!(step["tool"], json!("apply_patch"));
    assert!(
        step["commit"].as_str().is_some_and(|c| c.len() == 40),
        "{step}"
    );
    let mut changed: Vec<&str> = step["changed"]
        .as_array()
        .unwrap_or_else(|| panic!("{step}"))
        .iter()
        .filter_map(|c| c["path"].as_str())
        .collect();
    changed.sort_unstable();
    assert_eq!(
        changed,
        [
            "docs/new.md",
            "gone.txt",
            "new/name.txt",
            "old/name.txt",
            "src/lib.py"
        ]
    );
}

#[test]
fn a_failing_hunk_changes_nothing_and_the_model_is_told_which() {
    let host = Host::git(&[("a.txt", "alpha\n"), ("b.txt", "one\ntwo\n")]);
    let patch = "*** Begin Patch\n\
        *** Add File: c.txt\n+new\n\
        *** Update File: a.txt\n-alpha\n+ALPHA\n\
        *** Update File: b.txt\n@@\n-one\n+ONE\n@@ two\n-three\n+THREE\n\
        *** End Patch";
    let mock = MockServer::start(vec![
        patch_turn("call_bad", patch),
        Turn::reply(Reply::new().text("I will read b.txt again.")),
    ]);
    let out = run(&host, &mock, "openai:gpt-4.1", &[], "patch it");
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let requests = mock.requests();
    let result = tool_message(&requests[1], "call_bad");
    let told = result["content"].as_str().unwrap_or_default();
    assert!(
        told.starts_with(
            "Error: hunk 2 of 2 (@@ two) does not match /work/b.txt: its context and '-' \
             lines were not found after hunk 1. It looked for:\n    three\n"
        ),
        "{told}"
    );
    assert!(told.ends_with("Nothing was changed."), "{told}");
    assert_eq!(host.read("a.txt"), "alpha\n");
    assert_eq!(host.read("b.txt"), "one\ntwo\n");
    assert!(!host.project.join("c.txt").exists());
    let run_dir = host.run();
    let patch_file = std::fs::read_to_string(run_dir.join("session.patch")).unwrap_or_default();
    assert_eq!(patch_file, "", "the run changed nothing");
    let step = json_file(&run_dir.join("steps/step-1.meta.json"));
    assert_eq!(step["commit"], Value::Null, "no commit for a refused patch");
}

#[test]
fn a_denied_path_is_refused_before_anything_is_written() {
    let host = Host::git(&[("a.txt", "a\n"), ("locked/key.txt", "secret\n")]);
    let patch = "*** Begin Patch\n\
        *** Add File: fine.txt\n+fine\n\
        *** Update File: a.txt\n*** Move to: locked/a.txt\n-a\n+b\n\
        *** End Patch";
    let mock = MockServer::start(vec![
        patch_turn("call_deny", patch),
        Turn::reply(Reply::new().text("Understood.")),
    ]);
    let out = run(
        &host,
        &mock,
        "openai:gpt-4.1",
        &["--deny", "locked/**"],
        "move it",
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let told = tool_message(&mock.requests()[1], "call_deny")["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        told.starts_with("Error: writing /work/locked/a.txt is not allowed: "),
        "{told}"
    );
    assert!(!host.project.join("fine.txt").exists());
    assert_eq!(host.read("a.txt"), "a\n");
    let run_dir = host.run();
    // Refused up front: nothing to undo, so no violation was recorded.
    assert!(!run_dir.join("steps/step-1.violation.txt").exists());
    assert_eq!(
        json_file(&run_dir.join("manifest.json"))["violations"],
        json!([])
    );
}

#[test]
fn rate_limits_are_retried_after_retry_after_with_the_openai_message() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(vec![
        Turn::error(429, "rate_limit_exceeded", "Rate limit reached for gpt-4.1").retry_after(1),
        Turn::reply(Reply::new().text("hi")),
    ]);
    let started = Instant::now();
    let out = run(&host, &mock, "openai:gpt-4.1", &[], "say hi");
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "retry-after: 1 must be waited out"
    );
    assert_eq!(mock.requests().len(), 2);
    let db = &host.sessions()[0];
    let retries = query(
        db,
        "SELECT details FROM events WHERE event_type = 'retry' ORDER BY id",
    );
    assert_eq!(retries.len(), 1);
    let reason = retries[0][0].as_str().unwrap_or_default();
    assert!(
        reason.contains("HTTP 429 rate_limit_exceeded: Rate limit reached for gpt-4.1"),
        "{reason}"
    );
}

#[test]
fn a_local_server_gets_no_key_and_a_missing_openai_key_stops_before_any_call() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(vec![Turn::reply(Reply::new().text("local hi"))]);
    let out = run(&host, &mock, "ollama:qwen2.5-coder:7b", &[], "say hi");
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let request = &mock.requests()[0];
    assert_eq!(request.header("authorization"), None);
    assert_eq!(request.body["model"], json!("qwen2.5-coder:7b"));
    // A model ah does not know gets the conservative 8k output limit.
    assert_eq!(request.body["max_tokens"], json!(8192));

    let out = host
        .ah_openai(&mock.openai_url())
        .env_remove("OPENAI_API_KEY")
        .args(["--backend", "none", "-m", "openai:gpt-4o", "say hi"])
        .output()
        .unwrap_or_else(|e| panic!("run ah: {e}"));
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("no API key for provider openai: set OPENAI_API_KEY"),
        "{}",
        describe(&out)
    );
    assert_eq!(mock.requests().len(), 1, "no call without a key");

    let out = host
        .ah_openai(&mock.openai_url())
        .args(["--backend", "none", "-m", "openai:", "say hi"])
        .output()
        .unwrap_or_else(|e| panic!("run ah: {e}"));
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
}

#[test]
fn ah_compact_asks_the_provider_of_the_session_last_run() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mut script: Vec<Turn> = (1..=3)
        .map(|n| {
            Turn::reply(Reply::new().tool_use(
                format!("call_{n}"),
                "bash",
                json!({ "command": format!("echo step {n}") }),
            ))
        })
        .collect();
    script.push(Turn::reply(Reply::new().text("All steps done.")));
    script.push(Turn::reply(Reply::new().text("Summary: three echoes ran.")));
    let mock = MockServer::start(script);
    let out = run(&host, &mock, "ollama:qwen2.5-coder:7b", &[], "echo thrice");
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));

    let out = host
        .ah_openai(&mock.openai_url())
        .arg("compact")
        .output()
        .unwrap_or_else(|e| panic!("run ah compact: {e}"));
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let requests = mock.requests();
    assert_eq!(requests.len(), 5);
    let summary = &requests[4];
    assert_eq!(summary.path, "/v1/chat/completions");
    assert_eq!(summary.body["model"], json!("qwen2.5-coder:7b"));
    assert_eq!(summary.body.get("tools"), None, "a summary offers no tools");
}

#[test]
fn an_openai_context_length_error_compacts_and_retries_once() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mut script: Vec<Turn> = (1..=3)
        .map(|n| {
            Turn::reply(Reply::new().tool_use(
                format!("call_{n}"),
                "bash",
                json!({ "command": format!("echo step {n}") }),
            ))
        })
        .collect();
    script.push(Turn::error(
        400,
        "invalid_request_error",
        "This model's maximum context length is 32768 tokens. However, your messages \
         resulted in 40000 tokens. Please reduce the length of the messages.",
    ));
    script.push(Turn::reply(Reply::new().text("Summary: three echoes ran.")));
    script.push(Turn::reply(Reply::new().text("All done.")));
    let mock = MockServer::start(script);
    // AH_<PROVIDER>_BASE_URL moves any provider, vLLM's too.
    let out = host
        .ah_openai(&mock.openai_url())
        .env("AH_VLLM_BASE_URL", mock.openai_url())
        .args(["--backend", "none", "--review", "never", "-m", "vllm:coder"])
        .arg("echo thrice")
        .output()
        .unwrap_or_else(|e| panic!("run ah: {e}"));
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("All done."));
    let requests = mock.requests();
    assert_eq!(requests.len(), 6, "the refused call is retried once");
    assert_eq!(requests[4].body.get("tools"), None, "the summary request");
    let retried = serde_json::to_string(&requests[5].body["messages"]).unwrap_or_default();
    assert!(retried.contains("Summary: three echoes ran."), "{retried}");
    let db = &host.sessions()[0];
    let started = query(
        db,
        "SELECT details FROM events WHERE event_type = 'compaction_start'",
    );
    assert_eq!(started.len(), 1);
    assert!(
        started[0][0]
            .as_str()
            .unwrap_or_default()
            .contains("overflow"),
        "{started:?}"
    );
}
