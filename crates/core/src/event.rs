//! The one event protocol of ah: every engine's events (the agent loop's,
//! the work phases', an org's, and the run's own around them) are one
//! serde-tagged enum, [`Event`], and what reaches a front-end is a
//! [`RunEvent`]: an event with the run it belongs to and, in an org, the
//! agent. This is the `--json` schema (README, "Events and `--json`"; a
//! test checks the table there against this enum). The core never prints:
//! the terminal display, `--json` output and the session's `events` table
//! are all consumers of this one stream.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::org::{OrgEnd, Tally};
use crate::work::{Decision, Phase, WorkEnd};
use ah_llm::Usage;
use ah_record::Change;
use ah_record::rundir::HunkRecord;
use ah_record::rundir::ReviseRound;
use ah_sandbox::egress::EgressDecision;
use ah_session::Tokens;

/// An event as a front-end receives it: which run it belongs to (several
/// may run in one process) and, in an org, which agent's it is.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct RunEvent<'a> {
    /// The run's id (its folder under `.ah/runs`).
    pub run: &'a str,
    /// The agent whose event it is (`ah org`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<&'a str>,
    #[serde(flatten)]
    pub event: &'a Event,
}

impl<'a> RunEvent<'a> {
    /// `event` of the run `run`, no agent's in particular.
    pub fn of(run: &'a str, event: &'a Event) -> RunEvent<'a> {
        RunEvent {
            run,
            agent: None,
            event,
        }
    }
}

/// Something that happened during a run, in the order it happened. Its
/// name (`type` in JSON, `event_type` in the session) is the variant's in
/// snake case, from the one derive.
#[derive(Debug, Clone, PartialEq, Serialize, strum::IntoStaticStr, strum::VariantNames)]
#[serde(tag = "type", rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Event {
    AgentStart {
        session: String,
        run_id: String,
        model: String,
        backend: String,
    },
    /// The run's limits and what holds each: planned at the start
    /// (`checked` false), and again at the end when the container's check
    /// found them otherwise (`checked` true).
    Limits {
        checked: bool,
        limits: Vec<ah_sandbox::limits::Held>,
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
        /// The rounds in which the user sent the model back to work.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        rounds: Vec<ReviseRound>,
        /// Each unit's decision when the user chose hunk by hunk (absent
        /// otherwise), as `manifest.json` keeps them.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        hunks: Vec<HunkRecord>,
    },
    /// The run is over (what its end line says): `usage` counts every model
    /// call it made, answers and compaction summaries, as the session
    /// counts them (`Session::usage_after`); `cost_usd` is what they cost
    /// (`crate::cost`), `None` when a model among them has no price, and
    /// `unpriced` names those models.
    RunEnd {
        duration_ms: u64,
        usage: Tokens,
        cost_usd: Option<f64>,
        unpriced: Vec<String>,
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
    /// The run is attempt `attempt` (from 1) of `of` of one task (`-N`):
    /// the first event of each attempt's run.
    AttemptStart {
        attempt: usize,
        of: usize,
    },
    /// An attempt is over: `status` is `finished`, `stopped` (interrupted),
    /// `unfinished`, `ended` or `failed` (with `error`, when it could not
    /// get as far as its patch).
    AttemptEnd {
        status: String,
        error: Option<String>,
    },
    /// An attempt's check ran in its sandbox: `exit_code` is `None` when it
    /// was killed at its timeout or could not run; what it printed is in
    /// `log`.
    CheckEnd {
        command: String,
        exit_code: Option<i32>,
        passed: bool,
        duration_ms: u64,
        log: String,
    },
    /// A phase of `ah work` starts.
    PhaseStart {
        phase: Phase,
        round: u32,
        /// The phase's first message in the session.
        message: String,
    },
    /// The phase ended without its file and was told to write it.
    Reminder {
        phase: Phase,
        round: u32,
    },
    PhaseEnd {
        phase: Phase,
        round: u32,
        /// The phase's file under the run directory, when it was written.
        file: Option<String>,
    },
    Verdict {
        round: u32,
        decision: Decision,
        summary: String,
    },
    WorkEnd {
        #[serde(flatten)]
        end: WorkEnd,
        rounds: u32,
    },
    /// Tick `tick` of an org runs `agent`'s turn, opened by `letters`
    /// letters.
    Tick {
        tick: u32,
        agent: String,
        letters: usize,
    },
    /// A letter was posted: `kind` is `task`, `direct`, `group`, `answer`,
    /// `interjection` or `notice`.
    Routed {
        from: String,
        to: String,
        kind: String,
    },
    /// `agent` asks the user.
    AskUser {
        agent: String,
        question: String,
    },
    /// The org is over.
    OrgEnd {
        #[serde(flatten)]
        end: OrgEnd,
        ticks: u32,
        agents: BTreeMap<String, Tally>,
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

    /// The name stored in `events.event_type`: `type` in JSON.
    pub fn name(&self) -> &'static str {
        self.into()
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
mod tests;
