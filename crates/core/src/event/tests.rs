//! The protocol against its documentation: every event type of the enum is
//! in the README's table with exactly the fields it serializes (the union
//! over the shapes a type takes), and the table names nothing else; the
//! name an event is stored under is its JSON `type`.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};
use strum::VariantNames;

use super::*;
use crate::agent::{CompactReason, EndReason};
use crate::event::SessionState;
use ah_record::ChangeKind;
use ah_record::rundir::HunkOutcome;

const README: &str = include_str!("../../../../README.md");

/// One event of every type, and of every shape a type takes.
fn examples() -> Vec<Event> {
    let usage = Usage::default();
    let work_end = |end| Event::WorkEnd { end, rounds: 1 };
    let org_end = |end| Event::OrgEnd {
        end,
        ticks: 3,
        agents: BTreeMap::from([("lead".to_string(), Tally::default())]),
    };
    let mut events = vec![
        Event::StateChange {
            state: SessionState::Idle,
        },
        Event::AgentStart {
            session: "s".into(),
            run_id: "r".into(),
            model: "m".into(),
            backend: "none".into(),
        },
        Event::Limits {
            checked: false,
            limits: ah_sandbox::limits::plan_on_host(&ah_sandbox::limits::Asked {
                memory: "4g".into(),
                pids: 1024,
                disk_budget: None,
            }),
        },
        Event::TurnStart { turn: 1 },
        Event::TurnEnd { turn: 1 },
        Event::ApiCallStart {
            turn: 1,
            model: "m".into(),
        },
        Event::ApiCallEnd {
            turn: 1,
            latency_ms: 2,
            usage,
            stop_reason: None,
        },
        Event::TextDelta { text: "t".into() },
        Event::ThinkingDelta { text: "t".into() },
        Event::Retry {
            attempt: 1,
            delay_ms: 10,
            reason: "r".into(),
        },
        Event::ToolCallStart {
            id: "i".into(),
            name: "bash".into(),
            input: json!({}),
        },
        Event::ToolCallEnd {
            id: "i".into(),
            name: "bash".into(),
            is_error: false,
            duration_ms: 1,
            details: json!({}),
            output: String::new(),
        },
        Event::StepCommitted {
            step: 1,
            commit: "c".into(),
            changes: vec![Change {
                path: "a".into(),
                kind: ChangeKind::Added,
                symlink: false,
            }],
        },
        Event::Violation {
            step: 1,
            report: "r".into(),
        },
        Event::Egress {
            step: 1,
            target: "h:443".into(),
            allowed: true,
            reason: "r".into(),
        },
        Event::LoopDetected {
            pattern_len: 1,
            repeats: 3,
            tools: vec!["bash".into()],
        },
        Event::SteeringInjected { text: "t".into() },
        Event::SteeringDelivered {
            id: 1,
            text: "t".into(),
            skipped: 0,
        },
        Event::FollowupDelivered {
            id: 1,
            text: "t".into(),
        },
        Event::CompactionStart {
            reason: CompactReason::Manual,
            tokens: 1,
        },
        Event::CompactionEnd {
            summary_chars: 1,
            kept_messages: 1,
            usage,
        },
        Event::AgentEnd {
            reason: EndReason::Done,
        },
        Event::ReviewDone {
            patch: "p".into(),
            files: 1,
            added: 1,
            removed: 0,
            left_out: 0,
            mode: "never".into(),
            decision: "saved".into(),
            reason: None,
            applied: false,
            rounds: Vec::new(),
            hunks: Vec::new(),
        },
        Event::ReviewDone {
            patch: "p".into(),
            files: 2,
            added: 3,
            removed: 1,
            left_out: 0,
            mode: "ask".into(),
            decision: "partly_applied".into(),
            reason: None,
            applied: true,
            rounds: vec![ah_record::rundir::ReviseRound {
                head: "h".into(),
                note: "smaller".into(),
                rejected: Vec::new(),
            }],
            hunks: vec![HunkRecord {
                path: "a".into(),
                header: "@@ -1 +1 @@".into(),
                decision: HunkOutcome::Applied,
                reason: None,
            }],
        },
        Event::RunEnd {
            duration_ms: 1,
            usage: Tokens::default(),
            cost_usd: Some(0.0),
            unpriced: Vec::new(),
            steps: 1,
            violations: 0,
            files: 1,
            added: 1,
            removed: 0,
            decision: "saved".into(),
        },
        Event::Error {
            message: "m".into(),
        },
        Event::AttemptStart { attempt: 1, of: 3 },
        Event::AttemptEnd {
            status: "failed".into(),
            error: Some("the sandbox did not start".into()),
        },
        Event::CheckEnd {
            command: "cargo test".into(),
            exit_code: Some(0),
            passed: true,
            duration_ms: 1200,
            log: "check.log".into(),
        },
        Event::PhaseStart {
            phase: Phase::Plan,
            round: 1,
            message: "m".into(),
        },
        Event::Reminder {
            phase: Phase::Plan,
            round: 1,
        },
        Event::PhaseEnd {
            phase: Phase::Do,
            round: 1,
            file: None,
        },
        Event::Verdict {
            round: 1,
            decision: Decision::Fix,
            summary: "s".into(),
        },
        Event::Tick {
            tick: 1,
            agent: "lead".into(),
            letters: 1,
        },
        Event::Routed {
            from: "lead".into(),
            to: "coder".into(),
            kind: "direct".into(),
        },
        Event::AskUser {
            agent: "lead".into(),
            question: "q".into(),
        },
    ];
    events.extend(
        [
            WorkEnd::Done,
            WorkEnd::Friction,
            WorkEnd::MaxRounds,
            WorkEnd::MissingOutput { phase: Phase::Act },
            WorkEnd::Stopped {
                phase: Phase::Do,
                reason: EndReason::Aborted,
            },
        ]
        .map(work_end),
    );
    events.extend(
        [
            OrgEnd::Done,
            OrgEnd::Finished,
            OrgEnd::Asked {
                agent: "a".into(),
                question: "q".into(),
            },
            OrgEnd::Idle { ticks: 6 },
            OrgEnd::TickLimit { ticks: 100 },
            OrgEnd::ToolLimit { calls: 9 },
            OrgEnd::Stopped {
                agent: "a".into(),
                reason: EndReason::Looping,
            },
        ]
        .map(org_end),
    );
    events
}

/// Every type's fields as the examples serialize them (besides `type`).
fn serialized() -> BTreeMap<String, BTreeSet<String>> {
    let mut types: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for event in examples() {
        let Value::Object(fields) = serde_json::to_value(&event).unwrap() else {
            panic!("{event:?} is not an object");
        };
        let name = fields["type"].as_str().unwrap().to_string();
        assert_eq!(event.name(), name, "the stored name is the JSON type");
        let keys = types.entry(name).or_default();
        keys.extend(fields.keys().filter(|key| *key != "type").cloned());
    }
    types
}

/// The README's table: type → its fields column.
fn documented() -> BTreeMap<String, BTreeSet<String>> {
    let section = README
        .split("## Events and `--json`")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("the README has its events section");
    let ticked = |cell: &str| -> BTreeSet<String> {
        cell.split(',')
            .map(|part| part.trim().trim_matches('`').to_string())
            .filter(|part| !part.is_empty())
            .collect()
    };
    let mut table = BTreeMap::new();
    for line in section.lines().filter(|line| line.starts_with("| `")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let name = cells[1].trim_matches('`').to_string();
        assert!(
            table.insert(name.clone(), ticked(cells[2])).is_none(),
            "{name} is in the table twice"
        );
    }
    table
}

#[test]
fn every_type_is_exemplified_once_by_name() {
    let names: BTreeSet<String> = serialized().into_keys().collect();
    let variants: BTreeSet<String> = Event::VARIANTS.iter().map(|v| v.to_string()).collect();
    assert_eq!(names, variants, "add an example of each new event");
}

#[test]
fn the_readme_documents_every_event_and_nothing_else() {
    assert_eq!(documented(), serialized());
}

#[test]
fn a_run_event_carries_its_run_and_its_agent() {
    let event = Event::TurnStart { turn: 2 };
    let plain = serde_json::to_value(RunEvent::of("01RUN", &event)).unwrap();
    assert_eq!(
        plain,
        json!({"type": "turn_start", "run": "01RUN", "turn": 2})
    );
    let org = RunEvent {
        run: "01RUN",
        agent: Some("lead"),
        event: &event,
    };
    let value = serde_json::to_value(org).unwrap();
    assert_eq!(value["agent"], json!("lead"));
}

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
