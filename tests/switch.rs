//! Switching models mid-session through the real binary: a session starts
//! on Claude (thinking, an `edit` call), continues on an OpenAI-compatible
//! model of a provider defined in `.ah/config.toml` (`-m gpu:coder-7b`:
//! reasoning, an `apply_patch` call, a call id Anthropic would refuse), and
//! goes back to Claude. Both APIs are served by one mock; the tests assert
//! the request bodies each provider got.

use std::process::Output;

use crate::support::host::{Host, describe, query};
use crate::support::mock::{MockServer, RecordedRequest, Reply, Turn};
use serde_json::{Value, json};

const CLAUDE: &str = "claude-sonnet-4-5-20250929";

fn run(host: &Host, mock: &MockServer, model: &str, task: &str) -> Output {
    host.ah(&mock.url())
        .env("GPU_KEY", "k-gpu")
        .args(["--backend", "none", "--review", "auto", "-m", model, task])
        .output()
        .unwrap_or_else(|e| panic!("run ah: {e}"))
}

fn tool_names(request: &RecordedRequest) -> Vec<String> {
    request.body["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {}", request.body))
        .iter()
        .map(|t| {
            t["name"]
                .as_str()
                .or_else(|| t["function"]["name"].as_str())
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

#[test]
fn a_session_moves_from_claude_to_a_configured_openai_server_and_back() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(vec![
        // Run 1, Claude: reasoning with its signature, then an edit.
        Turn::reply(
            Reply::new()
                .thinking("I will edit a.txt.", "sig-claude-1")
                .text("Editing.")
                .tool_use(
                    "toolu_e1",
                    "edit",
                    json!({"path": "a.txt", "old_string": "one", "new_string": "two"}),
                ),
        ),
        Turn::reply(Reply::new().text("Edited on Claude.")),
        // Run 2, the configured OpenAI-compatible server: reasoning without
        // a signature, a patch, and a call id with `:` and `/`.
        Turn::reply(
            Reply::new()
                .thinking("Patch, then look.", "")
                .tool_use(
                    "call_p1",
                    "apply_patch",
                    json!({"input": "*** Begin Patch\n*** Update File: a.txt\n@@\n-two\n+three\n*** End Patch"}),
                )
                .tool_use("call:b/1", "bash", json!({"command": "cat a.txt"})),
        ),
        Turn::reply(Reply::new().text("Patched on GPU.")),
        // Run 3, Claude again.
        Turn::reply(Reply::new().text("Back on Claude.")),
    ]);
    host.write(
        ".ah/config.toml",
        &format!(
            "[providers.gpu]\napi = \"openai-chat\"\nbase_url = \"{}\"\napi_key_env = \"GPU_KEY\"\n",
            mock.openai_url()
        ),
    );

    let out = run(&host, &mock, "sonnet", "make it two");
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(host.read("a.txt"), "two\n");
    let out = run(&host, &mock, "gpu:coder-7b", "now three");
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(host.read("a.txt"), "three\n");
    let out = run(&host, &mock, "sonnet", "what changed?");
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("Back on Claude."));

    let requests = mock.requests();
    assert_eq!(requests.len(), 5);
    let paths: Vec<&str> = requests.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "/v1/messages",
            "/v1/messages",
            "/v1/chat/completions",
            "/v1/chat/completions",
            "/v1/messages"
        ]
    );

    // The configured provider: its key variable, its model, apply_patch.
    let to_gpu = &requests[2];
    assert_eq!(to_gpu.header("authorization"), Some("Bearer k-gpu"));
    assert_eq!(to_gpu.body["model"], json!("coder-7b"));
    assert_eq!(tool_names(to_gpu), ["read", "write", "apply_patch", "bash"]);
    // Claude's turn in Chat Completions shape: its thinking as text, its
    // edit as the equivalent patch under the same id, the result paired.
    let sent = to_gpu.messages();
    let claude_turn = sent
        .iter()
        .find(|m| m["role"] == json!("assistant"))
        .unwrap_or_else(|| panic!("no assistant message in {}", to_gpu.body));
    assert_eq!(
        claude_turn["content"],
        json!("<thinking>\nI will edit a.txt.\n</thinking>\n\nEditing.")
    );
    let call = &claude_turn["tool_calls"][0];
    assert_eq!(call["id"], json!("toolu_e1"));
    assert_eq!(call["function"]["name"], json!("apply_patch"));
    let arguments: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap_or(""))
            .unwrap_or_else(|e| panic!("arguments are JSON: {e}"));
    assert_eq!(
        arguments,
        json!({"input": "*** Begin Patch\n*** Update File: a.txt\n@@\n-one\n+two\n*** End Patch"})
    );
    let result = sent
        .iter()
        .find(|m| m["role"] == json!("tool") && m["tool_call_id"] == json!("toolu_e1"))
        .unwrap_or_else(|| panic!("no result for toolu_e1 in {}", to_gpu.body));
    assert!(
        result["content"].as_str().unwrap_or("").contains("a.txt"),
        "{result}"
    );
    let body = to_gpu.body.to_string();
    assert!(
        !body.contains("sig-claude-1"),
        "no signature leaves Anthropic"
    );
    assert!(!body.contains("\"edit\""), "no call names the edit tool");

    // Back on Claude: its own thinking returns signed, the server's
    // reasoning as text, the patch as text, the odd id rewritten on the
    // call and on its result alike.
    let to_claude = &requests[4];
    assert_eq!(to_claude.body["model"], json!(CLAUDE));
    assert_eq!(tool_names(to_claude), ["read", "write", "edit", "bash"]);
    let sent = to_claude.messages();
    assert_eq!(
        sent[1]["content"][0],
        json!({"type": "thinking", "thinking": "I will edit a.txt.", "signature": "sig-claude-1"})
    );
    assert_eq!(sent[1]["content"][2]["name"], json!("edit"));
    let at = sent
        .iter()
        .position(|m| m.to_string().contains("Patch, then look."))
        .unwrap_or_else(|| panic!("no server turn in {}", to_claude.body));
    let gpu_turn = &sent[at];
    assert_eq!(gpu_turn["role"], json!("assistant"));
    let blocks = gpu_turn["content"]
        .as_array()
        .unwrap_or_else(|| panic!("{gpu_turn}"));
    assert_eq!(
        blocks[0],
        json!({"type": "text", "text": "<thinking>\nPatch, then look.\n</thinking>"})
    );
    assert_eq!(blocks[1]["type"], json!("text"));
    let said = blocks[1]["text"].as_str().unwrap_or_default();
    assert!(
        said.starts_with("[I called the tool `apply_patch`, which is not offered any more, with:\n*** Begin Patch\n*** Update File: a.txt\n@@\n-two\n+three"),
        "{said}"
    );
    assert_eq!(blocks[2]["type"], json!("tool_use"));
    assert_eq!(blocks[2]["name"], json!("bash"));
    let id = blocks[2]["id"].as_str().unwrap_or_default();
    assert!(
        id.starts_with("call_b_1-")
            && id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
        "{id}"
    );
    let answers = sent[at + 1]["content"]
        .as_array()
        .unwrap_or_else(|| panic!("{}", sent[at + 1]));
    assert_eq!(answers[0]["type"], json!("tool_result"));
    assert_eq!(
        answers[0]["tool_use_id"],
        json!(id),
        "the pair stays paired"
    );
    assert_eq!(answers[0]["content"], json!("three\nexit code: 0"));
    let told = answers[1]["text"].as_str().unwrap_or_default();
    assert!(
        told.starts_with("[The `apply_patch` call returned:\nApplied the patch:\nM /work/a.txt"),
        "{told}"
    );

    // The session records who answered each message.
    let db = &host.sessions()[0];
    let models: Vec<Value> = query(
        db,
        "SELECT model FROM messages WHERE role = 'assistant' ORDER BY rowid",
    )
    .into_iter()
    .map(|row| row[0].clone())
    .collect();
    assert_eq!(
        models,
        [
            json!(CLAUDE),
            json!(CLAUDE),
            json!("coder-7b"),
            json!("coder-7b"),
            json!(CLAUDE)
        ]
    );
}

#[test]
fn a_model_alias_names_its_provider_and_edit_format_and_a_bad_table_stops_the_run() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(vec![Turn::reply(Reply::new().text("local hi"))]);
    host.write(
        ".ah/config.toml",
        &format!(
            "[providers.gpu]\napi = \"openai-chat\"\nbase_url = \"{}\"\n\n\
             [models.local]\nprovider = \"gpu\"\nid = \"coder-7b\"\nedit_format = \"edit\"\n\
             max_output_tokens = 1234\n",
            mock.openai_url()
        ),
    );
    let out = run(&host, &mock, "local", "say hi");
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let request = &mock.requests()[0];
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(
        request.header("authorization"),
        None,
        "no key variable, no key"
    );
    assert_eq!(request.body["model"], json!("coder-7b"));
    assert_eq!(request.body["max_tokens"], json!(1234));
    assert_eq!(tool_names(request), ["read", "write", "edit", "bash"]);
    let manifest = crate::support::host::json_file(&host.run().join("manifest.json"));
    assert_eq!(manifest["model"], json!("gpu:coder-7b"));

    host.write(
        ".ah/config.toml",
        "[providers.gpu]\napi = \"openai-chat\"\nbase_url = \"http://127.0.0.1:9/v1\"\nkey_env = \"K\"\n",
    );
    let out = run(&host, &mock, "gpu:coder-7b", "say hi");
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(".ah/config.toml:4: unknown field `key_env`"),
        "{stderr}"
    );
    assert_eq!(mock.requests().len(), 1, "no call with a bad configuration");
}
