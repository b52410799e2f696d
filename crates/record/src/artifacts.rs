//! Copies the files a run added into `<run>/artifacts/`, at the same relative
//! paths, so generated outputs outlive the work copy even when the patch is
//! not applied.
//!
//! The content comes from the run's last accepted commit in the shadow repo,
//! never from the work dir: what is copied is what the policy checked, not
//! what a process still running wrote afterwards. Symlinks are skipped, never
//! copied: a link kept in the artifacts folder would point wherever the model
//! chose once a user opens it on the host. Modes are 0o755 or 0o644, as git
//! records them, so no setuid, setgid or sticky bit reaches the host. Files
//! over the size cap are skipped, and so is every file once the run's disk
//! budget has no room left for it: each is counted by the bytes it will take
//! (whole blocks, each name on its own, a folder made for it too), which a
//! sparse file or a file under many names does not take in the work copy.
//! Every skip is reported.

#[cfg(test)]
mod tests;

use std::collections::HashSet;
use std::fmt;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use git2::{FileMode, Oid, Tree};
use serde::{Deserialize, Serialize};

use super::shadow::{ShadowError, ShadowRepo};
use super::{Change, ChangeKind};
use ah_sandbox::disk::Room;

/// The size cap used unless the caller picks another: 10 MiB.
pub const DEFAULT_MAX_BYTES: u64 = 10 * 1024 * 1024;

/// What `copy_added` did.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub struct ArtifactReport {
    pub copied: Vec<Copied>,
    pub skipped: Vec<Skipped>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Copied {
    /// Relative to the work root and to the artifacts folder alike.
    pub path: String,
    pub bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    pub path: String,
    #[serde(flatten)]
    pub reason: SkipReason,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SkipReason {
    TooLarge {
        bytes: u64,
        limit: u64,
    },
    /// It would take more than the disk budget had left.
    OverBudget {
        bytes: u64,
        left: u64,
    },
    Symlink,
    /// A folder or a nested repository.
    NotAFile,
    /// Not in the commit copied from.
    Missing,
    /// Absolute, or climbing out with `..`.
    NotInWork,
    Unreadable {
        error: String,
    },
}

impl fmt::Display for Skipped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = &self.path;
        match &self.reason {
            SkipReason::TooLarge { bytes, limit } => {
                write!(f, "{path}: {bytes} bytes, over the {limit}-byte cap")
            }
            SkipReason::OverBudget { bytes, left } => write!(
                f,
                "{path}: {bytes} bytes, more than the {left} bytes left of the run's disk budget"
            ),
            SkipReason::Symlink => write!(f, "{path}: a symlink (not copied)"),
            SkipReason::NotAFile => write!(f, "{path}: not a regular file"),
            SkipReason::Missing => write!(f, "{path}: not in the run's last commit"),
            SkipReason::NotInWork => write!(f, "{path}: not a path inside the work dir"),
            SkipReason::Unreadable { error } => write!(f, "{path}: cannot be read: {error}"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    #[error(
        "cannot write artifact {}: {source}; check free space and permissions of the run folder",
        .path.display()
    )]
    Write { path: PathBuf, source: io::Error },
    #[error("cannot read the run's last commit to copy artifacts from: {0}")]
    Commit(#[from] ShadowError),
}

/// Copies every `Added` change (others are ignored) as `commit` in `shadow`
/// holds it to `artifacts_dir/<path>`, skipping files over `max_bytes` and
/// those `room` has no more room for (each takes its blocks from it, and
/// those of the folders made for it). The artifacts folder is created only
/// when something is copied. Fails only when the commit cannot be read or
/// writing on the host side fails; problems with one file are skips.
pub fn copy_added(
    shadow: &ShadowRepo,
    commit: Oid,
    artifacts_dir: &Path,
    changes: &[Change],
    max_bytes: u64,
    room: &mut Room,
) -> Result<ArtifactReport, ArtifactError> {
    let tree = shadow.commit_tree(commit)?;
    let mut report = ArtifactReport::default();
    let mut space = Space {
        room,
        folders: HashSet::new(),
    };
    for change in changes.iter().filter(|c| c.kind == ChangeKind::Added) {
        let path = change.path.clone();
        let found = blob_of(shadow, &tree, &path, max_bytes).and_then(|(blob, bytes, mode)| {
            space.take(artifacts_dir, &path, bytes)?;
            let blob = shadow.git().find_blob(blob).map_err(unreadable)?;
            Ok((blob.content().to_vec(), mode))
        });
        match found {
            Ok((content, mode)) => {
                write_artifact(&artifacts_dir.join(&path), &content, mode)?;
                let bytes = content.len() as u64;
                report.copied.push(Copied { path, bytes });
            }
            Err(reason) => report.skipped.push(Skipped { path, reason }),
        }
    }
    Ok(report)
}

/// The room the artifacts take from, and the folders already made.
struct Space<'a> {
    room: &'a mut Room,
    folders: HashSet<PathBuf>,
}

impl Space<'_> {
    /// Takes the room `rel` (of `bytes`) needs in `artifacts_dir`, the
    /// folders it needs made included, or says it has none.
    fn take(&mut self, artifacts_dir: &Path, rel: &str, bytes: u64) -> Result<(), SkipReason> {
        let new_folders: Vec<PathBuf> = Path::new(rel)
            .ancestors()
            .skip(1)
            .map(|folder| artifacts_dir.join(folder))
            .filter(|folder| !self.folders.contains(folder))
            .collect();
        let folder = self.room.cost(0);
        let cost = new_folders
            .iter()
            .fold(self.room.cost(bytes), |sum, _| sum.saturating_add(folder));
        let left = self.room.left();
        if !self.room.take(cost) {
            return Err(SkipReason::OverBudget { bytes, left });
        }
        self.folders.extend(new_folders);
        Ok(())
    }
}

/// Why a blob could not be read.
fn unreadable(e: git2::Error) -> SkipReason {
    SkipReason::Unreadable {
        error: e.message().to_string(),
    }
}

/// The blob of the regular file at `rel` in `tree`, its size and the mode
/// to give its copy, read from the object's header only.
fn blob_of(
    shadow: &ShadowRepo,
    tree: &Tree<'_>,
    rel: &str,
    max_bytes: u64,
) -> Result<(Oid, u64, u32), SkipReason> {
    let clean = !rel.is_empty()
        && Path::new(rel)
            .components()
            .all(|c| matches!(c, Component::Normal(_)));
    if !clean {
        return Err(SkipReason::NotInWork);
    }
    let entry = tree
        .get_path(Path::new(rel))
        .map_err(|_| SkipReason::Missing)?;
    let filemode = entry.filemode();
    let mode = if filemode == i32::from(FileMode::BlobExecutable) {
        0o755
    } else if filemode == i32::from(FileMode::Blob) {
        0o644
    } else if filemode == i32::from(FileMode::Link) {
        return Err(SkipReason::Symlink);
    } else {
        return Err(SkipReason::NotAFile);
    };
    // The size from the object header: a blob over the cap is never loaded.
    let (bytes, _) = shadow
        .git()
        .odb()
        .and_then(|odb| odb.read_header(entry.id()))
        .map_err(unreadable)?;
    let bytes = bytes as u64;
    if bytes > max_bytes {
        return Err(SkipReason::TooLarge {
            bytes,
            limit: max_bytes,
        });
    }
    Ok((entry.id(), bytes, mode))
}

/// Writes one artifact with exactly `mode`, never through a link.
fn write_artifact(dest: &Path, content: &[u8], mode: u32) -> Result<(), ArtifactError> {
    let write_err = |source| ArtifactError::Write {
        path: dest.to_path_buf(),
        source,
    };
    if let Some(parent) = dest.parent() {
        fs::create_dir_all(parent).map_err(write_err)?;
    }
    let mut out = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW)
        .open(dest)
        .map_err(write_err)?;
    out.write_all(content).map_err(write_err)?;
    // The umask may have cleared bits at creation, and an existing file
    // keeps its old mode: set it outright.
    out.set_permissions(fs::Permissions::from_mode(mode))
        .map_err(write_err)
}
