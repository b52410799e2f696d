//! A project's saved runs, for the commands besides a run: `ah runs`
//! lists them, `ah apply RUN` applies a run's patch as its review would
//! have (never a poisoned one, never twice without `force`), and
//! `ah runs prune` removes old ones, never a live one.

mod reopen;

use std::path::Path;
use std::time::SystemTime;

use anyhow::{Context, Result, bail};

use crate::run::review::apply_patch;
pub use ah_record::rundir::RunSummary;
pub use ah_record::rundir::prune::{PruneOptions, PruneReport};
use ah_record::rundir::{Manifest, ReviewDecision, RunDir, list_runs};
pub use ah_review::apply::ApplyOutcome;
pub use reopen::{Reopened, reopen, reopen_as};

/// The runs of `project`, newest first.
pub fn list(project: &Path) -> Result<Vec<RunSummary>> {
    Ok(list_runs(&project.join(".ah"))?)
}

/// Removes the runs of `project` that `options` select (see
/// `ah_record::rundir::prune`); with `dry_run`, only says which.
pub fn prune(project: &Path, options: PruneOptions) -> Result<PruneReport> {
    Ok(ah_record::rundir::prune::prune(
        &project.join(".ah"),
        options,
        SystemTime::now(),
    )?)
}

/// `ah apply RUN`: applies the patch of the run whose id starts with
/// `run_id` to `project`, and marks the run applied. A run that must
/// not be applied is refused; one applied already is refused without
/// `force` (applying twice would fail half-way or duplicate changes).
pub fn apply(project: &Path, run_id: &str, no_commit: bool, force: bool) -> Result<ApplyOutcome> {
    let ah_dir = project.join(".ah");
    let run = find_run(&ah_dir, run_id)?;
    let manifest_path = run.manifest_path();
    let mut manifest = Manifest::load(&manifest_path).ok();
    if let Some(why) = manifest.as_ref().and_then(|m| m.poisoned.as_deref()) {
        bail!(
            "run {} must not be applied: {why}; its patch is kept only for inspection",
            run.id()
        );
    }
    let partly = manifest
        .as_ref()
        .and_then(|m| m.review.as_ref())
        .is_some_and(|r| r.decision == ReviewDecision::PartlyApplied);
    let rest = run.path().join("rest.patch");
    if !force && partly && rest.is_file() {
        bail!(
            "run {} was partly applied; what was not is saved in {}: apply it with `git apply --3way {}` (--force would apply the whole patch again)",
            run.id(),
            rest.display(),
            rest.display()
        );
    }
    if !force && manifest.as_ref().is_some_and(|m| m.applied) {
        bail!(
            "run {} was applied already; pass --force to apply its patch again",
            run.id()
        );
    }
    let task = manifest
        .as_ref()
        .map(|m| m.task.clone())
        .unwrap_or_else(|| format!("run {}", run.id()));
    let applied = apply_patch(project, &run.patch_path(), &task, no_commit)?;
    if let Some(manifest) = manifest.as_mut() {
        manifest.applied = true;
        manifest.save(&manifest_path)?;
    }
    Ok(applied)
}

/// The run whose id starts with `prefix` (any case).
pub(crate) fn find_run(ah_dir: &Path, prefix: &str) -> Result<RunDir> {
    let runs = ah_dir.join("runs");
    let entries = std::fs::read_dir(&runs)
        .with_context(|| format!("no runs in {}: run a task first", ah_dir.display()))?;
    let prefix_upper = prefix.to_ascii_uppercase();
    let mut matches: Vec<String> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(&prefix_upper))
        .collect();
    matches.sort();
    match matches.as_slice() {
        [one] => Ok(RunDir::open(ah_dir, one)?),
        [] => bail!("no run matches {prefix:?}: `ah runs` lists them"),
        many => bail!(
            "{prefix:?} matches {} runs ({}): give more of the id",
            many.len(),
            many.join(", ")
        ),
    }
}
