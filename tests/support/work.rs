//! Scripts for `ah work` tests: the model's turns phase by phase (a phase
//! ends with a turn of plain text), and readers for what a work session
//! leaves: its database, its phase files and the requests of each phase.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::host::Host;
use super::mock::{RecordedRequest, Reply, Turn};

/// Builds the model's turns; every tool call gets a fresh id.
#[derive(Default)]
pub(crate) struct Script {
    turns: Vec<Turn>,
    next_id: usize,
}

impl Script {
    pub(crate) fn new() -> Script {
        Script::default()
    }

    /// One turn calling `tool` with `input`.
    pub(crate) fn call(mut self, tool: &str, input: Value) -> Script {
        self.next_id += 1;
        let id = format!("toolu_{}", self.next_id);
        self.turns
            .push(Turn::reply(Reply::new().tool_use(id, tool, input)));
        self
    }

    pub(crate) fn bash(self, command: &str) -> Script {
        self.call("bash", json!({ "command": command }))
    }

    /// A `report` call with `content`.
    pub(crate) fn report(self, content: &str) -> Script {
        self.call("report", json!({ "content": content }))
    }

    /// A `verdict` call.
    pub(crate) fn verdict(self, decision: &str, summary: &str) -> Script {
        self.call(
            "verdict",
            json!({ "decision": decision, "summary": summary }),
        )
    }

    /// The turn that ends the phase's loop.
    pub(crate) fn end(mut self, text: &str) -> Script {
        self.turns.push(Turn::reply(Reply::new().text(text)));
        self
    }

    pub(crate) fn turns(self) -> Vec<Turn> {
        self.turns
    }
}

/// The one work session database under `.ah/` (`work-<ulid>.db`).
pub(crate) fn work_db(host: &Host) -> PathBuf {
    let mut dbs: Vec<PathBuf> = std::fs::read_dir(host.project.join(".ah"))
        .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    dbs.retain(|p| {
        p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
            n.starts_with("work-") && n.ends_with(".db") && !n.ends_with(".queue.db")
        })
    });
    assert_eq!(dbs.len(), 1, "expected one work session db, found {dbs:?}");
    dbs.remove(0)
}

/// A phase file under the run's `phases/`.
pub(crate) fn phase_file(run: &Path, rel: &str) -> String {
    let path = run.join("phases").join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The phase a request belongs to, from its system prompt's `# Phase:` line.
pub(crate) fn phase_of(request: &RecordedRequest) -> String {
    let system = request.body["system"].as_str().unwrap_or_default();
    system
        .lines()
        .find_map(|l| l.strip_prefix("# Phase: "))
        .unwrap_or_else(|| panic!("no phase in the system prompt:\n{system}"))
        .to_string()
}

/// The tool names a request offered.
pub(crate) fn tools_of(request: &RecordedRequest) -> Vec<String> {
    request.body["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {}", request.body))
        .iter()
        .map(|t| t["name"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The text of every block of a request's messages, joined (to look for
/// what the model was told).
pub(crate) fn all_text(request: &RecordedRequest) -> String {
    let mut text = String::new();
    for message in request.body["messages"].as_array().into_iter().flatten() {
        for block in message["content"].as_array().into_iter().flatten() {
            for key in ["text", "content"] {
                if let Some(s) = block[key].as_str() {
                    text.push_str(s);
                    text.push('\n');
                }
            }
        }
    }
    text
}

/// Checks what the check phase's command `test -f made.txt && echo
/// STILL-THERE; cat a.txt; ls` told, after check's own change to `/work`
/// (`rm made.txt`, `three` appended to a.txt) was undone: `/work` is as the
/// do phase left it (made.txt there, a.txt `one\ntwo\n`), and plan's
/// undone new.txt is not.
pub(crate) fn sees_what_do_left(after: &str) {
    assert!(after.contains("STILL-THERE"), "{after}");
    assert!(
        after.contains("one\ntwo\n") && !after.contains("three"),
        "{after}"
    );
    assert!(!after.lines().any(|l| l == "new.txt"), "ls: {after}");
}
