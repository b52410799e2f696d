//! Starting a new shadow repo from an earlier run's step (time travel): the
//! earlier repo's objects are taken over, so the new run needs nothing of
//! the old run directory afterwards, and the step's commit is checked out
//! into the new, empty work tree, or, for an overlay run, adopted as the
//! head and written as a layer over the project by [`crate::overlay`].
//!
//! Objects are never changed once written, so they are hard-linked where
//! the file system allows (both repos live under `.ah/runs/`), and copied
//! otherwise. Only finished object files are taken: loose objects
//! (`xx/<38 hex>`) and packs with their indexes (`pack/pack-*`), never the
//! temporary files of a write in progress.

use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use std::time::{Duration, Instant};

use git2::Oid;

use super::stage::SCAN_SECONDS;
use super::{BRANCH_REF, ShadowError, ShadowRepo};
use ah_tools::fs_beneath::dir::DirHandle;

impl ShadowRepo {
    /// Takes over every object of the shadow repo whose git directory is
    /// `source`. Returns how many object files were taken.
    pub fn take_objects(&self, source: &Path) -> Result<u64, ShadowError> {
        let from = source.join("objects");
        let to = self.git_dir.join("objects");
        let mut taken = 0;
        // An overlay run's baseline lives in the project's object store.
        let alternates = from.join("info").join("alternates");
        if let Ok(text) = fs::read_to_string(&alternates) {
            for line in text
                .lines()
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
            {
                self.add_alternate(Path::new(line))?;
            }
        }
        for entry in read_dir(&from)? {
            let entry = entry.map_err(io_error(&from))?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let dir = entry.path();
            let keep: fn(&str) -> bool = if name == "pack" {
                |file| file.starts_with("pack-")
            } else if name.len() == 2 && name.chars().all(|c| c.is_ascii_hexdigit()) {
                |file| file.len() == 38 && file.chars().all(|c| c.is_ascii_hexdigit())
            } else {
                continue;
            };
            let target = to.join(&*name);
            fs::create_dir_all(&target).map_err(io_error(&target))?;
            for file in read_dir(&dir)? {
                let file = file.map_err(io_error(&dir))?;
                if !keep(&file.file_name().to_string_lossy()) {
                    continue;
                }
                let dst = target.join(file.file_name());
                if !dst.exists() {
                    link_or_copy(&file.path(), &dst)?;
                    taken += 1;
                }
            }
        }
        Ok(taken)
    }

    /// Writes `commit` into the work tree (which must hold nothing the
    /// commit has), records it in the index (with the stat data the next
    /// step's scan relies on), checks that the tree now is the commit's, and
    /// puts the branch on it. Returns the baseline the commit grew from: the
    /// first commit of its history.
    pub fn start_at(&self, commit: Oid) -> Result<Oid, ShadowError> {
        let target = self
            .repo
            .find_commit(commit)
            .map_err(self.err("finding the commit to start from"))?;
        let mut baseline = target.clone();
        while baseline.parent_count() > 0 {
            baseline = baseline
                .parent(0)
                .map_err(self.err("walking back to the baseline"))?;
        }
        let tree = target
            .tree()
            .map_err(self.err("reading the commit to start from"))?;
        let deadline = Instant::now() + Duration::from_secs(SCAN_SECONDS);
        // The index is empty, so every file of the commit is written.
        self.write_tree(&tree, &[], deadline)?;
        let staged = self.stage_all(u64::MAX)?;
        if staged.tree.id() != tree.id() || !staged.refused.is_empty() {
            return Err(ShadowError::RestoreMismatch {
                git_dir: self.git_dir.clone(),
                commit,
            });
        }
        self.repo
            .reference(BRANCH_REF, commit, true, "ah: start from an earlier run")
            .map_err(self.err("moving the branch"))?;
        Ok(baseline.id())
    }

    /// Takes `commit` (of the objects taken over) as the branch's head
    /// without writing it anywhere: an overlay run's restored files are
    /// written into its upper folder instead ([`ShadowRepo::layer_between`]).
    /// Returns the baseline the commit grew from, as [`ShadowRepo::start_at`]
    /// does.
    pub fn adopt(&self, commit: Oid) -> Result<Oid, ShadowError> {
        let mut baseline = self
            .repo
            .find_commit(commit)
            .map_err(self.err("finding the commit to start from"))?;
        while baseline.parent_count() > 0 {
            baseline = baseline
                .parent(0)
                .map_err(self.err("walking back to the baseline"))?;
        }
        self.set_branch(commit, "ah: start from an earlier run")?;
        Ok(baseline.id())
    }

    /// What a tree holding `from` needs for it to hold `to`: each path where
    /// they differ (bytes, sorted), with `to`'s entry (tree mode, blob id),
    /// or `None` where `to` has nothing. A folder replaced by a file is its
    /// files gone and the file there, and the other way round.
    pub fn layer_between(&self, from: Oid, to: Oid) -> Result<Vec<LayerEntry>, ShadowError> {
        let (from, to) = (self.commit_tree(from)?, self.commit_tree(to)?);
        let changed = super::treediff::changed(&self.repo, &from, &to)
            .map_err(self.err("comparing trees"))?;
        let mut layer = Vec::with_capacity(changed.len());
        for (path, change) in changed {
            let entry = match change.kind {
                crate::ChangeKind::Deleted => None,
                _ => {
                    let entry = to
                        .get_path(Path::new(std::ffi::OsStr::from_bytes(&path)))
                        .map_err(self.err("reading a restored entry"))?;
                    Some((entry.filemode(), entry.id()))
                }
            };
            layer.push(LayerEntry { path, entry });
        }
        Ok(layer)
    }

    /// The work tree's root folder, to read its ignore rules with
    /// [`crate::tree::ignore::IgnoreCheck`].
    pub fn open_work_tree(&self) -> Result<DirHandle, ShadowError> {
        self.open_work()
    }
}

/// One path of [`ShadowRepo::layer_between`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerEntry {
    pub path: Vec<u8>,
    /// The tree mode and blob id to write there; `None`: nothing there.
    pub entry: Option<(i32, Oid)>,
}

fn read_dir(dir: &Path) -> Result<fs::ReadDir, ShadowError> {
    fs::read_dir(dir).map_err(io_error(dir))
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> ShadowError {
    let path = path.to_path_buf();
    move |source| ShadowError::Io { path, source }
}

/// Hard-links `from` at `to`, or copies it where linking is not possible
/// (another file system, a file system without links).
fn link_or_copy(from: &Path, to: &Path) -> Result<(), ShadowError> {
    if fs::hard_link(from, to).is_ok() {
        return Ok(());
    }
    fs::copy(from, to).map(drop).map_err(io_error(to))
}
