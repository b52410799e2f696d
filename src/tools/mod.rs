//! The model's tools: their specs (sent to the API), input handling, and the
//! implementations of `read`, `write`, `edit` and `bash`.
//!
//! File tools act directly on the host-side work directory (the same directory
//! the sandbox mounts at `/work`), always through [`path::resolve`], which
//! confines every path to that directory, and [`fs_beneath`], which opens it
//! relative to a handle of that directory so a later swap cannot escape.
//! Commands go through [`Exec`], which the sandbox layer implements, so this
//! layer never knows about containers.

pub mod bash;
pub mod edit;
pub mod fs_beneath;
pub mod input;
pub mod path;
pub mod read;
#[cfg(test)]
mod test_exec;
pub mod truncate;
pub mod write;

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::llm::ToolDef;

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

/// The tool definitions sent to the API, in a stable order.
pub fn specs() -> Vec<ToolDef> {
    vec![read::spec(), write::spec(), edit::spec(), bash::spec()]
}

/// Runs the tool `name` with `input`. Unknown tools and bad input are error
/// results for the model, never a crash.
pub async fn call(name: &str, input: &Value, exec: &dyn Exec) -> ToolOutput {
    match name {
        "read" => read::run(input, exec).await,
        "write" => write::run(input, exec).await,
        "edit" => edit::run(input, exec).await,
        "bash" => bash::run(input, exec).await,
        other => ToolOutput::error(format!(
            "unknown tool \"{other}\": the tools are read, write, edit and bash"
        )),
    }
}
