//! "Choose files" in an `ask` review: a multi-select of the patch's files
//! with their +/− counts, each file that acts outside the diff marked ("runs
//! code in other tools", "instructions for agents", …); the chosen ones are
//! applied as one patch with the usual 3-way logic, the others are saved
//! beside it as `rest.patch`.

use std::path::Path;

use anyhow::{Context, Result};

use super::review::{apply_now, outcome};
use ah_core::run::ReviewMode;
use ah_core::run::ReviewOutcome;
use ah_record::patch::PatchInfo;
use ah_record::rundir::ReviewDecision;
use ah_record::safe_text::name_safe;
use ah_review::review::elsewhere;
use ah_review::subpatch;

/// Asks which files to apply and applies them. `run_dir` receives
/// `chosen.patch` and `rest.patch`, cut from the patch at `patch_path`.
pub(super) fn pick_and_apply(
    project: &Path,
    run_dir: &Path,
    patch_path: &Path,
    patch: &PatchInfo,
    task: &str,
    no_commit: bool,
) -> Result<ReviewOutcome> {
    let items: Vec<String> = patch
        .files
        .iter()
        .map(|file| {
            let counts = if file.binary {
                "binary".to_string()
            } else {
                format!("+{} −{}", file.added, file.removed)
            };
            let mark = elsewhere(&file.path)
                .map(|kind| format!("  ({})", kind.label()))
                .unwrap_or_default();
            format!("{}  {counts}{mark}", name_safe(&file.path))
        })
        .collect();
    let defaults = vec![true; items.len()];
    let picked = dialoguer::MultiSelect::new()
        .with_prompt("Files to apply (space toggles, enter confirms)")
        .items(&items)
        .defaults(&defaults)
        .interact_opt();
    let mode = ReviewMode::Ask;
    let chosen = match picked {
        Ok(Some(chosen)) => chosen,
        // Esc, Ctrl+C or a closed terminal keeps the whole patch.
        Ok(None) | Err(_) => {
            eprintln!("no files chosen; patch saved");
            return Ok(outcome(
                mode,
                ReviewDecision::Saved,
                "the file choice was left",
                false,
                false,
            ));
        }
    };
    if chosen.is_empty() {
        eprintln!("no files chosen; patch saved");
        return Ok(outcome(
            mode,
            ReviewDecision::Saved,
            "no file was chosen",
            false,
            false,
        ));
    }
    let chosen_path = run_dir.join("chosen.patch");
    let rest_path = run_dir.join("rest.patch");
    let split = subpatch::split(patch_path, patch, &chosen, &chosen_path, &rest_path)
        .context("cannot split the patch by file")?;
    let why = if split.rest.is_empty() {
        "chosen by the user: every file".to_string()
    } else {
        format!(
            "chosen by the user: {} of {} files; the rest is in {}",
            split.chosen.files.len(),
            patch.files.len(),
            rest_path.display()
        )
    };
    let mut applied = apply_now(mode, project, &chosen_path, task, no_commit, &why)?;
    if applied.applied && !split.rest.is_empty() {
        applied.record.decision = ReviewDecision::PartlyApplied;
        eprintln!(
            "not applied: {} more file(s), saved in {} (apply later with git apply --3way)",
            split.rest.files.len(),
            rest_path.display()
        );
    }
    Ok(applied)
}
