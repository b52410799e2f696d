//! The model's tools: their specs (sent to the API), input validation, and the
//! implementations of `read`, `write`, `edit`, `apply_patch` and `bash`. A
//! model is offered `edit` or `apply_patch`, by its [`EditFormat`].
//!
//! [`call`] checks every input against its tool's `input_schema` ([`schema`])
//! before the tool runs, so a bad call has no side effect and the model gets
//! every violation at once; the tools then read typed fields ([`input::Input`]).
//!
//! File tools act directly on the host-side work directory (the same directory
//! the sandbox mounts at `/work`), always through [`path::resolve`], which
//! confines every path to that directory, and [`fs_beneath`], which opens it
//! relative to a handle of that directory so a later swap cannot escape.
//! Commands go through [`Exec`], which the sandbox layer implements, so this
//! layer never knows about containers.

#![forbid(unsafe_code)]

pub mod apply_patch;
pub mod bash;
pub mod bounds;
pub mod edit;
pub mod fs_beneath;
pub mod input;
pub mod mcp;
pub mod path;
pub mod project;
pub mod read;
pub mod schema;
#[cfg(test)]
mod test_exec;
pub mod truncate;
pub mod write;

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use ah_llm::ToolDef;
use ah_llm::models::EditFormat;
use input::Input;

/// What running one command produced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecOutput {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// `None` when the process was killed by a signal or by the timeout.
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    /// Bytes cut from the middle of stdout and stderr together because a stream
    /// outgrew what a backend keeps in memory; a marker line in the stream shows
    /// where. 0 when nothing was cut.
    pub dropped_bytes: u64,
    /// The sandbox's memory limit when the command hit it, whatever the
    /// command's exit code says. `None` when it did not, or when the
    /// backend cannot tell.
    pub memory_limit_hit: Option<MemoryLimitHit>,
}

/// The sandbox's memory limit was hit during a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryLimitHit {
    /// The limit as given, e.g. `4g`.
    pub limit: String,
    /// How it was hit: the kernel's OOM killer ended a process in the
    /// sandbox's cgroup, or (where a per-process data limit stands in for
    /// the cgroup) an allocation failed and the command said so.
    pub by: HitBy,
}

/// What stopped a command at the memory limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HitBy {
    /// The OOM killer of the sandbox's memory cgroup.
    Cgroup,
    /// The per-process data limit that stands in for the cgroup.
    DataLimit,
}

impl MemoryLimitHit {
    /// What the model is told, as one `[ah: …]` line.
    pub fn told(&self, during: &str) -> String {
        let limit = &self.limit;
        match self.by {
            HitBy::Cgroup => format!(
                "[ah: the sandbox's memory limit ({limit}) was hit {during}: the kernel killed \
                 a process (out of memory), whatever the exit code says; its output may be cut]"
            ),
            HitBy::DataLimit => format!(
                "[ah: the sandbox's memory limit ({limit}) was hit {during}: an allocation was \
                 refused (out of memory) by the per-process data limit that stands in for the \
                 memory cgroup here, whatever the exit code says; its output may be cut]"
            ),
        }
    }
}

/// Where tools act. Implemented by the sandbox layer.
#[async_trait::async_trait]
pub trait Exec: Send + Sync {
    /// Host path of the work directory (seen as `/work` by the model).
    fn root(&self) -> &Path;

    /// Runs `command` with `bash -c` in the work directory; kills the whole
    /// process group when `timeout` passes.
    async fn run(&self, command: &str, timeout: Duration) -> std::io::Result<ExecOutput>;

    /// Says whether the write policy allows writing `rel_path` (relative to the
    /// work root). `Err` carries the reason given to the model.
    fn check_write(&self, rel_path: &str) -> Result<(), String>;

    /// How much of each tool's output the model gets.
    fn limits(&self) -> OutputLimits {
        OutputLimits::default()
    }

    /// Seconds a `bash` call runs when the model names no timeout.
    fn bash_timeout(&self) -> u64 {
        bash::DEFAULT_TIMEOUT
    }

    /// Where this call's whole output is kept, named when the model's copy
    /// is cut.
    fn full_output(&self) -> Option<String> {
        None
    }
}

/// Caps on what the model gets of a tool's output, in characters (bash also
/// in lines). The whole output is kept in the step files and the session.
/// The lines a tool adds after the output (what was cut and how to see the
/// rest, bash's exit status, read's next offset) come on top of the cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputLimits {
    pub read: usize,
    pub bash: usize,
    pub bash_lines: usize,
    pub edit: usize,
    pub write: usize,
}

impl Default for OutputLimits {
    fn default() -> OutputLimits {
        OutputLimits {
            read: 50_000,
            bash: 30_000,
            bash_lines: 256,
            edit: 10_000,
            write: 1_000,
        }
    }
}

impl OutputLimits {
    /// The smallest character cap accepted: below it the cut marker would
    /// take most of the room.
    pub const MIN_CHARS: usize = 200;
    /// The smallest line cap accepted for bash.
    pub const MIN_LINES: usize = 10;
}

/// `shown` (what the model gets of `whole`); when it was cut, a line telling
/// the model how to see the rest (`see_more`, e.g. "narrow the command …")
/// and naming, for people, the step file that keeps the whole output.
/// How the note naming the step file with a cut output's whole text begins
/// and where the path in it ends (loop detection takes the path out, since it
/// differs at every step).
pub const STEP_FILE_NOTE: &str = "[output cut; the whole output is kept in the run's step file (";
pub const STEP_FILE_NOTE_END: &str = "); ";

fn note_full_output(shown: String, whole: &str, exec: &dyn Exec, see_more: &str) -> String {
    if shown == whole {
        return shown;
    }
    let mut text = shown;
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    match exec.full_output() {
        Some(path) => format!("{text}{STEP_FILE_NOTE}{path}{STEP_FILE_NOTE_END}{see_more}]"),
        None => format!("{text}[output cut; {see_more}]"),
    }
}

/// A command's stdout, then its stderr under a `--- stderr ---` line; each
/// part ends with a newline. The model's text and the stored tool output
/// both join the streams this way.
pub fn joined_output(stdout: &[u8], stderr: &[u8]) -> String {
    let mut text = String::from_utf8_lossy(stdout).into_owned();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    if !stderr.is_empty() {
        let err = String::from_utf8_lossy(stderr);
        let _ = write!(text, "--- stderr ---\n{err}");
        if !err.ends_with('\n') {
            text.push('\n');
        }
    }
    text
}

/// The result of one tool call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// What the model is told.
    pub content: String,
    pub is_error: bool,
    /// Structured facts for the UI and the step record (path, exit code, …).
    pub details: Value,
    /// Raw output for `steps/step-N.out` and `.err`.
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub exit_code: Option<i32>,
    /// Whether the call may have changed files (a step commit follows).
    pub may_change_files: bool,
}

impl ToolOutput {
    /// An error result that changed nothing.
    pub fn error(message: impl Into<String>) -> ToolOutput {
        let content = message.into();
        ToolOutput {
            stderr: content.clone().into_bytes(),
            content,
            is_error: true,
            details: Value::Null,
            stdout: Vec::new(),
            exit_code: None,
            may_change_files: false,
        }
    }
}

/// The tools, in the order the API sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tool {
    Read,
    Write,
    Edit,
    ApplyPatch,
    Bash,
}

impl Tool {
    const ALL: [Tool; 5] = [
        Tool::Read,
        Tool::Write,
        Tool::Edit,
        Tool::ApplyPatch,
        Tool::Bash,
    ];

    fn spec(self) -> ToolDef {
        match self {
            Tool::Read => read::spec(),
            Tool::Write => write::spec(),
            Tool::Edit => edit::spec(),
            Tool::ApplyPatch => apply_patch::spec(),
            Tool::Bash => bash::spec(),
        }
    }

    async fn run(self, input: Input<'_>, exec: &dyn Exec) -> ToolOutput {
        match self {
            Tool::Read => read::run(input, exec).await,
            Tool::Write => write::run(input, exec).await,
            Tool::Edit => edit::run(input, exec).await,
            Tool::ApplyPatch => apply_patch::run(input, exec).await,
            Tool::Bash => bash::run(input, exec).await,
        }
    }

    /// Whether a model with `format` is offered this tool.
    fn offered(self, format: EditFormat) -> bool {
        match self {
            Tool::Edit => format == EditFormat::Edit,
            Tool::ApplyPatch => format == EditFormat::ApplyPatch,
            Tool::Read | Tool::Write | Tool::Bash => true,
        }
    }
}

/// The longest tool name the model APIs take.
pub const MAX_TOOL_NAME: usize = 64;

/// Whether the model APIs take `name` as a tool's name: 1 to
/// [`MAX_TOOL_NAME`] ASCII letters, digits, `_` or `-`.
pub fn valid_tool_name(name: &str) -> bool {
    (1..=MAX_TOOL_NAME).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The names of every tool ah has, both edit tools included, in a stable
/// order: read, write, edit, apply_patch, bash.
pub fn names() -> Vec<String> {
    Tool::ALL.map(|tool| tool.spec().name).into()
}

/// The tools offered to a model whose edit format is `format`.
pub fn specs(format: EditFormat) -> Vec<ToolDef> {
    Tool::ALL
        .into_iter()
        .filter(|tool| tool.offered(format))
        .map(Tool::spec)
        .collect()
}

/// Runs the tool `name` with `input` once `input` has passed the tool's
/// schema. Unknown tools and bad input are error results for the model that
/// changed nothing, never a crash. Both edit tools are known whichever one
/// the model was offered (a session may change models).
pub async fn call(name: &str, input: &Value, exec: &dyn Exec) -> ToolOutput {
    let Some((tool, spec)) = Tool::ALL
        .into_iter()
        .map(|tool| (tool, tool.spec()))
        .find(|(_, spec)| spec.name == name)
    else {
        return ToolOutput::error(format!(
            "unknown tool \"{name}\": the tools are {}",
            tool_names()
        ));
    };
    match Input::check(&spec, input) {
        Ok(input) => tool.run(input, exec).await,
        Err(message) => ToolOutput::error(message),
    }
}

/// `read, write, edit, apply_patch and bash`.
fn tool_names() -> String {
    let names: Vec<String> = Tool::ALL.map(|tool| tool.spec().name).into();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => names.concat(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::test_exec::TestExec;

    fn names(format: EditFormat) -> Vec<String> {
        specs(format).into_iter().map(|spec| spec.name).collect()
    }

    #[test]
    fn the_edit_tool_offered_follows_the_edit_format() {
        assert_eq!(names(EditFormat::Edit), ["read", "write", "edit", "bash"]);
        assert_eq!(
            names(EditFormat::ApplyPatch),
            ["read", "write", "apply_patch", "bash"]
        );
    }

    #[tokio::test]
    async fn an_unknown_tool_is_an_error_naming_the_tools() {
        let exec = TestExec::new();
        let out = call("patch", &json!({"patch": ""}), &exec).await;
        assert!(out.is_error && !out.may_change_files);
        assert_eq!(
            out.content,
            "unknown tool \"patch\": the tools are read, write, edit, apply_patch and bash"
        );
    }

    #[tokio::test]
    async fn every_tool_refuses_a_non_object_input_before_running() {
        let exec = TestExec::new();
        for spec in Tool::ALL.map(Tool::spec) {
            let out = call(&spec.name, &json!("touch ran"), &exec).await;
            assert!(out.is_error && !out.may_change_files, "{}", spec.name);
            assert_eq!(
                out.content,
                format!(
                    "invalid input for {}: the input must be an object, got a string",
                    spec.name
                )
            );
        }
    }
}
