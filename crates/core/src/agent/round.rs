//! One round of tool calls: every call the model made in a turn is run as a
//! sandbox step (or answered without running: past the tool limit, cut off
//! by `max_tokens`, skipped for a steering message, interrupted, or left
//! for review by Esc), and all the results are stored as one user message,
//! followed by any steering text.

use serde_json::{Value, json};

use super::abort::{AbortSignal, FINALIZED};
use super::emit::Emitter;
use super::event::Event;
use super::inbox::{Inbox, TurnSteering};
use super::loop_detect::LoopDetector;
use super::request::INTERRUPTED;
use super::step::{CUT_OFF, result_record, step_events};
use super::{AgentConfig, AgentError};
use ah_llm::Role;
use ah_record::run::Run;
use ah_session::{BlockRecord, MessageMeta, Session};

/// What a round works with.
pub(super) struct Round<'a> {
    pub config: &'a AgentConfig,
    pub run: &'a mut Run,
    pub session: &'a mut Session,
    pub inbox: &'a dyn Inbox,
    /// Calls whose input `max_tokens` cut off: answered, never run.
    pub truncated: &'a [String],
}

/// How a round ended, for the loop to decide whether to go on.
pub(super) struct RoundEnd {
    /// A call was interrupted: the loop stops as aborted.
    pub aborted: bool,
    /// A call was refused by the tool limit.
    pub limited: bool,
}

/// Runs `calls` (id, name, input) and stores their results under `head`,
/// which moves to the stored message. Every call gets a result, even past
/// the limit, so the stored conversation stays valid for the API.
#[allow(clippy::too_many_arguments)]
pub(super) async fn run_round(
    round: Round<'_>,
    calls: Vec<(String, String, Value)>,
    head: &mut String,
    abort: &mut AbortSignal,
    out: &mut Emitter<'_>,
    tool_calls: &mut u32,
    loops: &mut LoopDetector,
) -> Result<RoundEnd, AgentError> {
    let Round {
        config,
        run,
        session,
        inbox,
        truncated,
    } = round;
    let mut results = Vec::with_capacity(calls.len());
    let mut steering = Vec::new();
    let mut steered = TurnSteering::default();
    let mut limited = false;
    let mut aborted = false;
    for (id, name, input) in calls {
        if aborted || abort.is_requested() {
            aborted = true;
            results.push(BlockRecord::tool_result(
                &id,
                &name,
                INTERRUPTED.into(),
                true,
            ));
            continue;
        }
        if abort.is_finalizing() {
            results.push(BlockRecord::tool_result(&id, &name, FINALIZED.into(), true));
            continue;
        }
        if let Some(skipped) = steered.skip(inbox, &id, &name)? {
            results.push(skipped);
            continue;
        }
        if truncated.contains(&id) {
            results.push(BlockRecord::tool_result(&id, &name, CUT_OFF.into(), true));
            continue;
        }
        if config.max_tools.is_some_and(|max| *tool_calls >= max) {
            limited = true;
            results.push(BlockRecord::tool_result(
                &id,
                &name,
                "not run: the tool call limit (--max-tools) was reached".into(),
                true,
            ));
            continue;
        }
        *tool_calls += 1;
        out.emit(
            session,
            Some(head.as_str()),
            Event::ToolCallStart {
                id: id.clone(),
                name: name.clone(),
                input: input.clone(),
            },
        );
        let stepped = tokio::select! {
            outcome = run.tool_step(&name, &input) => Some(outcome),
            () = abort.requested() => None,
        };
        let Some(outcome) = stepped else {
            // The step's future is dropped: its process group is killed.
            aborted = true;
            out.emit(
                session,
                Some(head.as_str()),
                Event::ToolCallEnd {
                    id: id.clone(),
                    name: name.clone(),
                    is_error: true,
                    duration_ms: 0,
                    details: json!({ "interrupted": true }),
                    output: INTERRUPTED.to_string(),
                },
            );
            results.push(BlockRecord::tool_result(
                &id,
                &name,
                INTERRUPTED.into(),
                true,
            ));
            continue;
        };
        for event in step_events(&id, &name, &outcome) {
            out.emit(session, Some(head.as_str()), event);
        }
        results.push(result_record(&id, &name, &run.id(), &outcome));
        if let Some(repetition) = loops.record(&name, &input, &outcome.output) {
            out.emit(session, Some(head.as_str()), repetition.event());
            out.emit(
                session,
                Some(head.as_str()),
                Event::SteeringInjected {
                    text: repetition.steering(),
                },
            );
            steering.push(repetition.steering_block());
        }
    }
    // Text after the results: the API wants tool results first.
    results.append(&mut steering);
    if !aborted {
        results.extend(steered.after_results(inbox)?);
    }
    let stored = session.append(
        Some(head.as_str()),
        Role::User,
        &results,
        &MessageMeta::default(),
    )?;
    *head = stored.id;
    steered.delivered(inbox, session, out, head)?;
    Ok(RoundEnd { aborted, limited })
}
