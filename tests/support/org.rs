//! Helpers of the `ah org` tests: turns for an agent's script, running
//! `ah org` against the mock (to its end, or in the background while a
//! command of an agent waits), and reading what each agent was sent.

use std::path::PathBuf;
use std::process::{Child, Output, Stdio};
use std::time::Duration;

use super::host::{Host, wait_until};
use super::mock::{MockServer, RecordedRequest, Reply, Turn};
use serde_json::{Value, json};

/// A turn that ends with `text`.
pub(crate) fn say(text: &str) -> Turn {
    Turn::reply(Reply::new().text(text))
}

/// A turn that calls `tool` with `input`.
pub(crate) fn call(id: &str, tool: &str, input: Value) -> Turn {
    Turn::reply(Reply::new().tool_use(id, tool, input))
}

/// A turn that writes `content` to `path`.
pub(crate) fn write(id: &str, path: &str, content: &str) -> Turn {
    call(id, "write", json!({"path": path, "content": content}))
}

/// `ah org --backend none ARGS`, to its end.
pub(crate) fn org(host: &Host, mock: &MockServer, args: &[&str]) -> Output {
    host.ah(&mock.url())
        .args(["org", "--backend", "none"])
        .args(args)
        .output()
        .unwrap()
}

/// `ah org --backend none --review never ARGS`, started in the background
/// (stderr kept, stdout dropped).
pub(crate) fn spawn_org(host: &Host, mock: &MockServer, args: &[&str]) -> Child {
    host.ah(&mock.url())
        .args(["org", "--backend", "none", "--review", "never"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// A command that marks it started, then sleeps a minute (to be cut), and
/// waiting for its mark.
pub(crate) struct Sleeper {
    pub mark: PathBuf,
    pub command: String,
}

impl Sleeper {
    pub(crate) fn new(host: &Host) -> Sleeper {
        let mark = host.root.path().join("started");
        let command = format!("touch '{}'; sleep 60", mark.display());
        Sleeper { mark, command }
    }

    /// Waits until the command runs.
    pub(crate) fn wait(&self) {
        wait_until("the command to start", Duration::from_secs(30), || {
            self.mark.exists()
        });
    }
}

/// The id of the project's one session.
pub(crate) fn session_id(host: &Host) -> String {
    let sessions = host.sessions();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    sessions[0]
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .to_string()
}

/// The agent of each request, in order.
pub(crate) fn agents_of(mock: &MockServer) -> Vec<String> {
    mock.requests()
        .iter()
        .map(|request| request.agent().unwrap_or_else(|| "?".into()))
        .collect()
}

/// The requests `agent` made.
pub(crate) fn of(mock: &MockServer, agent: &str) -> Vec<RecordedRequest> {
    mock.requests()
        .into_iter()
        .filter(|request| request.agent().as_deref() == Some(agent))
        .collect()
}

/// Every text of the last message of `request` (a string, or its blocks'
/// texts and tool results).
pub(crate) fn last_user_text(request: &RecordedRequest) -> String {
    let last = request.last_message();
    match &last["content"] {
        Value::String(text) => text.clone(),
        blocks => blocks
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|b| b["text"].as_str().or(b["content"].as_str()))
            .collect::<Vec<_>>()
            .join("\n"),
    }
}
