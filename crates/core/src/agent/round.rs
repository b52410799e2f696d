//! One round of tool calls: every call the model made in a turn is run as a
//! sandbox step (or answered without running: past the tool limit, cut off
//! by `max_tokens`, skipped for a steering message, interrupted, or left
//! for review by Esc), and all the results are stored as one user message,
//! followed by any steering text and the turn's pictures (no more than a
//! request carries, [`TurnPictures`]).

use serde_json::Value;

use super::abort::{AbortSignal, FINALIZED};
use super::inbox::{Inbox, TurnSteering};
use super::request::INTERRUPTED;
use super::request::pictures::TurnPictures;
use super::state::{Halt, LoopState};
use super::step::{self, CUT_OFF, result_record};
use super::{AgentConfig, AgentError};
use ah_llm::Role;
use ah_record::run::Run;
use ah_session::{BlockRecord, MessageMeta, Session};

/// The result of a call refused by the tool limit.
const LIMIT_REACHED: &str = "not run: the tool call limit (--max-tools) was reached";

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
}

/// Runs `calls` (id, name, input) and stores their results under the head,
/// which moves to the stored message. Every call gets a result, even past
/// the limit, so the stored conversation stays valid for the API.
pub(super) async fn run_round(
    round: Round<'_>,
    calls: Vec<(String, String, Value)>,
    state: &mut LoopState<'_>,
    abort: &mut AbortSignal,
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
    let mut images = TurnPictures::default();
    let mut steered = TurnSteering::default();
    let mut aborted = false;
    for (id, name, input) in calls {
        let not_run = |text: &str| BlockRecord::tool_result(&id, &name, text.into(), true);
        let halted = match aborted {
            true => Some(Halt::Interrupted),
            false => LoopState::halt(abort),
        };
        aborted = halted == Some(Halt::Interrupted);
        let halt_text = halted.map(|halt| match halt {
            Halt::Interrupted => INTERRUPTED,
            Halt::Finalized => FINALIZED,
        });
        if let Some(text) = halt_text {
            results.push(not_run(text));
            continue;
        }
        if let Some(skipped) = steered.skip(inbox, &id, &name)? {
            results.push(skipped);
            continue;
        }
        if truncated.contains(&id) {
            results.push(not_run(CUT_OFF));
            continue;
        }
        if !state.admit(config) {
            results.push(not_run(LIMIT_REACHED));
            continue;
        }
        let Some(outcome) = state.step(run, session, abort, (&id, &name, &input)).await else {
            aborted = true;
            results.push(not_run(INTERRUPTED));
            continue;
        };
        results.push(result_record(&id, &name, &run.id(), &outcome));
        if let Some(image) = step::image(&outcome) {
            images.push(image);
        }
        if let Some(repetition) = state.repeated(session, &name, &input, &outcome.output) {
            steering.push(repetition.steering_block());
        }
    }
    // Text and images after the results: the API wants tool results first.
    results.append(&mut steering);
    results.extend(images.into_blocks());
    if !aborted {
        results.extend(steered.after_results(inbox)?);
    }
    let stored = session.append(
        Some(state.head.as_str()),
        Role::User,
        &results,
        &MessageMeta::default(),
    )?;
    state.head = stored.id;
    steered.delivered(inbox, session, &mut state.out, &state.head)?;
    Ok(RoundEnd { aborted })
}
