//! What happens to a run's patch: saved only (`never`), applied when the
//! auto-review rules allow (`auto`), or shown to the user in a pager with a
//! choice (`ask`): apply all, choose files, save only or discard. Applying
//! is always the sandbox layer's 3-way apply.

use std::io::IsTerminal;
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, Result};
use console::style;

use super::review_pick;
use ah_core::run::{ReviewMode, ReviewOutcome, ReviewRequest};
use ah_record::rundir::{ReviewDecision, ReviewRecord};
use ah_record::safe_text::{copy_terminal_safe, terminal_safe};
use ah_review::apply::{self, ApplyOptions};
use ah_review::review::{self as rules, AutoDecision, Hidden};

/// Reviews a finished run's patch as `request.mode` says.
pub fn review(request: &ReviewRequest<'_>) -> Result<ReviewOutcome> {
    let &ReviewRequest { mode, result, .. } = request;
    let patch_path = &result.patch_path;
    if result.patch.files.is_empty() {
        eprintln!("no changes to review");
        return Ok(outcome(
            mode,
            ReviewDecision::Empty,
            "the run changed no files",
            false,
            false,
        ));
    }
    // The diffstat escapes the names itself; the rest is ours.
    eprintln!("{}", rules::diffstat(&result.patch.files));
    let patch_file = std::fs::File::open(patch_path)
        .with_context(|| format!("cannot read {}", patch_path.display()))?;
    let hidden = rules::hidden_chars(&result.patch, std::io::BufReader::new(patch_file))
        .with_context(|| format!("cannot read {}", patch_path.display()))?;
    if !hidden.is_empty() {
        eprintln!(
            "{} the patch holds invisible or bidi characters: {}",
            style("warning:").yellow().bold(),
            rules::describe_hidden(&hidden)
        );
    }
    if let Some(why) = &result.poisoned {
        eprintln!(
            "{} this run's patch must not be applied: {}",
            style("refused:").red().bold(),
            terminal_safe(why)
        );
        eprintln!("the patch is kept for inspection: {}", patch_path.display());
        return Ok(outcome(mode, ReviewDecision::Refused, why, false, true));
    }
    match mode {
        ReviewMode::Never => {
            eprintln!("patch saved: {}", patch_path.display());
            Ok(outcome(
                mode,
                ReviewDecision::Saved,
                "review mode never",
                false,
                false,
            ))
        }
        ReviewMode::Auto => auto(request, &hidden),
        ReviewMode::Ask => ask(request),
    }
}

/// `--review auto`: applied when the rules allow, else saved with every
/// reason.
fn auto(request: &ReviewRequest<'_>, hidden: &[Hidden]) -> Result<ReviewOutcome> {
    let &ReviewRequest {
        mode,
        project,
        result,
        policy,
        task,
        no_commit,
    } = request;
    let patch_path = &result.patch_path;
    let clean = apply::check_patch(project, patch_path)?;
    match rules::decide_patch(&result.patch, policy, clean, hidden) {
        AutoDecision::Apply => apply_now(
            mode,
            project,
            patch_path,
            task,
            no_commit,
            "auto: small, clean, unrestricted",
        ),
        AutoDecision::NothingToApply => Ok(outcome(
            mode,
            ReviewDecision::Empty,
            "nothing to apply",
            false,
            false,
        )),
        AutoDecision::Save { reasons } => {
            let reason = reasons.join("; ");
            eprintln!("not applied automatically: {}", terminal_safe(&reason));
            eprintln!(
                "patch saved: {} (apply it with: ah apply {})",
                patch_path.display(),
                run_id(patch_path)
            );
            Ok(outcome(mode, ReviewDecision::Saved, &reason, false, false))
        }
    }
}

/// `--review ask`: the patch in a pager, then the user's choice.
fn ask(request: &ReviewRequest<'_>) -> Result<ReviewOutcome> {
    let &ReviewRequest {
        mode,
        project,
        result,
        task,
        no_commit,
        ..
    } = request;
    let patch_path = &result.patch_path;
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        eprintln!(
            "patch saved: {} (no terminal to ask on)",
            patch_path.display()
        );
        return Ok(outcome(
            mode,
            ReviewDecision::Saved,
            "no terminal to ask on",
            false,
            false,
        ));
    }
    show_in_pager(patch_path)?;
    let choices = ["apply all", "choose files", "save only", "discard"];
    let picked = dialoguer::Select::new()
        .with_prompt("What should happen to this patch?")
        .items(choices)
        .default(0)
        .interact();
    // Ctrl+C or a closed terminal at the prompt keeps the patch.
    let Ok(picked) = picked else {
        eprintln!("review interrupted; patch saved: {}", patch_path.display());
        return Ok(outcome(
            mode,
            ReviewDecision::Saved,
            "the review was interrupted",
            false,
            false,
        ));
    };
    match picked {
        0 => apply_now(
            mode,
            project,
            patch_path,
            task,
            no_commit,
            "chosen by the user",
        ),
        1 => {
            let run_dir = patch_path
                .parent()
                .context("the patch file has no run directory")?;
            review_pick::pick_and_apply(
                project,
                run_dir,
                patch_path,
                &result.patch,
                task,
                no_commit,
            )
        }
        2 => {
            eprintln!("patch saved: {}", patch_path.display());
            Ok(outcome(
                mode,
                ReviewDecision::Saved,
                "chosen by the user",
                false,
                false,
            ))
        }
        _ => {
            eprintln!(
                "discarded (the patch file stays at {})",
                patch_path.display()
            );
            Ok(outcome(
                mode,
                ReviewDecision::Discarded,
                "chosen by the user",
                false,
                false,
            ))
        }
    }
}

pub(super) fn apply_now(
    mode: ReviewMode,
    project: &Path,
    patch_path: &Path,
    task: &str,
    no_commit: bool,
    why: &str,
) -> Result<ReviewOutcome> {
    let options = ApplyOptions {
        commit: !no_commit,
        message: commit_message(task),
    };
    match apply::apply_patch(project, patch_path, &options) {
        Ok(applied) => {
            eprintln!(
                "{} {}",
                style("applied:").green().bold(),
                terminal_safe(&applied.to_string())
            );
            Ok(outcome(mode, ReviewDecision::Applied, why, true, false))
        }
        Err(err) => {
            eprintln!(
                "{} {}",
                style("not applied:").red().bold(),
                terminal_safe(&err.to_string())
            );
            Ok(outcome(
                mode,
                ReviewDecision::ApplyFailed,
                &err.to_string(),
                false,
                true,
            ))
        }
    }
}

/// The host commit message: the task's first line, shortened, then the task.
pub fn commit_message(task: &str) -> String {
    let first = task.lines().next().unwrap_or_default().trim();
    let mut subject: String = first.chars().take(68).collect();
    if subject.len() < first.len() {
        subject.push('…');
    }
    format!("ah: {subject}\n\nTask:\n{}\n", task.trim())
}

pub(super) fn outcome(
    mode: ReviewMode,
    decision: ReviewDecision,
    reason: &str,
    applied: bool,
    failed: bool,
) -> ReviewOutcome {
    ReviewOutcome {
        record: ReviewRecord {
            mode,
            decision,
            reason: Some(reason.to_string()),
        },
        applied,
        failed,
    }
}

fn run_id(patch_path: &Path) -> String {
    patch_path
        .parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
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
    fn commit_message_names_the_task() {
        let msg = commit_message("fix the parser\nit breaks on tabs");
        assert!(msg.starts_with("ah: fix the parser\n\nTask:\nfix the parser\nit breaks on tabs"));
        let long = "x".repeat(100);
        let subject = commit_message(&long).lines().next().unwrap().to_string();
        assert_eq!(subject.chars().count(), 4 + 68 + 1);
    }
}
