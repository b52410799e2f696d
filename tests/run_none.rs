//! A whole run through the real binary with `--backend none` (tools run on a
//! copy, unsandboxed), a scripted mock model, and a real git host repo:
//! what ah sends, what it stores, what it leaves on disk, and what reaches
//! the host.

use crate::support::host::{Host, describe, json_file, query};
use crate::support::mock::{MockServer, Reply, Turn};
use serde_json::{Value, json};

fn write_edit_bash_script() -> Vec<Turn> {
    vec![
        Turn::reply(
            Reply::new()
                .text("I'll add the notes file first.")
                .tool_use(
                    "toolu_1",
                    "write",
                    json!({"path": "notes/new.txt", "content": "fresh\n"}),
                ),
        ),
        Turn::reply(Reply::new().tool_use(
            "toolu_2",
            "edit",
            json!({"path": "/work/greet.txt", "old_string": "hello", "new_string": "hi"}),
        )),
        Turn::reply(Reply::new().tool_use(
            "toolu_3",
            "bash",
            json!({"command": "echo built > out.log && cat greet.txt && echo oops >&2"}),
        )),
        Turn::reply(Reply::new().text("Done: greeting shortened.")),
    ]
}

#[test]
fn a_run_writes_edits_runs_bash_and_applies_to_the_host() {
    let host = Host::git(&[("greet.txt", "hello world\n"), ("src/keep.txt", "keep\n")]);
    let mock = MockServer::start(write_edit_bash_script());
    let out = host
        .ah(&mock.url())
        .args([
            "--backend",
            "none",
            "--review",
            "auto",
            "shorten the greeting",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("Done: greeting shortened."));

    // The host got exactly the run's changes, committed with the task.
    assert_eq!(host.read("greet.txt"), "hi world\n");
    assert_eq!(host.read("notes/new.txt"), "fresh\n");
    assert_eq!(host.read("out.log"), "built\n");
    assert_eq!(
        host.git_out(&["log", "-1", "--format=%s"]).trim(),
        "ah: shorten the greeting"
    );
    assert_eq!(
        host.git_out(&["status", "--porcelain"]),
        "",
        "host left clean"
    );
    let touched = host.git_out(&["show", "--name-only", "--format=", "HEAD"]);
    assert_eq!(
        touched.lines().collect::<Vec<_>>(),
        ["greet.txt", "notes/new.txt", "out.log"]
    );

    // What ah sent: tools with schemas, the system prompt, auth headers, and
    // each tool result paired with its tool_use.
    let requests = mock.requests();
    assert_eq!(requests.len(), 4);
    let first = &requests[0];
    assert_eq!(first.path, "/v1/messages");
    assert_eq!(first.header("x-api-key"), Some("test-key"));
    assert_eq!(first.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(first.body["stream"], json!(true));
    assert_eq!(first.body["model"], json!("claude-opus-4-5-20251101"));
    let tools: Vec<&str> = first.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["read", "write", "edit", "bash"]);
    // The system prompt names the edit tool a Claude model has.
    let system = first.system();
    assert!(
        system.contains("Prefer `edit` for changes to existing files and `write` for new files.")
            && system.contains("- `edit` needs `old_string` to match exactly once"),
        "{system}"
    );
    for absent in ["apply_patch", "{{"] {
        assert!(!system.contains(absent), "{absent} in {system}");
    }
    for tool in first.body["tools"].as_array().unwrap() {
        assert_eq!(tool["input_schema"]["type"], json!("object"), "{tool}");
    }
    assert!(
        first.body["system"]
            .as_str()
            .unwrap()
            .contains("You are ah")
    );
    assert_eq!(
        first.body["messages"][0]["content"][0]["text"],
        json!("shorten the greeting")
    );
    for (i, id) in ["toolu_1", "toolu_2", "toolu_3"].iter().enumerate() {
        let messages = requests[i + 1].messages();
        assert_eq!(requests[i + 1].tool_result()["tool_use_id"], json!(id));
        let previous = &messages[messages.len() - 2];
        assert_eq!(previous["role"], json!("assistant"));
    }
    let told = requests[3].told();
    assert!(
        told.contains("hi world") && told.contains("oops") && told.contains("exit code: 0"),
        "{told}"
    );

    // The run directory tells the story on its own.
    let run = host.run();
    let patch = std::fs::read_to_string(run.join("session.patch")).unwrap();
    assert!(
        patch.contains("diff --git a/greet.txt b/greet.txt"),
        "{patch}"
    );
    assert!(
        patch
            .lines()
            .any(|l| l.starts_with("index ") && l.len() >= "index ".len() + 81),
        "full index lines:\n{patch}"
    );
    let step1 = json_file(&run.join("steps/step-1.meta.json"));
    assert_eq!(step1["tool"], json!("write"));
    assert!(
        step1["commit"].as_str().is_some_and(|c| c.len() == 40),
        "{step1}"
    );
    assert_eq!(step1["changed"][0]["path"], json!("notes/new.txt"));
    let step3 = json_file(&run.join("steps/step-3.meta.json"));
    assert_eq!(step3["exit_code"], json!(0));
    assert_eq!(
        std::fs::read_to_string(run.join("steps/step-3.out")).unwrap(),
        "hi world\n"
    );
    assert_eq!(
        std::fs::read_to_string(run.join("steps/step-3.err")).unwrap(),
        "oops\n"
    );
    let manifest = json_file(&run.join("manifest.json"));
    assert_eq!(manifest["task"], json!("shorten the greeting"));
    assert_eq!(manifest["backend"], json!("none"));
    assert_eq!(manifest["steps"], json!(3));
    assert_eq!(manifest["applied"], json!(true));
    assert_eq!(manifest["review"]["decision"], json!("applied"));
    assert!(run.join("artifacts/notes/new.txt").is_file());

    // The session DB: 1 prompt + 4 responses + 3 tool-result messages.
    let dbs = host.sessions();
    assert_eq!(dbs.len(), 1);
    let rows = query(
        &dbs[0],
        "SELECT role, seq, stop_reason, model FROM messages ORDER BY seq",
    );
    let roles: Vec<&str> = rows.iter().map(|r| r[0].as_str().unwrap()).collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "user",
            "assistant",
            "user",
            "assistant",
            "user",
            "assistant"
        ]
    );
    assert_eq!(rows[1][2], json!("tool_use"));
    assert_eq!(rows[7][2], json!("end_turn"));
    let results = query(
        &dbs[0],
        "SELECT tool_id, tool_name, tool_output, details FROM content_blocks WHERE block_type = 'tool_result' ORDER BY tool_id",
    );
    assert_eq!(results.len(), 3);
    assert_eq!(results[2][0], json!("toolu_3"));
    assert_eq!(results[2][1], json!("bash"));
    assert!(results[2][2].as_str().unwrap().contains("hi world"));
    let details: Value = serde_json::from_str(results[2][3].as_str().unwrap()).unwrap();
    assert_eq!(details["step"], json!(3));
    assert_eq!(
        details["run_id"].as_str(),
        run.file_name().unwrap().to_str()
    );
}

#[test]
fn unrelated_user_changes_stay_exactly_as_they_were() {
    let host = Host::git(&[
        ("greet.txt", "hello world\n"),
        ("mine.txt", "v1\n"),
        ("staged.txt", "s1\n"),
    ]);
    host.write("mine.txt", "v2 unstaged\n");
    host.write("staged.txt", "s2 staged\n");
    host.git_out(&["add", "staged.txt"]);
    let mock = MockServer::start(vec![
        Turn::reply(Reply::new().tool_use(
            "toolu_1",
            "edit",
            json!({"path": "greet.txt", "old_string": "hello", "new_string": "hey"}),
        )),
        Turn::reply(Reply::new().text("ok")),
    ]);
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "auto", "say hey"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(host.read("greet.txt"), "hey world\n");
    assert_eq!(host.read("mine.txt"), "v2 unstaged\n");
    assert_eq!(host.read("staged.txt"), "s2 staged\n");
    let status = host.git_out(&["status", "--porcelain"]);
    assert!(
        status.contains(" M mine.txt") && status.contains("M  staged.txt"),
        "{status}"
    );
    assert_eq!(
        host.git_out(&["show", "--name-only", "--format=", "HEAD"])
            .trim(),
        "greet.txt"
    );
}

#[test]
fn review_never_saves_the_patch_and_apply_lands_it_later() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(vec![
        Turn::reply(Reply::new().tool_use(
            "toolu_1",
            "write",
            json!({"path": "a.txt", "content": "two\n"}),
        )),
        Turn::reply(Reply::new().text("ok")),
    ]);
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "never", "change a"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(host.read("a.txt"), "one\n", "never must not touch the host");
    let run = host.run();
    let patch_path = run.join("session.patch");
    assert!(String::from_utf8_lossy(&out.stderr).contains(&patch_path.display().to_string()));

    let run_id = run.file_name().unwrap().to_str().unwrap().to_string();
    let out = host
        .ah(&mock.url())
        .args(["apply", &run_id[..10], "--no-commit"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(host.read("a.txt"), "two\n");
    assert_eq!(
        host.git_out(&["log", "--format=%s"]).trim(),
        "initial",
        "--no-commit"
    );
    assert_eq!(
        json_file(&run.join("manifest.json"))["applied"],
        json!(true)
    );
}

#[test]
fn a_host_that_is_not_a_git_repository_gets_a_plain_apply() {
    let host = Host::plain(&[("a.txt", "one\n")]);
    let mock = MockServer::start(vec![
        Turn::reply(Reply::new().tool_use(
            "toolu_1",
            "write",
            json!({"path": "b.txt", "content": "new\n"}),
        )),
        Turn::reply(Reply::new().text("ok")),
    ]);
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "auto", "add b"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(host.read("b.txt"), "new\n");
    assert!(!host.project.join(".git").exists());
}

#[test]
fn the_next_prompt_continues_the_latest_session_and_n_starts_a_new_one() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(vec![
        Turn::reply(Reply::new().text("first answer")),
        Turn::reply(Reply::new().text("second answer")),
        Turn::reply(Reply::new().text("third answer")),
    ]);
    for (prompt, new) in [("first", false), ("second", false), ("third", true)] {
        let mut cmd = host.ah(&mock.url());
        cmd.args(["--backend", "none", "--review", "never"]);
        if new {
            cmd.arg("-n");
        }
        let out = cmd.arg(prompt).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    }
    let requests = mock.requests();
    let texts = |i: usize| -> Vec<String> {
        requests[i].body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                m["content"][0]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect()
    };
    assert_eq!(texts(1), ["first", "first answer", "second"]);
    assert_eq!(texts(2), ["third"]);
    assert_eq!(host.sessions().len(), 2);
}

#[test]
fn usage_errors_exit_2_and_say_what_to_do() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(vec![]);
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no prompt given"));
    let out = host
        .ah(&mock.url())
        .args(["--review", "sometimes", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(mock.requests().is_empty());
    assert!(
        !host.project.join(".ah/runs").exists(),
        "nothing prepared on a usage error"
    );
}

#[test]
fn missing_credentials_fail_before_anything_is_copied() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let out = host
        .ah("http://127.0.0.1:9")
        .env_remove("ANTHROPIC_API_KEY")
        .args(["--backend", "none", "task"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("ANTHROPIC_API_KEY"));
    assert!(host.runs().is_empty());
}

#[test]
fn thinking_blocks_are_sent_back_with_their_signature() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(vec![
        Turn::reply(
            Reply::new()
                .thinking("let me look at a.txt first", "sig-abc123")
                .tool_use("toolu_1", "read", json!({"path": "a.txt"})),
        ),
        Turn::reply(Reply::new().text("it says one")),
    ]);
    let out = host
        .ah(&mock.url())
        .args([
            "--backend",
            "none",
            "--review",
            "never",
            "what is in a.txt?",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let requests = mock.requests();
    let assistant = &requests[1].body["messages"][1];
    assert_eq!(assistant["role"], json!("assistant"));
    assert_eq!(
        assistant["content"][0],
        json!({"type": "thinking", "thinking": "let me look at a.txt first", "signature": "sig-abc123"})
    );
    assert_eq!(assistant["content"][1]["type"], json!("tool_use"));
    assert_eq!(assistant["content"][1]["input"], json!({"path": "a.txt"}));
    let result = &requests[1].body["messages"][2]["content"][0];
    assert!(
        result["content"].as_str().unwrap().contains("one"),
        "{result}"
    );
}

#[test]
fn max_tools_stops_the_run_answers_every_call_and_applies_nothing() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(vec![
        Turn::reply(Reply::new().tool_use(
            "toolu_1",
            "bash",
            json!({"command": "echo 1 > one.txt"}),
        )),
        Turn::reply(
            Reply::new()
                .tool_use("toolu_2", "bash", json!({"command": "echo 2 > two.txt"}))
                .tool_use("toolu_3", "bash", json!({"command": "echo 3 > three.txt"})),
        ),
    ]);
    let out = host
        .ah(&mock.url())
        .args([
            "--backend",
            "none",
            "--review",
            "auto",
            "--max-tools",
            "2",
            "count",
        ])
        .output()
        .unwrap();
    // Not done: its own exit code, and `--review auto` applies nothing.
    assert_eq!(out.status.code(), Some(4), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("stopped: the run reached the tool call limit (--max-tools 2)"),
        "{stderr}"
    );
    assert_eq!(mock.requests().len(), 2, "no request after the limit");
    assert!(!host.project.join("one.txt").exists(), "not applied");
    let run = host.run();
    let patch = std::fs::read_to_string(run.join("session.patch")).unwrap();
    assert!(
        patch.contains("two.txt") && !patch.contains("three.txt"),
        "the patch so far is saved; the third call never ran: {patch}"
    );
    let manifest = json_file(&run.join("manifest.json"));
    assert_eq!(manifest["review"]["decision"], json!("stopped"));
    assert_eq!(manifest["applied"], json!(false));
    let db = &host.sessions()[0];
    let results = query(
        db,
        "SELECT tool_id, content FROM content_blocks WHERE block_type = 'tool_result' ORDER BY tool_id",
    );
    assert_eq!(results.len(), 3);
    assert!(results[2][1].as_str().unwrap().contains("--max-tools"));
}

#[test]
fn a_tool_call_cut_off_by_the_output_limit_is_not_run_and_the_model_is_told() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let content = "x".repeat(500);
    let mock = MockServer::start(vec![
        Turn::reply(
            Reply::new()
                .text("writing it all at once")
                .tool_use_cut_off(
                    "toolu_1",
                    "write",
                    json!({"path": "big.txt", "content": content}),
                    60,
                ),
        ),
        Turn::reply(Reply::new().text("I will split it")),
    ]);
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "auto", "write big"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(!host.project.join("big.txt").exists());
    let requests = mock.requests();
    let messages = requests[1].messages();
    assert_eq!(
        messages[1]["content"][1]["input"],
        json!({}),
        "stored as a valid call"
    );
    let result = &messages[2]["content"][0];
    assert_eq!(result["tool_use_id"], json!("toolu_1"));
    assert_eq!(result["is_error"], json!(true));
    assert!(
        result["content"].as_str().unwrap().contains("max_tokens"),
        "{result}"
    );
    assert!(
        host.run()
            .join("steps")
            .read_dir()
            .unwrap()
            .next()
            .is_none(),
        "no step ran"
    );
}
