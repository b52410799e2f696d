//! Best of N (`ah -N 3 --check CMD "task"`): the attempts of one task
//! (`run/attempts.rs`), each judged by its check, then one winner reviewed
//! the usual way. An attempt passes when its agent finished, its patch may
//! be applied and its check exited 0 (without a check: when it finished).
//! The winner is the passing attempt with the smallest patch (changed
//! lines, then bytes), then the fewest tokens, then the earliest. The
//! review shows a table of the attempts, then the winner's patch with the
//! usual choices and "show attempt K" to look at another one and choose it
//! instead. Nothing is applied when no attempt passed (every patch stays
//! saved, for `ah apply RUN`); attempts are never merged.

use anyhow::Result;

use super::attempts::{Attempt, AttemptOptions, Tried, try_all};
use super::lifecycle::{Finished, leave_session, review_done};
use super::review::{self, Choice, Review, Round, Tone};
use super::{Engine, Front, Outcome, ReviewMode, RunOptions};
use crate::agent::record_event;
use crate::cost::usd;
use crate::event::RunEvent;
use ah_record::rundir::{Manifest, ReviewRecord};
use ah_session::{Tokens, total_usage};

/// Runs the attempts `how` asks for and reviews the best one.
pub async fn best_of(
    options: RunOptions,
    engine: Engine,
    how: AttemptOptions,
    front: &mut dyn Front,
) -> Result<Outcome> {
    let no_commit = options.no_commit;
    let tried = try_all(options, engine, &how, front).await?;
    let outcome = judge(&tried, no_commit, front);
    leave_session(&tried.session, &tried.lock, front, &tried.ids());
    outcome
}

/// One attempt as the table shows it and the judge weighs it.
struct Row<'a> {
    attempt: &'a Attempt,
    finished: Option<&'a Finished>,
    tokens: Tokens,
    /// In US dollars; `None` when a model it used has no price.
    cost: Option<f64>,
    passed: bool,
}

/// Shows the table, finds the winner and reviews it.
fn judge(tried: &Tried, no_commit: bool, front: &mut dyn Front) -> Result<Outcome> {
    let rows: Vec<Row<'_>> = tried.attempts.iter().map(|a| row(tried, a)).collect();
    for line in table(&rows) {
        front.notice(&line);
    }
    let aborted = rows
        .iter()
        .any(|row| matches!(row.attempt.outcome, Ok(Outcome::Aborted)));
    let Some(winner) = winner(&rows) else {
        if aborted {
            // Stopped by a signal: every patch so far is saved.
            front.say(
                Tone::Plain,
                "interrupted:",
                "nothing applied; every attempt's patch so far is saved",
            );
            return Ok(Outcome::Aborted);
        }
        front.say(
            Tone::Refused,
            "no attempt passed:",
            "nothing applied; every attempt's patch is saved (`ah apply RUN` applies one)",
        );
        return Ok(Outcome::NonePassed);
    };
    front.say(
        Tone::Good,
        "winner:",
        &format!("attempt {} (run {})", winner + 1, rows[winner].attempt.run),
    );
    review_winner(tried, &rows, winner, no_commit, front)
}

fn row<'a>(tried: &Tried, attempt: &'a Attempt) -> Row<'a> {
    let finished = attempt.finished.as_ref();
    let usage = match attempt.heads.as_slice() {
        [] => Vec::new(),
        heads => tried
            .session
            .usage_on_branches(heads, tried.seq_before)
            .unwrap_or_default(),
    };
    let tokens = total_usage(&usage);
    let cost = tried.prices.cost(&usage).total_usd();
    let done = matches!(attempt.outcome, Ok(Outcome::Done));
    let check = attempt.check.as_ref().is_none_or(|check| check.passed());
    let clean = finished.is_some_and(|f| f.poisoned.is_none());
    Row {
        attempt,
        finished,
        tokens,
        cost,
        passed: done && check && clean,
    }
}

/// The index of the best passing attempt.
fn winner(rows: &[Row<'_>]) -> Option<usize> {
    rows.iter()
        .enumerate()
        .filter(|(_, row)| row.passed)
        .min_by_key(|(i, row)| {
            let patch = row.finished.map(|f| &f.patch);
            let lines = patch.map_or(0, |p| p.added_lines + p.removed_lines);
            let bytes = patch.map_or(0, |p| p.bytes);
            let tokens = row.tokens.input_tokens + row.tokens.output_tokens;
            (lines, bytes, tokens, *i)
        })
        .map(|(i, _)| i)
}

/// The table of attempts: status, check, files, +/−, tokens, cost, time.
fn table(rows: &[Row<'_>]) -> Vec<String> {
    let mut lines = vec![format!(
        "{:<3} {:<10} {:<9} {:<8} {:>5} {:>13} {:>10} {:>9} {:>7}",
        "#", "run", "status", "check", "files", "+/-", "tokens", "cost", "time"
    )];
    for (i, row) in rows.iter().enumerate() {
        let status = row.attempt.status();
        let check = match &row.attempt.check {
            Some(check) if check.passed() => "passed".to_string(),
            Some(check) => match check.exit_code {
                Some(code) => format!("exit {code}"),
                None => "timeout".to_string(),
            },
            None => "-".to_string(),
        };
        let (files, changed) = match row.finished {
            Some(f) => (
                f.patch.files.len().to_string(),
                format!("+{} -{}", f.patch.added_lines, f.patch.removed_lines),
            ),
            None => ("-".to_string(), "-".to_string()),
        };
        let run: String = row.attempt.run.chars().take(10).collect();
        let cost = row.cost.map_or_else(|| "?".to_string(), usd);
        lines.push(format!(
            "{:<3} {:<10} {:<9} {:<8} {:>5} {:>13} {:>10} {:>9} {:>6.1}s",
            i + 1,
            run,
            status,
            check,
            files,
            changed,
            row.tokens.input_tokens + row.tokens.output_tokens,
            cost,
            row.attempt.duration.as_secs_f64()
        ));
    }
    lines
}

/// Reviews the winner (or the attempt the user turns to instead) as the
/// task's review mode says, and records the decision in its manifest.
fn review_winner(
    tried: &Tried,
    rows: &[Row<'_>],
    winner: usize,
    no_commit: bool,
    front: &mut dyn Front,
) -> Result<Outcome> {
    let setup = &tried.setup;
    let others: Vec<String> = rows
        .iter()
        .enumerate()
        .map(|(i, row)| {
            let state = if row.passed { "passed" } else { "did not pass" };
            format!("attempt {} ({state})", i + 1)
        })
        .collect();
    let mut shown = winner;
    loop {
        let Some(finished) = rows[shown].finished else {
            front.notice(&format!("attempt {} has no patch to show", shown + 1));
            shown = winner;
            continue;
        };
        let mut request = Review {
            mode: setup.review_mode,
            project: &setup.project,
            patch: &finished.patch,
            patch_path: &finished.patch_path,
            poisoned: finished.poisoned.as_deref(),
            policy: &setup.policy,
            task: &setup.task,
            no_commit,
            head: &finished.head,
            decided: None,
            rounds: &[],
            pager: setup.pager.as_deref(),
        };
        // Only a person can turn to another attempt.
        let decided = match setup.review_mode {
            ReviewMode::Ask if front.can_revise() && finished.poisoned.is_none() => {
                match review::round_among(&request, &others, shown, front)? {
                    Round::Decided(decided) => Some(decided),
                    Round::Revise(_) => None,
                }
            }
            _ => None,
        };
        if let Some(Choice::Attempt(other)) = decided.as_ref().map(|d| &d.choice) {
            shown = *other;
            continue;
        }
        request.decided = decided.as_ref();
        let reviewed = review::review(&request, front)?;
        record(
            tried,
            &rows[shown],
            finished,
            &reviewed.record,
            reviewed.applied,
            front,
        );
        return Ok(if reviewed.failed {
            Outcome::Failed
        } else if setup.review_mode != ReviewMode::Never && !reviewed.applied {
            Outcome::NotApplied
        } else {
            Outcome::Done
        });
    }
}

/// Records the review of the attempt in its manifest and the session.
fn record(
    tried: &Tried,
    row: &Row<'_>,
    finished: &Finished,
    record: &ReviewRecord,
    applied: bool,
    front: &mut dyn Front,
) {
    if let Some(dir) = finished.patch_path.parent() {
        let path = dir.join("manifest.json");
        if let Ok(mut manifest) = Manifest::load(&path) {
            manifest.review = Some(record.clone());
            manifest.applied = applied;
            if let Err(err) = manifest.save(&path) {
                front.notice(&format!(
                    "warning: {} was not updated: {err}",
                    path.display()
                ));
            }
        }
    }
    let event = review_done(&finished.patch_path, &finished.patch, record, applied);
    record_event(&tried.session, None, &event);
    front.show(&RunEvent::of(&row.attempt.run, &event));
}

#[cfg(test)]
mod tests;
