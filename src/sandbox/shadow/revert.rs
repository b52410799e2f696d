//! Undoing a step: the work tree, the index and HEAD are put back to an
//! earlier commit. A step that took away write access along the way (so a
//! file it added cannot be removed) does not block it: the folders involved
//! are made writable again and the checkout is tried once more.

use std::collections::BTreeSet;

use git2::build::CheckoutBuilder;
use git2::{Commit, DiffOptions, Oid};

use super::{ShadowError, ShadowRepo, unlock};

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
    /// Makes the work tree, the index and HEAD match `commit`: tracked files
    /// are restored, and files not in `commit` are removed, whether the later
    /// commits added them or they were never staged. Ignored files and nested
    /// repositories are left alone, as they were never recorded.
    ///
    /// When the checkout fails (a step made a folder read-only, so a file in
    /// it cannot be removed), the folders and files it touches are made
    /// writable by their owner and the checkout is tried once more; a second
    /// failure is [`ShadowError::RevertFailed`], and HEAD is left as it was.
    pub fn revert_to(&self, commit: Oid) -> Result<Reverted, ShadowError> {
        let previous = self.head()?;
        let target = self
            .repo
            .find_commit(commit)
            .map_err(self.err("finding the commit to revert to"))?;
        if let Err(first) = self.checkout(&target) {
            unlock::make_writable(&self.work_dir, &self.paths_to_restore(&target, previous));
            self.checkout(&target)
                .map_err(|retry| ShadowError::RevertFailed {
                    git_dir: self.git_dir.clone(),
                    commit,
                    first,
                    retry,
                })?;
        }
        self.set_branch(commit, "ah: revert a step")?;
        Ok(Reverted {
            head: commit,
            dropped: (previous != commit).then_some(previous),
        })
    }

    fn checkout(&self, target: &Commit<'_>) -> Result<(), git2::Error> {
        // A hard reset would ignore `remove_untracked`: check out first,
        // then move the branch.
        let mut checkout = CheckoutBuilder::new();
        checkout.force().remove_untracked(true);
        self.repo
            .checkout_tree(target.as_object(), Some(&mut checkout))
    }

    /// Every path a checkout of `target` may have to write or remove: what
    /// differs between `target` and `previous`, and what the work tree holds
    /// that `target` does not (when the work tree can be scanned at all).
    fn paths_to_restore(&self, target: &Commit<'_>, previous: Oid) -> Vec<Vec<u8>> {
        let mut paths = BTreeSet::new();
        let mut opts = DiffOptions::new();
        opts.include_typechange(true)
            .include_untracked(true)
            .recurse_untracked_dirs(true);
        let target_tree = target.tree().ok();
        let previous_tree = self.commit_tree(previous).ok();
        let diffs = [
            self.repo
                .diff_tree_to_tree(target_tree.as_ref(), previous_tree.as_ref(), None)
                .ok(),
            self.repo
                .diff_tree_to_workdir(target_tree.as_ref(), Some(&mut opts))
                .ok(),
        ];
        for diff in diffs.iter().flatten() {
            for delta in diff.deltas() {
                for file in [delta.old_file(), delta.new_file()] {
                    if let Some(path) = file.path_bytes() {
                        paths.insert(path.to_vec());
                    }
                }
            }
        }
        paths.into_iter().collect()
    }
}
