//! Where a run's files come from:
//!
//! - a conversation forked or checked out at an earlier message (session
//!   context `workspace_at`): the files as they were at that message;
//! - else, when the session's previous run was not applied (saved, aborted,
//!   stopped, failed): the files as the conversation's head left them, so
//!   the model goes on with its own changes, as the conversation says;
//! - else (applied, nothing changed, discarded or refused by the user, a
//!   first run): the project as it is now. When the previous run was
//!   discarded or refused, the model is told.
//!
//! See the parent module for which step a message stands on, and
//! `ah_record::restore` for how the work copy is made. The `workspace_at` key
//! is removed once the run has started (its prompt is stored), so a run that
//! fails before that leaves the fork point for the next attempt; so does a
//! run whose sandbox cannot start, which is taken back out of the session
//! with its prompt (see `run::lifecycle::SessionRollback`).

use std::path::Path;

use anyhow::{Result, anyhow};

use super::{FilesAt, TimeTravelError, files_at, latest_run};
use ah_record::policy::Policy;
use ah_record::restore::{self, RestoreError, Source};
use ah_record::run::{Run, Start};
use ah_record::rundir::{
    HunkOutcome, HunkRecord, RestoredFrom, ReviewDecision, RunDir, RunDirError,
};
use ah_session::{Session, WORKSPACE_AT_KEY};

use crate::run::Front;

/// Where a run's files came from, as the manifest and the model are told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Origin {
    /// The project's current files.
    Project,
    /// The files of an earlier point of the conversation.
    Restored(RestoredFrom),
    /// The project's current files: the previous run's patch was rejected
    /// (`decision`: `discarded` or `refused`).
    Rejected { run_id: String, decision: String },
    /// The project's current files, with only part of the previous run's
    /// patch applied (each hunk's decision, when it was chosen by hunk).
    Partly {
        run_id: String,
        hunks: Vec<HunkRecord>,
    },
}

impl Origin {
    pub(crate) fn restored(&self) -> Option<&RestoredFrom> {
        match self {
            Origin::Restored(from) => Some(from),
            _ => None,
        }
    }

    /// Told to the model in the first message of a run that continues a
    /// session.
    pub(crate) fn note(&self) -> String {
        match self {
            Origin::Project => NEW_RUN_NOTE.to_string(),
            Origin::Restored(from) if from.because == NOT_APPLIED => format!(
                "[ah: this message starts a new run. The changes of the previous run were not \
                 applied to the project yet; the work directory holds the files as the \
                 conversation left them (after step {} of run {}).]",
                from.step, from.run_id
            ),
            Origin::Restored(from) => format!(
                "[ah: this message starts a new run. The work directory holds the files as they \
                 were at this point of the conversation (after step {} of run {}): changes made \
                 after that point are not in it.]",
                from.step, from.run_id
            ),
            Origin::Rejected { decision, .. } => rejected_note(decision),
            Origin::Partly { run_id, hunks } => partly_note(run_id, hunks),
        }
    }

    /// What a run that sends a cut-off turn again must tell the model: only
    /// that the files are not what the conversation says.
    pub(crate) fn continue_note(&self) -> Option<String> {
        match self {
            Origin::Rejected { decision, .. } => Some(rejected_note(decision)),
            Origin::Partly { run_id, hunks } => Some(partly_note(run_id, hunks)),
            _ => None,
        }
    }
}

/// Told to the model when a session continues in a new run from the
/// project's files.
const NEW_RUN_NOTE: &str = "[ah: this message starts a new run. The work directory is a fresh \
copy of the project as it is now: changes from earlier runs are in it only if the user applied them.]";

/// `RestoredFrom::because` of a run that goes on from the head's files.
const NOT_APPLIED: &str = "not_applied";
/// `RestoredFrom::because` of a run that starts at a fork point.
const FORK: &str = "fork";

fn rejected_note(decision: &str) -> String {
    let what = match decision {
        "refused" => "were refused (they must not be applied)",
        _ => "were discarded by the user",
    };
    format!(
        "[ah: this message starts a new run. The changes of the previous run {what}; the files \
         are as in the project now.]"
    )
}

/// The most hunks a note lists one by one.
const MAX_NOTED_HUNKS: usize = 60;

/// What the model is told after the user applied part of its patch.
pub(crate) fn partly_note(run_id: &str, hunks: &[HunkRecord]) -> String {
    let mut note = format!(
        "[ah: this message starts a new run. The user applied only part of the changes of run \
         {run_id}; the work directory is the project as it is now, with the applied part in it."
    );
    if hunks.is_empty() {
        note.push_str(" The files not applied are not in it.]");
        return note;
    }
    note.push_str(" Each hunk of that run's patch:");
    for hunk in hunks.iter().take(MAX_NOTED_HUNKS) {
        let what = match hunk.decision {
            HunkOutcome::Applied => "applied",
            HunkOutcome::NotApplied => "not applied (the apply failed)",
            HunkOutcome::Rejected => "not applied (rejected)",
            HunkOutcome::Undecided => "not applied (left undecided)",
        };
        note.push_str(&format!("\n- {} {}: {what}", hunk.path, hunk.header));
        if let Some(reason) = &hunk.reason {
            let reason: String = reason.chars().take(500).collect();
            note.push_str(&format!(", because: {reason}"));
        }
    }
    if hunks.len() > MAX_NOTED_HUNKS {
        note.push_str(&format!("\n- and {} more", hunks.len() - MAX_NOTED_HUNKS));
    }
    note.push(']');
    note
}

/// What became of the session's previous run, as its files go.
enum Previous {
    /// No run yet, or its changes are in the project (applied), or it
    /// changed nothing: the project's files.
    InProject,
    /// Discarded or refused by the review.
    Rejected { run_id: String, decision: String },
    /// Part of it applied by the review.
    Partly {
        run_id: String,
        hunks: Vec<HunkRecord>,
    },
    /// Saved, aborted, stopped, failed: its changes exist only in its run.
    NotApplied,
    /// Its run directory is gone (`ah runs prune`): nothing says.
    Pruned(String),
}

/// Prepares the run `dir`'s work copy (without what `policy` withholds)
/// and shadow repo, and says where the files came from. With `no_restore`,
/// the run starts from the project whatever the session says.
#[allow(clippy::too_many_arguments)]
pub(crate) fn prepare_files(
    session: &Session,
    no_restore: bool,
    project: &Path,
    ah_dir: &Path,
    dir: &RunDir,
    policy: &Policy,
    overlay: bool,
    front: &mut dyn Front,
) -> Result<(Start, Origin)> {
    let mut place = Place {
        project,
        ah_dir,
        dir,
        policy,
        overlay,
        front,
    };
    if let Some(message_id) = session.context(WORKSPACE_AT_KEY)? {
        if no_restore {
            place
                .front
                .notice("files: the project's current files (--no-restore)");
            return place.fresh();
        }
        let at = files_at(session, &message_id).map_err(|e| discard(dir, e.into()))?;
        return place.restore_at(at, message_id, FORK);
    }
    let Some(head) = session.head()? else {
        return place.fresh();
    };
    match previous(session, ah_dir)? {
        Previous::InProject => return place.fresh(),
        Previous::Partly { run_id, hunks } => {
            let start = place.project_files()?;
            place.front.notice(&format!(
                "files: the project's current files (part of run {run_id}'s changes were applied)"
            ));
            return Ok((start, Origin::Partly { run_id, hunks }));
        }
        Previous::Rejected { run_id, decision } => {
            let start = place.project_files()?;
            place.front.notice(&format!(
                "files: the project's current files (the changes of run {run_id} were {decision})"
            ));
            return Ok((start, Origin::Rejected { run_id, decision }));
        }
        Previous::Pruned(run_id) => {
            place.front.notice(&format!(
                "files: the project's current files (run {run_id}, the session's previous run, \
                 was pruned)"
            ));
            return place.fresh();
        }
        Previous::NotApplied if no_restore => {
            place.front.notice(
                "files: the project's current files (--no-restore; the previous run's changes \
                 were not applied)",
            );
            return place.fresh();
        }
        Previous::NotApplied => {}
    }
    let at = match files_at(session, &head) {
        Ok(at) => at,
        // Recorded by an older ah, which started every run from the project.
        Err(TimeTravelError::NotRecorded { run_id, .. }) => {
            place.front.notice(&format!(
                "files: the project's current files (run {run_id} did not record its files \
                 after each step)"
            ));
            return place.fresh();
        }
        Err(err) => return Err(discard(dir, err.into())),
    };
    place.restore_at(at, head, NOT_APPLIED)
}

/// What became of the session's latest run.
fn previous(session: &Session, ah_dir: &Path) -> Result<Previous> {
    let Some(run_id) = latest_run(session)? else {
        return Ok(Previous::InProject);
    };
    let run = match RunDir::open(ah_dir, &run_id) {
        Ok(run) => run,
        Err(RunDirError::NotFound { .. }) => return Ok(Previous::Pruned(run_id)),
        Err(err) => return Err(err.into()),
    };
    // No manifest: the run ended before it was written (a crash).
    let Ok(manifest) = run.read_manifest() else {
        return Ok(Previous::NotApplied);
    };
    let decision = manifest.review.as_ref().map(|review| review.decision);
    Ok(match decision {
        Some(ReviewDecision::PartlyApplied) if manifest.applied => Previous::Partly {
            run_id,
            hunks: manifest
                .review
                .map(|review| review.hunks)
                .unwrap_or_default(),
        },
        _ if manifest.applied => Previous::InProject,
        Some(ReviewDecision::Empty) => Previous::InProject,
        Some(decision @ (ReviewDecision::Discarded | ReviewDecision::Refused)) => {
            Previous::Rejected {
                run_id,
                decision: decision.as_str().to_string(),
            }
        }
        _ => Previous::NotApplied,
    })
}

/// The new run's files and what they are made from.
struct Place<'a> {
    project: &'a Path,
    ah_dir: &'a Path,
    dir: &'a RunDir,
    policy: &'a Policy,
    /// The project's current files are the lower layer of an overlay
    /// `/work`, not copied.
    overlay: bool,
    /// Where the user is told where the files came from.
    front: &'a mut dyn Front,
}

impl Place<'_> {
    /// The project's current files.
    fn fresh(&self) -> Result<(Start, Origin)> {
        Ok((self.project_files()?, Origin::Project))
    }

    /// A start from the project's current files: an overlay of the project,
    /// or a copy of it.
    fn project_files(&self) -> Result<Start> {
        Ok(match self.overlay {
            true => Run::prepare_overlay(self.project, self.dir, self.policy)?,
            false => Run::prepare(self.project, self.dir, self.policy)?,
        })
    }

    /// Restores the files of `at` (the message `message_id`, for the reason
    /// `because`), or starts from the project when no tool ran before it.
    fn restore_at(
        &mut self,
        at: FilesAt,
        message_id: String,
        because: &str,
    ) -> Result<(Start, Origin)> {
        let (project, ah_dir, dir, policy) = (self.project, self.ah_dir, self.dir, self.policy);
        let Some(step) = at.step else {
            if because == FORK {
                self.front.notice(&format!(
                    "files: the project's current files (no tool ran before message @{})",
                    at.message_seq
                ));
            }
            return self.fresh();
        };
        let source = Source {
            run_id: &step.run_id,
            commit: &step.head,
        };
        let restored = match self.overlay {
            true => restore::restore_overlay(project, ah_dir, dir, source, policy),
            false => restore::restore(project, ah_dir, dir, source, policy),
        };
        let start = match restored {
            Ok(start) => start,
            Err(err @ RestoreError::Pruned { .. }) => {
                return Err(discard(
                    dir,
                    anyhow!(
                        "cannot restore the files of message @{} (run {} step {}): {err}. To go on, \
                     check out a later point of the conversation whose run is still there \
                     (`ah checkout @N`; `ah runs` lists the runs left), or start from the \
                     project's current files with `ah --no-restore \"...\"`",
                        at.message_seq,
                        step.run_id,
                        step.step
                    ),
                ));
            }
            Err(err) => return Err(discard(dir, err.into())),
        };
        let why = match because {
            FORK => String::new(),
            _ => ": its changes were not applied".to_string(),
        };
        self.front.notice(&format!(
            "files restored from run {} step {} (message @{}){why}",
            step.run_id, step.step, at.message_seq
        ));
        let restored = RestoredFrom {
            run_id: step.run_id,
            step: step.step,
            commit: step.head,
            message_id,
            message_seq: at.message_seq,
            because: because.to_string(),
        };
        Ok((start, Origin::Restored(restored)))
    }
}

/// Until the files are in place the new run has nothing: on a failure it
/// is not left behind as a run.
fn discard(dir: &RunDir, err: anyhow::Error) -> anyhow::Error {
    let _ = std::fs::remove_dir_all(dir.path());
    err
}

/// Marks the fork point as used: the run that started from it is under way.
pub(crate) fn started(session: &Session) -> Result<()> {
    Ok(session.remove_context(WORKSPACE_AT_KEY)?)
}
