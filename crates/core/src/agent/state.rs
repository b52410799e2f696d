//! The loop's state in one value: where the conversation stands (`head`),
//! the counters, the loop detector and the emitter, which stamps every
//! event with the head. The gate and the step every tool call goes
//! through, whether it came as a native call or as a text-protocol block,
//! are here too, so both protocols stop, count and report the same way.

use serde_json::{Value, json};

use super::abort::AbortSignal;
use super::emit::Emitter;
use super::loop_detect::{LoopDetector, Repetition};
use super::request::INTERRUPTED;
use super::step::step_events;
use super::{AgentConfig, AgentSummary};
use crate::event::{EndReason, Event};
use ah_record::run::{Run, StepOutcome};
use ah_session::Session;
use ah_tools::ToolOutput;

/// Everything the loop carries from one turn to the next.
pub(super) struct LoopState<'a> {
    pub(super) out: Emitter<'a>,
    /// The last stored message: what the next one answers.
    pub(super) head: String,
    pub(super) turns: u32,
    /// Tool calls run so far (refused ones do not count).
    pub(super) tool_calls: u32,
    pub(super) loops: LoopDetector,
}

/// Why a tool call cannot run now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Halt {
    /// The run is aborting (Ctrl+C, a signal).
    Interrupted,
    /// The user finalized (Esc): no new call starts.
    Finalized,
}

impl<'a> LoopState<'a> {
    pub(super) fn new(
        on_event: &'a mut (dyn FnMut(&Event) + Send),
        head: String,
        loop_window: usize,
    ) -> LoopState<'a> {
        LoopState {
            out: Emitter::new(on_event),
            head,
            turns: 0,
            tool_calls: 0,
            loops: LoopDetector::new(loop_window),
        }
    }

    /// Shows `event` and keeps it in the session's log, at the head.
    pub(super) fn emit(&mut self, session: &Session, event: Event) {
        self.out.emit(session, Some(&self.head), event);
    }

    /// Whether the run is stopping, so that no further call may start.
    pub(super) fn halt(abort: &AbortSignal) -> Option<Halt> {
        if abort.is_requested() {
            Some(Halt::Interrupted)
        } else if abort.is_finalizing() {
            Some(Halt::Finalized)
        } else {
            None
        }
    }

    /// The tool call limit has been reached.
    pub(super) fn at_limit(&self, config: &AgentConfig) -> bool {
        config.max_tools.is_some_and(|max| self.tool_calls >= max)
    }

    /// Takes one call of the budget, unless the limit is reached.
    pub(super) fn admit(&mut self, config: &AgentConfig) -> bool {
        if self.at_limit(config) {
            return false;
        }
        self.tool_calls += 1;
        true
    }

    /// Runs one call as a sandbox step, with its events. `None` when
    /// `abort` stopped it: the step's future is dropped, which kills its
    /// process group.
    pub(super) async fn step(
        &mut self,
        run: &mut Run,
        session: &Session,
        abort: &mut AbortSignal,
        (id, name, input): (&str, &str, &Value),
    ) -> Option<StepOutcome> {
        self.emit(
            session,
            Event::ToolCallStart {
                id: id.to_string(),
                name: name.to_string(),
                input: input.clone(),
            },
        );
        let stepped = tokio::select! {
            outcome = run.tool_step(name, input) => Some(outcome),
            () = abort.requested() => None,
        };
        let Some(outcome) = stepped else {
            self.emit(
                session,
                Event::ToolCallEnd {
                    id: id.to_string(),
                    name: name.to_string(),
                    is_error: true,
                    duration_ms: 0,
                    details: json!({ "interrupted": true }),
                    output: INTERRUPTED.to_string(),
                },
            );
            return None;
        };
        for event in step_events(id, name, &outcome) {
            self.emit(session, event);
        }
        Some(outcome)
    }

    /// Feeds the loop detector; when the call repeats an earlier one, the
    /// repetition is announced (with the steering the model gets) and
    /// returned.
    pub(super) fn repeated(
        &mut self,
        session: &Session,
        name: &str,
        input: &Value,
        output: &ToolOutput,
    ) -> Option<Repetition> {
        let repetition = self.loops.record(name, input, output)?;
        self.emit(session, repetition.event());
        let text = repetition.steering();
        self.emit(session, Event::SteeringInjected { text });
        Some(repetition)
    }

    /// Why the loop stops after a batch of tool calls, if it does: the run
    /// was poisoned or passed its disk budget, the model keeps repeating
    /// itself, or the tool budget is spent.
    pub(super) fn stop_after_calls(&self, config: &AgentConfig, run: &Run) -> Option<EndReason> {
        if run.poisoned().is_some() {
            Some(EndReason::Poisoned)
        } else if run.limit_reached().is_some() {
            Some(EndReason::DiskBudget)
        } else if self.loops.should_stop() {
            Some(EndReason::Looping)
        } else if self.at_limit(config) {
            Some(EndReason::ToolLimit)
        } else {
            None
        }
    }

    /// Announces the end of the loop and sums it up.
    pub(super) fn end(&mut self, session: &Session, reason: EndReason) -> AgentSummary {
        self.emit(session, Event::AgentEnd { reason });
        AgentSummary {
            reason,
            head: self.head.clone(),
            turns: self.turns,
            tool_calls: self.tool_calls,
        }
    }
}
