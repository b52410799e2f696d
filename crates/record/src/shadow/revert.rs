//! Undoing a step: the work tree, the index and HEAD are put back to an
//! earlier commit, and the result is checked by staging the tree again.
//!
//! Each round stages what the tree holds now, writes what differs from the
//! commit ([`super::checkout`]), and stages again; the undo stands only when
//! the staged tree is the commit's tree with nothing left over that could
//! not be staged. Rules files restored by one round can reveal entries the
//! step's own rules hid, so a few rounds are allowed; a tree that still
//! differs after them, or a walk or write that fails, is
//! [`ShadowError::RevertFailed`] and the caller poisons the run.

use std::time::{Duration, Instant};

use git2::Oid;

use super::stage::SCAN_SECONDS;
use super::{MAX_FILE_BYTES, ShadowError, ShadowRepo};
use crate::safe_text::name_safe;

/// Rounds of write-and-check before an undo is given up.
const ROUNDS: usize = 3;

/// The outcome of [`ShadowRepo::revert_to`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reverted {
    /// The commit HEAD and the work tree now match.
    pub head: Oid,
    /// The commit HEAD pointed at before, when it was a different one. It is
    /// no longer on the branch but stays in the object store until pruned.
    pub dropped: Option<Oid>,
}

impl ShadowRepo {
    /// Makes the work tree, the index and HEAD match `commit`: recorded
    /// files are restored, and files not in `commit` are removed, whether
    /// the later commits added them or they were never staged (over the
    /// size cap, or refused). Ignored files and nested repositories are left
    /// alone, as they were never recorded, unless they stand where a
    /// recorded path must be. On failure HEAD is left as it was.
    pub fn revert_to(&self, commit: Oid) -> Result<Reverted, ShadowError> {
        let previous = self.head()?;
        let fail = |why: String| ShadowError::RevertFailed {
            git_dir: self.git_dir.clone(),
            commit,
            why,
        };
        let target = self
            .repo
            .find_commit(commit)
            .and_then(|c| c.tree())
            .map_err(self.err("finding the commit to revert to"))?;
        let deadline = Instant::now() + Duration::from_secs(SCAN_SECONDS);
        let mut left = String::new();
        for _ in 0..ROUNDS {
            let staged = self
                .stage_all(MAX_FILE_BYTES)
                .map_err(|e| fail(e.to_string()))?;
            let mut extra: Vec<Vec<u8>> = staged
                .too_large
                .iter()
                .map(|p| p.as_bytes().to_vec())
                .collect();
            extra.extend(staged.refused.iter().map(|r| r.path.clone()));
            if staged.tree.id() == target.id() && extra.is_empty() {
                self.set_branch(commit, "ah: revert a step")?;
                return Ok(Reverted {
                    head: commit,
                    dropped: (previous != commit).then_some(previous),
                });
            }
            left = match extra.first() {
                Some(path) => format!(
                    "{} is still there",
                    name_safe(&String::from_utf8_lossy(path))
                ),
                None => "the tree still differs from it".to_string(),
            };
            self.write_tree(&target, &extra, deadline)
                .map_err(|e| fail(e.to_string()))?;
        }
        Err(fail(format!("after {ROUNDS} rounds {left}")))
    }
}
