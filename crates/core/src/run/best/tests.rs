//! The judge without runs: which attempt wins, and how the table reads.

use std::path::PathBuf;
use std::time::Duration;

use super::*;
use crate::run::Check;
use ah_record::patch::PatchInfo;

fn attempt(outcome: Outcome, check: Option<i32>, lines: u64, bytes: u64) -> Attempt {
    Attempt {
        run: "01RUNAAAAAAAAAAAAAAAAAAAAA".into(),
        outcome: Ok(outcome),
        check: check.map(|code| Check {
            exit_code: (code >= 0).then_some(code),
            log: PathBuf::from("check.log"),
            duration_ms: 1200,
        }),
        finished: Some(Finished {
            outcome,
            patch: PatchInfo {
                added_lines: lines,
                bytes,
                ..PatchInfo::empty()
            },
            patch_path: PathBuf::from("session.patch"),
            poisoned: None,
            head: "h".into(),
        }),
        heads: Vec::new(),
        duration: Duration::from_millis(2500),
    }
}

fn rows<'a>(attempts: &'a [Attempt], tokens: &[u64]) -> Vec<Row<'a>> {
    attempts
        .iter()
        .zip(tokens)
        .map(|(attempt, &tokens)| Row {
            attempt,
            finished: attempt.finished.as_ref(),
            tokens: Tokens {
                input_tokens: tokens,
                output_tokens: 0,
            },
            cost: Some(0.25),
            passed: matches!(attempt.outcome, Ok(Outcome::Done))
                && attempt.check.as_ref().is_none_or(Check::passed),
        })
        .collect()
}

#[test]
fn the_smallest_passing_patch_wins() {
    let attempts = [
        attempt(Outcome::Done, Some(1), 1, 10),
        attempt(Outcome::Done, Some(0), 9, 90),
        attempt(Outcome::Done, Some(0), 3, 30),
    ];
    assert_eq!(winner(&rows(&attempts, &[1, 1, 1])), Some(2));
}

#[test]
fn ties_go_to_fewer_tokens_then_the_earlier_attempt() {
    let attempts = [
        attempt(Outcome::Done, Some(0), 3, 30),
        attempt(Outcome::Done, Some(0), 3, 30),
        attempt(Outcome::Done, Some(0), 3, 30),
    ];
    assert_eq!(winner(&rows(&attempts, &[50, 20, 20])), Some(1));
    assert_eq!(winner(&rows(&attempts, &[5, 5, 5])), Some(0));
}

#[test]
fn nothing_wins_when_nothing_passed() {
    let attempts = [
        attempt(Outcome::Done, Some(2), 1, 10),
        attempt(Outcome::Aborted, None, 1, 10),
        attempt(Outcome::Done, Some(-1), 1, 10),
    ];
    assert_eq!(winner(&rows(&attempts, &[1, 1, 1])), None);
}

#[test]
fn the_table_has_a_row_per_attempt_with_its_check() {
    let attempts = [
        attempt(Outcome::Done, Some(0), 3, 30),
        attempt(Outcome::Done, Some(4), 2, 20),
        attempt(Outcome::Done, Some(-1), 2, 20),
    ];
    let lines = table(&rows(&attempts, &[7, 8, 9]));
    assert_eq!(lines.len(), 4, "{lines:#?}");
    assert!(lines[0].starts_with("#   run"), "{}", lines[0]);
    assert!(
        lines[1].contains("passed") && lines[1].contains("+3 -0"),
        "{}",
        lines[1]
    );
    assert!(lines[2].contains("exit 4"), "{}", lines[2]);
    assert!(
        lines[3].contains("timeout") && lines[3].ends_with("2.5s"),
        "{}",
        lines[3]
    );
}
