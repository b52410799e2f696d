//! The terminal's part of a review: the lines the run says about the patch,
//! in their colours, and at `--review ask` the patch in a pager followed by
//! the question (apply all, choose files, choose hunks, save only,
//! discard, and revise where the run can go on: a note for the model; show
//! another attempt of a task). What the answer leads to is the run's to
//! decide (core's `run/review.rs`).

use std::io::IsTerminal;
use std::process::{Command, Stdio};

use anyhow::{Context, Result};
use console::style;

use super::diff_view::{self, Paint};
use super::{menu, review_hunks, review_pick};
use ah_core::present::{copy_terminal_safe, terminal_safe};
use ah_core::run::{Choice, Pager, PatchToChoose, Question, Revise, Tone};

/// The longest note a revise sends the model back with, in characters.
const MAX_NOTE: usize = 4000;

/// Whether a person is there to ask: standard input and error are a
/// terminal.
pub(super) fn at_a_terminal() -> bool {
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// Shows the patch and asks what becomes of it.
pub(super) fn choose(patch: &PatchToChoose<'_>) -> Result<Choice> {
    if !at_a_terminal() {
        return Ok(Choice::NobodyToAsk);
    }
    show_in_pager(patch)?;
    let mut choices: Vec<String> = [
        "apply all",
        "choose files",
        "choose hunks",
        "save only",
        "discard",
    ]
    .map(String::from)
    .to_vec();
    if patch.can_revise {
        choices.push("revise: send the model back with a note".to_string());
    }
    // Another attempt of the task, by its index among the attempts.
    let others: Vec<usize> = (0..patch.attempts.len())
        .filter(|&i| i != patch.this_attempt)
        .collect();
    for &other in &others {
        choices.push(format!("show {} instead", patch.attempts[other]));
    }
    let revise = usize::from(patch.can_revise);
    loop {
        let picked = menu::select("What should happen to this patch?", &choices, 0);
        return Ok(match picked {
            Some(0) => Choice::ApplyAll,
            Some(1) => review_pick::pick(patch),
            Some(2) => match review_hunks::pick(patch) {
                Ok(choice) => choice,
                Err(err) => {
                    // The patch cannot be cut into hunks: the other ways stay.
                    let why = terminal_safe(&format!("{err:#}")).into_owned();
                    eprintln!("{}", line(Tone::Warning, "cannot choose hunks:", &why));
                    continue;
                }
            },
            Some(3) => Choice::SaveOnly,
            Some(4) => Choice::Discard,
            Some(5) if patch.can_revise => revise_note(),
            Some(n) => match others.get(n - 5 - revise) {
                Some(&other) => Choice::Attempt(other),
                None => Choice::Left(Question::WhatToDo),
            },
            // Esc, Ctrl+C or a closed terminal at the prompt keeps the patch.
            None => Choice::Left(Question::WhatToDo),
        });
    }
}

/// Asks for the note the model goes back to work with.
fn revise_note() -> Choice {
    match menu::line("What should the model change?", MAX_NOTE) {
        Some(note) => Choice::Revise(Revise {
            note,
            rejected: Vec::new(),
        }),
        None => Choice::Left(Question::WhatToDo),
    }
}

/// A line of the review (or of `ah apply`), for stderr: its lead in the
/// tone's colour, bold, when stderr's colours are on, then the rest.
pub(super) fn line(tone: Tone, lead: &str, rest: &str) -> String {
    let styled = || style(lead).for_stderr().bold();
    let lead = match tone {
        Tone::Plain => lead.to_string(),
        Tone::Good => styled().green().to_string(),
        Tone::Warning => styled().yellow().to_string(),
        Tone::Refused => styled().red().to_string(),
    };
    match (lead.is_empty(), rest.is_empty()) {
        (true, _) => rest.to_string(),
        (false, true) => lead,
        (false, false) => format!("{lead} {rest}"),
    }
}

/// Shows the patch in the pager the user chose (core's
/// `run::review::pager`), or `less -R` where none was and less is
/// installed, or prints it; streamed from its file, never read whole. A
/// diff pager gets the patch as it is (it colours it itself), any other the
/// coloured view ([`diff_view`], plain when stdout's colours are off, as git
/// decides for its pager); control, bidi and invisible characters are made
/// visible in both (the file on disk stays exact). `LESS` and `LV` get
/// git's defaults when unset (`FRX`: a short patch needs no `q`). The pager
/// runs in `/` with `GIT_DIR=/dev/null`: a diff pager that reads git's
/// configuration for its own settings reads the user's, never the
/// project's.
fn show_in_pager(patch: &PatchToChoose<'_>) -> Result<()> {
    let open = || {
        std::fs::File::open(patch.patch)
            .with_context(|| format!("cannot read {}", patch.patch.display()))
    };
    let paint = match console::colors_enabled() {
        true => Paint::Colour,
        false => Paint::Plain,
    };
    let (command, raw) = match patch.pager() {
        Pager::Plain(command) => (Some(command.clone()), false),
        Pager::Diff(command) => (Some(command.clone()), true),
        Pager::Default => (
            which::which("less").ok().map(|_| "less -R".to_string()),
            false,
        ),
        Pager::Off => (None, false),
    };
    if let Some(command) = command {
        let mut pager = Command::new("sh");
        pager
            .arg("-c")
            .arg(&command)
            .current_dir("/")
            .env("GIT_DIR", "/dev/null")
            .stdin(Stdio::piped());
        for (name, value) in [("LESS", "FRX"), ("LV", "-c")] {
            if std::env::var_os(name).is_none() {
                pager.env(name, value);
            }
        }
        if let Ok(mut child) = pager.spawn() {
            if let Some(mut stdin) = child.stdin.take() {
                // A pager quit early closes its input; that is not an error.
                let _ = match raw {
                    true => copy_terminal_safe(open()?, stdin),
                    false => diff_view::render_patch(open()?, paint, &mut stdin),
                };
            }
            let _ = child.wait();
            return Ok(());
        }
    }
    let mut stdout = std::io::stdout().lock();
    diff_view::render_patch(open()?, paint, &mut stdout).context("cannot print the patch")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_joins_its_parts_with_one_space() {
        console::set_colors_enabled_stderr(false);
        assert_eq!(line(Tone::Plain, "patch saved:", "x"), "patch saved: x");
        assert_eq!(line(Tone::Good, "applied:", "1 file"), "applied: 1 file");
        assert_eq!(line(Tone::Plain, "", "no changes"), "no changes");
        assert_eq!(line(Tone::Plain, "discarded", ""), "discarded");
    }
}
