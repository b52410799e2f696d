//! The project's own git index as the baseline's stat cache.
//!
//! `git status` trusts a file whose stat data matches its index entry; the
//! baseline of an overlay run does the same, so only the project's dirty and
//! untracked files are read and hashed. The shadow repo then reaches the
//! project's objects through `objects/info/alternates` (read only; nothing
//! is ever written to the project's repository).
//!
//! An entry is trusted only when all of these hold, else the file is hashed:
//! its stat data (times, inode, size, mode) matches the file's; it is not
//! racily clean (modified in the same second the index was written, or
//! later); it is a regular file at stage 0; and the object it names is a blob
//! of exactly the file's size in the project's object store. The last check
//! catches what the index holds after a clean filter (line-ending
//! conversion, `ident`, LFS pointers), which is not the bytes on disk: ah
//! records bytes as they are.

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use git2::{Index, ObjectType, Odb, Oid, Repository, RepositoryOpenFlags};
use rustix::fs::Stat;

use super::stage::stat_matches;

/// The project's index, opened read-only.
pub(super) struct Seed {
    index: Index,
    /// When the index file was last written (seconds).
    written: i64,
}

/// A project's git repository, as the baseline may use it.
pub(super) struct ProjectRepo {
    pub(super) seed: Seed,
    /// Its object store (the common one, for a linked worktree).
    pub(super) objects: PathBuf,
}

/// A project's git repository as read for its baseline, or nothing where it
/// has none (or none that can be read; the baseline then hashes every
/// file): reading a large index takes tens of milliseconds, which the
/// baseline's thread spends beside the survey of the project.
pub struct ProjectSeed(Option<ProjectRepo>);

impl ProjectSeed {
    /// Reads the repository whose work tree is `project` itself (never one
    /// found further up).
    pub fn read(project: &Path) -> ProjectSeed {
        ProjectSeed(ProjectRepo::open(project))
    }

    pub(super) fn into_repo(self) -> Option<ProjectRepo> {
        self.0
    }
}

impl ProjectRepo {
    /// The repository whose work tree is `project` itself (never one found
    /// further up), or `None` where there is none or it cannot be read:
    /// the baseline then hashes every file.
    pub(super) fn open(project: &Path) -> Option<ProjectRepo> {
        let repo =
            Repository::open_ext(project, RepositoryOpenFlags::NO_SEARCH, &[] as &[&Path]).ok()?;
        let workdir = repo.workdir()?.canonicalize().ok()?;
        if workdir != project.canonicalize().ok()? {
            return None;
        }
        let index_path = repo.path().join("index");
        let written = std::fs::symlink_metadata(&index_path).ok()?.mtime();
        let index = Index::open(&index_path).ok()?;
        Some(ProjectRepo {
            seed: Seed { index, written },
            objects: repo.commondir().join("objects"),
        })
    }
}

impl Seed {
    /// The object id of the regular file at `path` whose stat data is `stat`,
    /// when the index vouches for it and `odb` holds that blob.
    pub(super) fn lookup(&self, odb: &Odb<'_>, path: &[u8], stat: &Stat) -> Option<Oid> {
        let entry = self
            .index
            .get_path(Path::new(std::ffi::OsStr::from_bytes(path)), 0)?;
        if entry.mode & 0o170000 != 0o100000 || !stat_matches(&entry, stat, false) {
            return None;
        }
        if i64::from(entry.mtime.seconds()) >= self.written
            || i64::from(entry.ctime.seconds()) >= self.written
        {
            return None;
        }
        let (size, kind) = odb.read_header(entry.id).ok()?;
        (kind == ObjectType::Blob && size as i64 == stat.st_size).then_some(entry.id)
    }
}
