//! The typed events the agent emits. The core never prints: the terminal
//! display, `--json` output and the session's `events` table are all consumers
//! of this one stream.

use serde::Serialize;
use serde_json::Value;

use ah_llm::Usage;
use ah_record::Change;
use ah_sandbox::egress::EgressDecision;
use ah_session::Tokens;

/// Something that happened during a run, in the order it happened.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    AgentStart {
        session: String,
        run_id: String,
        model: String,
        backend: String,
    },
    TurnStart {
        turn: u32,
    },
    ApiCallStart {
        turn: u32,
        model: String,
    },
    ApiCallEnd {
        turn: u32,
        latency_ms: u64,
        usage: Usage,
        stop_reason: Option<String>,
    },
    TextDelta {
        text: String,
    },
    ThinkingDelta {
        text: String,
    },
    Retry {
        attempt: u32,
        delay_ms: u64,
        reason: String,
    },
    ToolCallStart {
        id: String,
        name: String,
        input: Value,
    },
    ToolCallEnd {
        id: String,
        name: String,
        is_error: bool,
        duration_ms: u64,
        details: Value,
        /// What the model was told (already capped by the output limits).
        output: String,
    },
    StepCommitted {
        step: u32,
        commit: String,
        changes: Vec<Change>,
    },
    Violation {
        step: u32,
        report: String,
    },
    TurnEnd {
        turn: u32,
    },
    /// The sandbox's network proxy allowed or refused a connection during
    /// a step (`--network proxy`; also a line of the run's `network.log`).
    Egress {
        step: u32,
        /// `host:port` as asked.
        target: String,
        allowed: bool,
        reason: String,
    },
    /// The last calls repeated one pattern of `pattern_len` calls `repeats`
    /// times; the model was told to change approach.
    LoopDetected {
        pattern_len: u32,
        repeats: u32,
        /// The tool of each call of the pattern, in order.
        tools: Vec<String>,
    },
    /// A message from ah (or, later, the user) was added to the conversation
    /// for the model's next request.
    SteeringInjected {
        text: String,
    },
    /// A steering message (`ah --steer`, queue entry `id`) was added to the
    /// conversation after a turn's tool results; the `skipped` tool calls of
    /// that turn not yet run were answered "skipped" instead.
    SteeringDelivered {
        id: i64,
        text: String,
        skipped: u32,
    },
    /// A follow-up (`ah --followup`, or a prompt given to a busy session;
    /// queue entry `id`) was added as a user message and starts a turn.
    FollowupDelivered {
        id: i64,
        text: String,
    },
    /// The conversation is being summarised; `tokens` is its size (reported
    /// by the API, or estimated) when compaction began.
    CompactionStart {
        reason: CompactReason,
        tokens: u64,
    },
    /// The summary is stored; requests now carry it and the
    /// `kept_messages` most recent messages.
    /// `usage` is what the summary call cost (a billed call, as every
    /// `api_call_end` is).
    CompactionEnd {
        summary_chars: usize,
        kept_messages: usize,
        usage: Usage,
    },
    AgentEnd {
        reason: EndReason,
    },
    /// The session's state changed (kept in its `context` as `state`).
    StateChange {
        state: SessionState,
    },
    /// The run's patch was reviewed: what was decided and whether it reached
    /// the project.
    ReviewDone {
        patch: String,
        files: usize,
        added: u64,
        removed: u64,
        /// Build and cache outputs the run added, left out of the patch.
        left_out: usize,
        mode: String,
        decision: String,
        reason: Option<String>,
        applied: bool,
    },
    /// The run is over (what its end line says): `usage` counts every model
    /// call it made, answers and compaction summaries, as the session
    /// counts them (`Session::usage_after`).
    RunEnd {
        duration_ms: u64,
        usage: Tokens,
        steps: u32,
        violations: usize,
        files: usize,
        added: u64,
        removed: u64,
        /// The review decision (`applied`, `saved`, `aborted`, …).
        decision: String,
    },
    Error {
        message: String,
    },
}

impl Event {
    /// The event of a proxy decision made during step `step`.
    pub fn egress(step: u32, decision: &EgressDecision) -> Event {
        Event::Egress {
            step,
            target: decision.target.clone(),
            allowed: decision.allowed,
            reason: decision.reason.clone(),
        }
    }

    /// The name stored in `events.event_type`.
    pub fn name(&self) -> &'static str {
        match self {
            Event::AgentStart { .. } => "agent_start",
            Event::TurnStart { .. } => "turn_start",
            Event::ApiCallStart { .. } => "api_call_start",
            Event::ApiCallEnd { .. } => "api_call_end",
            Event::TextDelta { .. } => "text_delta",
            Event::ThinkingDelta { .. } => "thinking_delta",
            Event::Retry { .. } => "retry",
            Event::ToolCallStart { .. } => "tool_call_start",
            Event::ToolCallEnd { .. } => "tool_call_end",
            Event::StepCommitted { .. } => "step_committed",
            Event::Violation { .. } => "violation",
            Event::TurnEnd { .. } => "turn_end",
            Event::Egress { .. } => "egress",
            Event::LoopDetected { .. } => "loop_detected",
            Event::SteeringInjected { .. } => "steering_injected",
            Event::SteeringDelivered { .. } => "steering_delivered",
            Event::FollowupDelivered { .. } => "followup_delivered",
            Event::CompactionStart { .. } => "compaction_start",
            Event::CompactionEnd { .. } => "compaction_end",
            Event::AgentEnd { .. } => "agent_end",
            Event::StateChange { .. } => "state_change",
            Event::ReviewDone { .. } => "review_done",
            Event::RunEnd { .. } => "run_end",
            Event::Error { .. } => "error",
        }
    }

    /// Deltas are too fine-grained to persist one row each; the full text is
    /// in the stored message.
    pub fn is_persisted(&self) -> bool {
        !matches!(self, Event::TextDelta { .. } | Event::ThinkingDelta { .. })
    }
}

/// Whether a session is being worked on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionState {
    /// The agent loop is running (model calls, tools).
    Processing,
    /// The loop is done; the process is still attached (e.g. reviewing).
    Idle,
    /// No process is working on the session.
    Closed,
}

impl SessionState {
    pub fn as_str(self) -> &'static str {
        match self {
            SessionState::Processing => "processing",
            SessionState::Idle => "idle",
            SessionState::Closed => "closed",
        }
    }
}

/// Why the agent stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    /// The model ended its turn.
    Done,
    /// `--max-tools` was reached.
    ToolLimit,
    /// The model hit its output limit or refused; the stop reason is stored.
    Stopped,
    /// The model call failed for good.
    Failed,
    /// A violating step could not be undone; no more tools may run.
    Poisoned,
    /// Stopped from outside (Ctrl+C, SIGTERM): what was streamed is kept and
    /// every pending tool call was answered as interrupted.
    Aborted,
    /// The user ended the run (Esc) to review it: the running tool call
    /// finished, the calls not yet run were answered as not run.
    Finalized,
    /// The model kept repeating its tool calls after being told to stop
    /// (see `loop_detect`).
    Looping,
    /// The run's files passed its disk budget (`--disk-budget`): no more
    /// tools run; the patch is kept for a look, never applied on its own.
    DiskBudget,
}

impl EndReason {
    /// The name used in events and in the session queue.
    pub fn as_str(self) -> &'static str {
        match self {
            EndReason::Done => "done",
            EndReason::ToolLimit => "tool_limit",
            EndReason::Stopped => "stopped",
            EndReason::Failed => "failed",
            EndReason::Poisoned => "poisoned",
            EndReason::Aborted => "aborted",
            EndReason::Finalized => "finalized",
            EndReason::Looping => "looping",
            EndReason::DiskBudget => "disk_budget",
        }
    }
}

/// Why the conversation was compacted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactReason {
    /// The last known size came within the reserve of the context window.
    Threshold,
    /// The API refused a request as too long for the context window.
    Overflow,
    /// `ah compact` asked for it.
    Manual,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn end_reasons_have_one_name_in_events_and_in_the_queue() {
        for reason in [
            EndReason::Done,
            EndReason::ToolLimit,
            EndReason::Stopped,
            EndReason::Failed,
            EndReason::Poisoned,
            EndReason::Aborted,
            EndReason::Finalized,
            EndReason::DiskBudget,
            EndReason::Looping,
        ] {
            assert_eq!(
                serde_json::to_value(reason).unwrap(),
                serde_json::json!(reason.as_str())
            );
        }
    }
}
