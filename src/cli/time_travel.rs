//! Where a run's files come from: the project as it is now, or, when the
//! conversation was forked or checked out at an earlier message (session
//! context `workspace_at`), the files as they were at that message (see
//! `agent::time_travel` for which step that is, and `sandbox::restore` for
//! how the work copy is made). The key is removed once the run has started
//! (its prompt is stored), so a run that fails before that, e.g. because the
//! sandbox cannot start, leaves the fork point for the next attempt.

use std::path::Path;

use anyhow::{Result, anyhow};

use crate::agent::time_travel::files_at;
use crate::sandbox::policy::Policy;
use crate::sandbox::restore::{self, RestoreError, Source};
use crate::sandbox::run::{Run, Start};
use crate::sandbox::rundir::{RestoredFrom, RunDir};
use crate::session::{Session, WORKSPACE_AT_KEY};

/// Prepares the run `dir`'s work copy (without what `policy` withholds)
/// and shadow repo. Returns where the files were restored from, when they
/// were. With `no_restore`, a fork point's files are not restored: the run
/// starts from the project.
pub(super) fn prepare_files(
    session: &Session,
    no_restore: bool,
    project: &Path,
    ah_dir: &Path,
    dir: &RunDir,
    policy: &Policy,
) -> Result<(Start, Option<RestoredFrom>)> {
    let Some(message_id) = session.context(WORKSPACE_AT_KEY)? else {
        return Ok((Run::prepare(project, dir, policy)?, None));
    };
    if no_restore {
        let start = Run::prepare(project, dir, policy)?;
        eprintln!("files: the project's current files (--no-restore)");
        return Ok((start, None));
    }
    // Until the files are in place the new run has nothing: on a failure it
    // is not left behind as a run.
    let discard = |err: anyhow::Error| {
        let _ = std::fs::remove_dir_all(dir.path());
        err
    };
    let at = files_at(session, &message_id).map_err(|e| discard(e.into()))?;
    let Some(step) = at.step else {
        let start = Run::prepare(project, dir, policy)?;
        eprintln!(
            "files: the project's current files (no tool ran before message @{})",
            at.message_seq
        );
        return Ok((start, None));
    };
    let source = Source {
        run_id: &step.run_id,
        commit: &step.head,
    };
    let start = match restore::restore(project, ah_dir, dir, source, policy) {
        Ok(start) => start,
        Err(err @ RestoreError::Pruned { .. }) => {
            return Err(discard(anyhow!(
                "cannot restore the files of message @{} (run {} step {}): {err}. To go on, \
                     check out a later point of the conversation whose run is still there \
                     (`ah checkout @N`; `ah runs` lists the runs left), or start from the \
                     project's current files with `ah --no-restore \"...\"`",
                at.message_seq,
                step.run_id,
                step.step
            )));
        }
        Err(err) => return Err(discard(err.into())),
    };
    eprintln!(
        "files restored from run {} step {} (message @{})",
        step.run_id, step.step, at.message_seq
    );
    let restored = RestoredFrom {
        run_id: step.run_id,
        step: step.step,
        commit: step.head,
        message_id,
        message_seq: at.message_seq,
    };
    Ok((start, Some(restored)))
}

/// Marks the fork point as used: the run that started from it is under way.
pub(super) fn started(session: &Session) -> Result<()> {
    Ok(session.remove_context(WORKSPACE_AT_KEY)?)
}

/// Told to the model when a session continues in a run whose files were
/// restored from an earlier point of the conversation.
pub(super) fn restored_note(from: &RestoredFrom) -> String {
    format!(
        "[ah: this message starts a new run. The work directory holds the files as they were at \
         this point of the conversation (after step {} of run {}): changes made after that point \
         are not in it.]",
        from.step, from.run_id
    )
}
