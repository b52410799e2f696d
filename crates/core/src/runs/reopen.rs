//! `ah review [RUN]`: the review of a saved run, opened again — the
//! project's newest run whose patch was not applied, or the one named. The
//! same choices as at a run's end; its decision replaces the run's in the
//! manifest. "Revise" cannot go on in the run's own sandbox (it is gone):
//! it names the message that starts a new run of the run's session, whose
//! files continue from the run's (the session's continuity restores them),
//! for the front-end to run.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::find_run;
use crate::config::{self, ProjectFiles};
use crate::run::review::{self, Review, Round};
use crate::run::{Front, Outcome, ReviewMode};
use crate::time_travel::latest_run;
use ah_record::patch::PatchInfo;
use ah_record::policy::Policy;
use ah_record::rundir::{Manifest, RunDir, list_runs};
use ah_session::Session;

/// What became of a reopened review.
pub enum Reopened {
    /// Decided (applied, saved, discarded…): how the run's review ended.
    Done(Outcome),
    /// Sent back: run `message` as the next prompt of the session in
    /// `session_db`.
    Revise {
        session_db: PathBuf,
        message: String,
    },
}

/// Reopens the review of the run whose id starts with `run_id` (else the
/// newest run not applied) of `project`, asking `front`.
pub fn reopen(project: &Path, run_id: Option<&str>, front: &mut dyn Front) -> Result<Reopened> {
    reopen_as(project, run_id, ReviewMode::Ask, front)
}

/// [`reopen`] in review mode `mode`: `auto` applies the patch when the
/// auto-review rules allow, without asking (`ah batch`).
pub fn reopen_as(
    project: &Path,
    run_id: Option<&str>,
    mode: ReviewMode,
    front: &mut dyn Front,
) -> Result<Reopened> {
    let ah_dir = project.join(".ah");
    let run = match run_id {
        Some(prefix) => find_run(&ah_dir, prefix)?,
        None => newest_unapplied(&ah_dir)?,
    };
    let manifest_path = run.manifest_path();
    let mut manifest = Manifest::load(&manifest_path)
        .with_context(|| format!("run {} has no readable manifest", run.id()))?;
    if manifest.applied {
        bail!(
            "run {} was applied already; `ah apply --force {}` applies its patch again",
            run.id(),
            run.id()
        );
    }
    let patch = saved_patch(&run, &manifest)?;
    let policy = Policy::load(project, None, &[], &[])?;
    let pager = config::load(&ProjectFiles::new(project, &policy), &[])
        .ok()
        .and_then(|loaded| loaded.user.review.pager);
    let head = manifest.head.clone().unwrap_or_default();
    let request = Review {
        mode,
        project,
        patch: &patch,
        patch_path: &run.patch_path(),
        poisoned: manifest.poisoned.as_deref(),
        policy: &policy,
        task: &manifest.task,
        no_commit: false,
        head: &head,
        decided: None,
        rounds: &[],
        pager: pager.as_deref(),
    };
    let decided = match (&manifest.poisoned, mode) {
        (Some(_), _) | (_, ReviewMode::Auto | ReviewMode::Never) => None,
        (None, ReviewMode::Ask) => match review::round(&request, front)? {
            Round::Revise(revise) => return revise_later(&run, &manifest, &revise),
            Round::Decided(decided) => Some(decided),
        },
    };
    let reviewed = review::review(
        &Review {
            decided: decided.as_ref(),
            ..request
        },
        front,
    )?;
    manifest.review = Some(reviewed.record);
    manifest.applied = reviewed.applied;
    manifest.save(&manifest_path)?;
    Ok(Reopened::Done(if reviewed.failed {
        Outcome::Failed
    } else if reviewed.applied {
        Outcome::Done
    } else {
        Outcome::NotApplied
    }))
}

/// The newest run whose patch is saved, not empty and not applied.
fn newest_unapplied(ah_dir: &Path) -> Result<RunDir> {
    let found = list_runs(ah_dir)?.into_iter().find(|run| {
        run.manifest.as_ref().is_ok_and(|m| {
            !m.applied && m.poisoned.is_none() && m.patch.is_some_and(|p| p.files > 0)
        })
    });
    match found {
        Some(run) => Ok(RunDir::open(ah_dir, &run.id.to_string())?),
        None => bail!("no run with a patch that was not applied: `ah runs` lists the runs"),
    }
}

/// The run's saved patch, as its manifest describes it.
fn saved_patch(run: &RunDir, manifest: &Manifest) -> Result<PatchInfo> {
    let Some(stats) = manifest.patch else {
        bail!(
            "run {} saved no patch: there is nothing to review",
            run.id()
        );
    };
    if manifest.files.is_empty() && stats.files > 0 {
        bail!(
            "run {} was recorded by an older ah, without its patch's files: look at {} and \
             `ah apply {}` it",
            run.id(),
            run.patch_path().display(),
            run.id()
        );
    }
    Ok(PatchInfo {
        files: manifest.files.clone(),
        added_lines: stats.added,
        removed_lines: stats.removed,
        bytes: manifest.files.iter().map(|file| file.bytes).sum(),
        left_out: manifest.left_out.clone(),
    })
}

/// A revise of a saved run: the message of a new run that continues the
/// session from the run's files, which only the session's latest run's
/// are (an older run's are reached by a fork: `ah @N "…"`).
fn revise_later(
    run: &RunDir,
    manifest: &Manifest,
    revise: &crate::run::Revise,
) -> Result<Reopened> {
    let Some(db) = manifest.session_db.as_deref().map(PathBuf::from) else {
        bail!("run {} names no session to go on in", run.id());
    };
    let session = Session::open(&db)
        .with_context(|| format!("cannot open the run's session {}", db.display()))?;
    if latest_run(&session)? != Some(run.id().to_string()) {
        bail!(
            "run {} is not its session's latest: a new run would not start from its files; \
             go back to it with `ah checkout @N` (`ah show` numbers the messages), then run `ah` on from there",
            run.id()
        );
    }
    Ok(Reopened::Revise {
        session_db: db,
        message: crate::run::revise_message(revise),
    })
}
