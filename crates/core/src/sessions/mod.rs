//! The commands on a project's sessions besides a run: which session they
//! open, what they change under the session's lock (the head, a branch),
//! the usage over every session, and compaction on demand (`compact`,
//! with its configuration, provider and lock). The types re-exported here
//! are what a front-end reads from a session to show it.

mod compact;

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;

use crate::run::resolve::open_existing;
use crate::run::{SessionChoice, UsageError, queue::claim_exclusive};
pub use ah_llm::{Block, Role};
pub use ah_session::{
    BlockRecord, CallKind, MessageMeta, ModelUsage, Session, SessionSummary, StoredMessage, Tree,
    total_usage,
};
use ah_session::{BranchRemoval, WORKSPACE_AT_KEY, list_sessions, session_files};
pub use compact::{Compacted, compact};

/// The session `which` names in `project`, which must exist; else the
/// project's most recent one.
pub fn open(project: &Path, which: &SessionChoice) -> Result<Session> {
    open_existing(&project.join(".ah"), which)
}

/// The project's sessions, newest first.
pub fn list(project: &Path) -> Result<Vec<SessionSummary>> {
    Ok(list_sessions(&project.join(".ah"))?)
}

/// The message @`seq`, or an error naming the session and its last @N.
pub fn message(session: &Session, seq: i64) -> Result<StoredMessage> {
    match session.message_at(seq)? {
        Some(message) => Ok(message),
        None => Err(no_message(session, seq)?),
    }
}

/// The error for a message @`seq` the session does not have.
pub fn no_message(session: &Session, seq: i64) -> Result<anyhow::Error> {
    let last = session.last_seq()?;
    let known = if last == 0 {
        "it has no messages".to_string()
    } else {
        format!("its messages are @1 to @{last}")
    };
    Ok(UsageError::Message(format!(
        "session {} has no message @{seq} ({known}): `ah tree` shows them",
        session.id()
    ))
    .into())
}

/// `ah checkout @N`: the next prompt goes under @N, and the next run's
/// files start from @N's point (`workspace_at`). Returns @N.
pub fn checkout(session: &Session, seq: i64) -> Result<StoredMessage> {
    // Not under a live ah; held until the head is moved.
    let _lock = claim_exclusive(session, false)?;
    let target = message(session, seq)?;
    session.set_head(&target.id)?;
    session.set_context(WORKSPACE_AT_KEY, &target.id)?;
    Ok(target)
}

/// What `ah branch rm @N` removed.
pub struct Removed {
    /// The messages removed, by seq.
    pub seqs: Vec<i64>,
    /// Where the head moved when it was in the branch: @N's parent, or
    /// `None` when no message is left above the branch.
    pub head_moved_to: Option<Option<i64>>,
}

/// `ah branch rm @N`: removes @N and everything under it; a branch that
/// holds the head only with `force` (the head moves to @N's parent).
pub fn remove_branch(session: &mut Session, seq: i64, force: bool) -> Result<Removed> {
    // Not under a live ah; held until the branch is gone.
    let _lock = claim_exclusive(session, false)?;
    let target = message(session, seq)?;
    match session.remove_branch(&target.id, force)? {
        BranchRemoval::HeadInside { head_seq } => Err(UsageError::Message(format!(
            "the head (@{head_seq}) is in the branch from @{seq}: check out another message first \
             (ah checkout @N), or pass --force to move the head to @{seq}'s parent"
        ))
        .into()),
        BranchRemoval::Removed {
            seqs,
            head_moved_to,
        } => Ok(Removed {
            seqs,
            head_moved_to,
        }),
    }
}

/// The tokens of every session of a project, by model and kind of call.
pub struct AllUsage {
    /// How many sessions the project has.
    pub sessions: usize,
    /// One row per model and kind of call, most output first.
    pub rows: Vec<ModelUsage>,
    /// Sessions that could not be read, and why.
    pub skipped: Vec<String>,
}

/// `ah usage --all`: tokens by model over every session of the project.
pub fn usage_all(project: &Path) -> Result<AllUsage> {
    let files = session_files(&project.join(".ah"))?;
    let mut by_model: BTreeMap<(Option<String>, CallKind), ModelUsage> = BTreeMap::new();
    let mut skipped = Vec::new();
    for file in &files {
        let usages = match Session::open(&file.path).and_then(|session| session.usage()) {
            Ok(usages) => usages,
            Err(err) => {
                skipped.push(err.to_string());
                continue;
            }
        };
        for usage in usages {
            let key = (usage.model.clone(), usage.kind);
            let total = by_model.entry(key).or_insert(ModelUsage {
                calls: 0,
                input_tokens: 0,
                output_tokens: 0,
                cache_read_tokens: 0,
                cache_write_tokens: 0,
                ..usage.clone()
            });
            total.calls += usage.calls;
            total.input_tokens += usage.input_tokens;
            total.output_tokens += usage.output_tokens;
            total.cache_read_tokens += usage.cache_read_tokens;
            total.cache_write_tokens += usage.cache_write_tokens;
        }
    }
    let mut rows: Vec<ModelUsage> = by_model.into_values().collect();
    rows.sort_by_key(|u| std::cmp::Reverse(u.output_tokens));
    Ok(AllUsage {
        sessions: files.len(),
        rows,
        skipped,
    })
}
