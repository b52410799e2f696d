//! Reading symlinks from a commit, so the write policy checks the link
//! targets that were recorded, not what the work tree holds by the time of
//! the check (a process still running could flip a link in between).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use git2::{FileMode, Oid, Repository, Tree};

use super::{ShadowError, ShadowRepo};

/// What a symlink holds in a commit, looked up by [`CommittedLinks::target`].
pub struct CommittedLinks<'r> {
    repo: &'r Repository,
    tree: Tree<'r>,
}

impl CommittedLinks<'_> {
    /// The target of the link at `path` (relative to the work root) as the
    /// commit recorded it: `Ok(None)` when the commit has no link there (a
    /// file, a folder, or nothing), `Err` when the link's blob is unreadable.
    pub fn target(&self, path: &Path) -> Result<Option<PathBuf>, String> {
        let Ok(entry) = self.tree.get_path(path) else {
            return Ok(None);
        };
        if entry.filemode() != i32::from(FileMode::Link) {
            return Ok(None);
        }
        let blob = self
            .repo
            .find_blob(entry.id())
            .map_err(|e| format!("the link's blob {} cannot be read: {e}", entry.id()))?;
        let bytes = blob.content();
        Ok(Some(PathBuf::from(OsStr::from_bytes(bytes))))
    }
}

impl ShadowRepo {
    /// The symlinks of `commit`, to check where they point without reading
    /// the work tree (which a process still running could change).
    pub fn committed_links(&self, commit: Oid) -> Result<CommittedLinks<'_>, ShadowError> {
        Ok(CommittedLinks {
            repo: &self.repo,
            tree: self.commit_tree(commit)?,
        })
    }
}
