//! The two tools the work loop answers on the host: `report`, which writes
//! the current phase's file (`plan.md`, `do.md`, `check.md`, `friction.md`)
//! into the run directory, and `verdict`, the act phase's structured
//! decision. Each keeps what it received for the loop to read when the
//! phase's agent loop ends.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::phase::Phase;
use ah_llm::ToolDef;
use ah_record::run::HostTool;
use ah_tools::ToolOutput;

/// The longest report accepted, in bytes: a phase file is handed to the
/// next phases in their first message, so it must stay readable.
pub const MAX_REPORT_BYTES: usize = 64 * 1024;

/// The act phase's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Done,
    Fix,
    Friction,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Done => "done",
            Decision::Fix => "fix",
            Decision::Friction => "friction",
        }
    }
}

/// What the `verdict` tool received.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub decision: Decision,
    pub summary: String,
}

/// `report`: writes one phase file; a second call replaces it.
pub struct ReportTool {
    file_name: String,
    path: PathBuf,
    written: Mutex<bool>,
}

impl ReportTool {
    /// A tool that writes `path`, named `file_name` to the model.
    pub fn new(file_name: &str, path: PathBuf) -> Arc<ReportTool> {
        Arc::new(ReportTool {
            file_name: file_name.to_string(),
            path,
            written: Mutex::new(false),
        })
    }

    /// Whether the phase's file was written.
    pub fn written(&self) -> bool {
        *self.written.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl HostTool for ReportTool {
    fn spec(&self) -> ToolDef {
        ToolDef {
            name: "report".to_string(),
            description: format!(
                "Write this phase's report, {}, in Markdown (the whole file; a second call \
                 replaces it). The report is what the next phases and the user see of this \
                 phase. It is kept outside /work and is not part of the patch.",
                self.file_name
            ),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "content": {"type": "string", "description": "The whole report, in Markdown"}
                },
                "required": ["content"],
                "additionalProperties": false
            }),
        }
    }

    fn call(&self, input: &Value) -> ToolOutput {
        let content = input["content"].as_str().unwrap_or_default();
        if content.trim().is_empty() {
            return ToolOutput::error("the report is empty: write the whole report in `content`");
        }
        if content.len() > MAX_REPORT_BYTES {
            return ToolOutput::error(format!(
                "the report has {} bytes, more than the {MAX_REPORT_BYTES} allowed: shorten it \
                 (quote only the evidence that matters)",
                content.len()
            ));
        }
        if let Err(err) = std::fs::write(&self.path, content) {
            return ToolOutput::error(format!(
                "ah could not save {} ({}: {err}); try once more",
                self.file_name,
                self.path.display()
            ));
        }
        *self.written.lock().unwrap_or_else(PoisonError::into_inner) = true;
        answer(
            format!("{} saved ({} bytes)", self.file_name, content.len()),
            json!({ "path": self.path.display().to_string(), "bytes": content.len() }),
        )
    }
}

/// `verdict`: the act phase's decision, checked by its schema.
#[derive(Default)]
pub struct VerdictTool {
    verdict: Mutex<Option<Verdict>>,
}

impl VerdictTool {
    pub fn new() -> Arc<VerdictTool> {
        Arc::new(VerdictTool::default())
    }

    /// The last valid verdict given, if any.
    pub fn verdict(&self) -> Option<Verdict> {
        self.verdict
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl HostTool for VerdictTool {
    fn spec(&self) -> ToolDef {
        ToolDef {
            name: "verdict".to_string(),
            description: "Decide how the work session goes on: `done` (every check passed), \
                          `fix` (another do round can fix what failed; the summary tells it \
                          what) or `friction` (something blocks the work; the summary says \
                          what)."
                .to_string(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "decision": {"type": "string", "enum": ["done", "fix", "friction"]},
                    "summary": {
                        "type": "string",
                        "description": "Why; for fix, each failure with its evidence and what to change"
                    }
                },
                "required": ["decision", "summary"],
                "additionalProperties": false
            }),
        }
    }

    fn call(&self, input: &Value) -> ToolOutput {
        let verdict: Verdict = match serde_json::from_value(input.clone()) {
            Ok(verdict) => verdict,
            Err(err) => return ToolOutput::error(format!("invalid input for verdict: {err}")),
        };
        if verdict.summary.trim().is_empty() {
            return ToolOutput::error("the verdict needs a summary: say why");
        }
        let told = format!("verdict recorded: {}", verdict.decision.as_str());
        let details = json!({ "decision": verdict.decision.as_str() });
        *self.verdict.lock().unwrap_or_else(PoisonError::into_inner) = Some(verdict);
        answer(told, details)
    }
}

/// The host tool through which a phase leaves its output.
pub enum PhaseTool {
    Report(Arc<ReportTool>),
    Verdict(Arc<VerdictTool>),
}

impl PhaseTool {
    pub fn new(phase: Phase, output: PathBuf) -> PhaseTool {
        match phase {
            Phase::Act => PhaseTool::Verdict(VerdictTool::new()),
            _ => PhaseTool::Report(ReportTool::new(phase.report_name(), output)),
        }
    }

    pub fn host(&self) -> Arc<dyn HostTool> {
        match self {
            PhaseTool::Report(report) => report.clone(),
            PhaseTool::Verdict(verdict) => verdict.clone(),
        }
    }

    pub fn written(&self) -> bool {
        match self {
            PhaseTool::Report(report) => report.written(),
            PhaseTool::Verdict(verdict) => verdict.verdict().is_some(),
        }
    }
}

/// A successful host tool result that changed nothing in `/work`.
fn answer(content: String, details: Value) -> ToolOutput {
    ToolOutput {
        stdout: content.clone().into_bytes(),
        content,
        is_error: false,
        details,
        stderr: Vec::new(),
        exit_code: None,
        may_change_files: false,
    }
}
