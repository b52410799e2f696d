//! The project-level and changing session commands: `ah sessions`,
//! `ah usage` (tokens and their cost), `ah checkout @N`, `ah branch rm @N`.

use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::{Context, Result};

use super::super::EXIT_OK;
use super::summary::row;
use ah_core::cost::{Prices, usd};
use ah_core::present::{count, terminal_safe};
use ah_core::sessions::{self, CallKind, ModelUsage, Removed, Session, total_usage};

/// `ah sessions`: one line per session, newest first.
pub(super) fn sessions(project: &Path, json: bool) -> Result<i32> {
    let sessions = sessions::list(project)?;
    if json {
        println!(
            "{}",
            serde_json::to_string(&sessions).context("cannot encode the session list")?
        );
        return Ok(EXIT_OK);
    }
    if sessions.is_empty() {
        eprintln!("no sessions yet in {}", project.join(".ah").display());
    }
    // Thousands of lines: one buffer, not one write per line.
    let mut out = BufWriter::new(std::io::stdout().lock());
    for s in &sessions {
        let created: String = s
            .created_at
            .chars()
            .take(16)
            .collect::<String>()
            .replace('T', " ");
        let name = s
            .name
            .as_deref()
            .map_or(String::new(), |n| format!("[{}] ", terminal_safe(n)));
        let prompt = s.prompt_line(60);
        writeln!(
            out,
            "{}  {created}  {:>5} msgs  {:>9} in  {:>8} out  {name}{}",
            s.id,
            s.messages,
            s.input_tokens,
            s.output_tokens,
            terminal_safe(&prompt)
        )
        .context("cannot print the session list")?;
    }
    out.flush().context("cannot print the session list")?;
    Ok(EXIT_OK)
}

/// `ah usage`: tokens and cost by model in one session, compaction calls
/// apart.
pub(super) fn usage(session: &Session, prices: &Prices) -> Result<i32> {
    println!("session {}", session.id());
    print_usage(&session.usage()?, prices);
    Ok(EXIT_OK)
}

/// `ah usage --all`: tokens and cost by model over every session of the
/// project.
pub(super) fn usage_all(project: &Path, prices: &Prices) -> Result<i32> {
    let all = sessions::usage_all(project)?;
    for err in &all.skipped {
        eprintln!("warning: skipped: {err}");
    }
    println!(
        "{} in {}",
        count(all.sessions, "session", "sessions"),
        project.join(".ah").display()
    );
    print_usage(&all.rows, prices);
    Ok(EXIT_OK)
}

/// One line per model and kind of call (a compaction's summary calls are
/// `compaction (MODEL)`) with what they cost, then the total.
fn print_usage(rows: &[ModelUsage], prices: &Prices) {
    let line = |what: &str, calls: u64, input: u64, output: u64, cost: &str| {
        println!(
            "{what:<45} {calls:>7} calls {input:>12} in {output:>10} out  {}",
            terminal_safe(cost)
        );
    };
    for usage in rows {
        let model = terminal_safe(usage.model.as_deref().unwrap_or("(no model recorded)"));
        let what = match usage.kind {
            CallKind::Answer => model.into_owned(),
            CallKind::Compaction => format!("compaction ({model})"),
        };
        let cost = prices.of_calls(usage).map_or("no price".to_string(), usd);
        let (input, output) = (usage.input_tokens, usage.output_tokens);
        line(&what, usage.calls, input, output, &cost);
    }
    let total = total_usage(rows);
    line(
        "total",
        rows.iter().map(|u| u.calls).sum(),
        total.input_tokens,
        total.output_tokens,
        &prices.cost(rows).to_string(),
    );
}

/// `ah checkout @N`: the next prompt goes under @N, and the next run's
/// files start from @N's point.
pub(super) fn checkout(session: &Session, seq: i64) -> Result<i32> {
    let target = sessions::checkout(session, seq)?;
    println!("head is now {}", row(&target));
    println!("the next prompt continues from @{seq}: ah \"…\"");
    Ok(EXIT_OK)
}

/// `ah branch rm @N`: removes @N and everything under it.
pub(super) fn branch_rm(session: &mut Session, seq: i64, force: bool) -> Result<i32> {
    let Removed {
        seqs,
        head_moved_to,
    } = sessions::remove_branch(session, seq, force)?;
    let list: Vec<String> = seqs.iter().map(|s| format!("@{s}")).collect();
    println!(
        "removed {}: {}",
        count(seqs.len(), "message", "messages"),
        list.join(", ")
    );
    match head_moved_to {
        Some(Some(parent)) => println!("head moved to @{parent}"),
        Some(None) => println!("head cleared: no message is left above the branch"),
        None => {}
    }
    Ok(EXIT_OK)
}
