//! How a tool step is reported: the events it yields and the tool result
//! the session stores (what the model was told, the whole output, and where
//! the step lives on disk).

use serde_json::json;

use crate::event::Event;
use ah_llm::{Block, ImageSource};
use ah_record::run::StepOutcome;
use ah_session::BlockRecord;
use ah_tools as tools;

/// The result of a tool call whose input the output limit cut off.
pub(super) const CUT_OFF: &str = "not run: your response reached the output token limit (max_tokens) in the \
middle of this tool call, so its input was cut off. Split large content into several smaller \
write or edit calls.";

pub(super) fn step_events(id: &str, name: &str, outcome: &StepOutcome) -> Vec<Event> {
    let mut events: Vec<Event> = outcome
        .egress
        .iter()
        .map(|decision| Event::egress(outcome.step, decision))
        .collect();
    if let Some(commit) = &outcome.commit {
        events.push(Event::StepCommitted {
            step: outcome.step,
            commit: commit.clone(),
            changes: outcome.changes.clone(),
        });
    }
    if let Some(report) = &outcome.violation {
        events.push(Event::Violation {
            step: outcome.step,
            report: report.clone(),
        });
    }
    events.push(Event::ToolCallEnd {
        id: id.to_string(),
        name: name.to_string(),
        is_error: outcome.output.is_error,
        duration_ms: outcome.duration_ms,
        details: outcome.output.details.clone(),
        output: outcome.output.content.clone(),
    });
    events
}

/// The stored tool result: what the model was told, the full output, and
/// where the step lives on disk. `details` names the run and the step, the
/// step's own commit (`null` when it changed nothing or was undone), and
/// `head`, the run's last accepted commit after the step: the state of the
/// files at this point of the conversation, which is what time travel
/// restores (see [`crate::time_travel`]).
pub(crate) fn result_record(
    id: &str,
    name: &str,
    run_id: &str,
    outcome: &StepOutcome,
) -> BlockRecord {
    let out = &outcome.output;
    let mut record = BlockRecord::tool_result(id, name, out.content.clone(), out.is_error);
    // A picture's bytes are kept once, in its image block (see [`image`]).
    if !out.details["image"].is_object() {
        record.tool_output = Some(tools::joined_output(&out.stdout, &out.stderr));
    }
    record.duration_ms = Some(outcome.duration_ms);
    record.details = Some(json!({
        "run_id": run_id,
        "step": outcome.step,
        "commit": outcome.commit,
        "head": outcome.head,
        "exit_code": out.exit_code,
        "tool": out.details,
        "violation": outcome.violation,
    }));
    record
}

/// The image block a step's result brings (a `read` of a picture): the
/// picture's bytes, base64, for the model to see after the turn's results.
pub(crate) fn image(outcome: &StepOutcome) -> Option<BlockRecord> {
    use base64::Engine as _;
    let out = &outcome.output;
    let media_type = out.details["image"]["media_type"].as_str()?;
    if out.is_error || out.stdout.is_empty() {
        return None;
    }
    let block = Block::Image {
        source: ImageSource {
            kind: "base64".to_string(),
            media_type: media_type.to_string(),
            data: base64::engine::general_purpose::STANDARD.encode(&out.stdout),
        },
    };
    Some(BlockRecord {
        details: Some(json!({ "path": out.details["path"], "step": outcome.step })),
        ..BlockRecord::from(block)
    })
}
