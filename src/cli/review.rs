//! The terminal's part of a review: the lines the run says about the patch,
//! in their colours, and at `--review ask` the patch in a pager followed by
//! the question (apply all, choose files, choose hunks, save only,
//! discard). What the answer leads to is the run's to decide (core's
//! `run/review.rs`).

use std::io::IsTerminal;
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, Result};
use console::style;

use super::{review_hunks, review_pick};
use ah_core::present::{copy_terminal_safe, terminal_safe};
use ah_core::run::{Choice, PatchToChoose, Question, Tone};

/// Shows the patch and asks what becomes of it.
pub(super) fn choose(patch: &PatchToChoose<'_>) -> Result<Choice> {
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        return Ok(Choice::NobodyToAsk);
    }
    show_in_pager(patch.patch)?;
    let choices = [
        "apply all",
        "choose files",
        "choose hunks",
        "save only",
        "discard",
    ];
    loop {
        let picked = dialoguer::Select::new()
            .with_prompt("What should happen to this patch?")
            .items(choices)
            .default(0)
            .interact();
        return Ok(match picked {
            Ok(0) => Choice::ApplyAll,
            Ok(1) => review_pick::pick(patch),
            Ok(2) => match review_hunks::pick(patch) {
                Ok(choice) => choice,
                Err(err) => {
                    // The patch cannot be cut into hunks: the other ways stay.
                    let why = terminal_safe(&format!("{err:#}")).into_owned();
                    eprintln!("{}", line(Tone::Warning, "cannot choose hunks:", &why));
                    continue;
                }
            },
            Ok(3) => Choice::SaveOnly,
            Ok(_) => Choice::Discard,
            // Ctrl+C or a closed terminal at the prompt keeps the patch.
            Err(_) => Choice::Left(Question::WhatToDo),
        });
    }
}

/// A line of the review (or of `ah apply`): its lead in the tone's colour,
/// bold, then the rest.
pub(super) fn line(tone: Tone, lead: &str, rest: &str) -> String {
    let lead = match tone {
        Tone::Plain => lead.to_string(),
        Tone::Good => style(lead).green().bold().to_string(),
        Tone::Warning => style(lead).yellow().bold().to_string(),
        Tone::Refused => style(lead).red().bold().to_string(),
    };
    match (lead.is_empty(), rest.is_empty()) {
        (true, _) => rest.to_string(),
        (false, true) => lead,
        (false, false) => format!("{lead} {rest}"),
    }
}

/// Shows the patch in `$GIT_PAGER`, `$PAGER`, `delta`, `less -R`, or prints
/// it; control, bidi and invisible characters in it are made visible first,
/// whatever the pager (the file on disk stays exact). The patch is streamed
/// from its file, never read whole.
fn show_in_pager(patch_path: &Path) -> Result<()> {
    let open = || {
        std::fs::File::open(patch_path)
            .with_context(|| format!("cannot read {}", patch_path.display()))
    };
    let pager = ["GIT_PAGER", "PAGER"]
        .iter()
        .find_map(|var| std::env::var(var).ok().filter(|v| !v.trim().is_empty()))
        .or_else(|| which::which("delta").ok().map(|_| "delta".to_string()))
        .or_else(|| which::which("less").ok().map(|_| "less -R".to_string()));
    if let Some(pager) = pager {
        let child = Command::new("sh")
            .arg("-c")
            .arg(&pager)
            .stdin(Stdio::piped())
            .spawn();
        if let Ok(mut child) = child {
            if let Some(stdin) = child.stdin.take() {
                // A pager quit early closes its input; that is not an error.
                let _ = copy_terminal_safe(open()?, stdin);
            }
            let _ = child.wait();
            return Ok(());
        }
    }
    copy_terminal_safe(open()?, std::io::stdout().lock()).context("cannot print the patch")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_joins_its_parts_with_one_space() {
        console::set_colors_enabled(false);
        assert_eq!(line(Tone::Plain, "patch saved:", "x"), "patch saved: x");
        assert_eq!(line(Tone::Good, "applied:", "1 file"), "applied: 1 file");
        assert_eq!(line(Tone::Plain, "", "no changes"), "no changes");
        assert_eq!(line(Tone::Plain, "discarded", ""), "discarded");
    }
}
