//! Copies the files a run added out of the work dir into `<run>/artifacts/`,
//! at the same relative paths, so generated outputs outlive the work copy even
//! when the patch is not applied.
//!
//! Symlinks are skipped, never copied: a link kept in the artifacts folder would
//! point wherever the model chose once a user opens it on the host. Nothing is
//! read through a link either: a path below a linked folder is skipped, and the
//! file itself is opened with `O_NOFOLLOW`, so the copy stays inside the work
//! dir. Files over the size cap are skipped; every skip is reported.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

use serde::Serialize;

use super::{Change, ChangeKind};

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

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    pub path: String,
    #[serde(flatten)]
    pub reason: SkipReason,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SkipReason {
    TooLarge {
        bytes: u64,
        limit: u64,
    },
    Symlink,
    /// A folder on the way to the file is a symlink.
    LinkedFolder,
    /// A folder, device, pipe or socket.
    NotAFile,
    /// Gone from the work dir.
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
            SkipReason::Symlink => write!(f, "{path}: a symlink (not copied)"),
            SkipReason::LinkedFolder => write!(f, "{path}: below a symlinked folder"),
            SkipReason::NotAFile => write!(f, "{path}: not a regular file"),
            SkipReason::Missing => write!(f, "{path}: no longer in the work dir"),
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
}

/// Copies every `Added` change (others are ignored) from `work_dir` to
/// `artifacts_dir/<path>`, skipping files over `max_bytes`. The artifacts
/// folder is created only when something is copied. Fails only when writing
/// on the host side fails; problems with a source file are skips.
pub fn copy_added(
    work_dir: &Path,
    artifacts_dir: &Path,
    changes: &[Change],
    max_bytes: u64,
) -> Result<ArtifactReport, ArtifactError> {
    let mut report = ArtifactReport::default();
    for change in changes.iter().filter(|c| c.kind == ChangeKind::Added) {
        let path = change.path.clone();
        match open_source(work_dir, &path, max_bytes) {
            Ok(file) => match write_artifact(file, &artifacts_dir.join(&path), max_bytes)? {
                Ok(bytes) => report.copied.push(Copied { path, bytes }),
                Err(reason) => report.skipped.push(Skipped { path, reason }),
            },
            Err(reason) => report.skipped.push(Skipped { path, reason }),
        }
    }
    Ok(report)
}

/// Opens a regular file below `work_dir` without following any link.
fn open_source(work_dir: &Path, rel: &str, max_bytes: u64) -> Result<File, SkipReason> {
    let rel_path = Path::new(rel);
    let clean = !rel.is_empty()
        && rel_path
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if !clean {
        return Err(SkipReason::NotInWork);
    }
    let mut folder = work_dir.to_path_buf();
    if let Some(parent) = rel_path.parent() {
        for part in parent.components() {
            folder.push(part);
            match fs::symlink_metadata(&folder) {
                Ok(meta) if meta.file_type().is_symlink() => return Err(SkipReason::LinkedFolder),
                Ok(meta) if meta.is_dir() => {}
                Ok(_) => return Err(SkipReason::NotAFile),
                Err(err) => return Err(source_error(err)),
            }
        }
    }
    let full = work_dir.join(rel_path);
    let meta = fs::symlink_metadata(&full).map_err(source_error)?;
    if meta.file_type().is_symlink() {
        return Err(SkipReason::Symlink);
    }
    if !meta.is_file() {
        return Err(SkipReason::NotAFile);
    }
    // O_NOFOLLOW: a link swapped in after the check is refused, not followed.
    // O_NONBLOCK: a pipe swapped in cannot hang the open.
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&full)
        .map_err(|err| match err.raw_os_error() {
            Some(libc::ELOOP) => SkipReason::Symlink,
            _ => source_error(err),
        })?;
    let meta = file.metadata().map_err(source_error)?;
    if !meta.is_file() {
        return Err(SkipReason::NotAFile);
    }
    if meta.len() > max_bytes {
        return Err(SkipReason::TooLarge {
            bytes: meta.len(),
            limit: max_bytes,
        });
    }
    Ok(file)
}

fn source_error(err: io::Error) -> SkipReason {
    match err.kind() {
        io::ErrorKind::NotFound => SkipReason::Missing,
        _ => SkipReason::Unreadable {
            error: err.to_string(),
        },
    }
}

/// Copies at most `max_bytes` (a file growing while copied is caught too) and
/// keeps the file's permission bits. The outer error is a host-side failure.
fn write_artifact(
    file: File,
    dest: &Path,
    max_bytes: u64,
) -> Result<Result<u64, SkipReason>, ArtifactError> {
    let write_err = |source| ArtifactError::Write {
        path: dest.to_path_buf(),
        source,
    };
    let permissions = file.metadata().map(|meta| meta.permissions());
    if let Some(parent) = dest.parent() {
        fs::create_dir_all(parent).map_err(write_err)?;
    }
    let mut out = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(dest)
        .map_err(write_err)?;
    let mut limited = file.take(max_bytes.saturating_add(1));
    let mut buf = vec![0u8; 64 * 1024];
    let mut copied: u64 = 0;
    let skip = loop {
        let n = match limited.read(&mut buf) {
            Ok(0) => break None,
            Ok(n) => n,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => {
                break Some(SkipReason::Unreadable {
                    error: err.to_string(),
                });
            }
        };
        copied += n as u64;
        if copied > max_bytes {
            break Some(SkipReason::TooLarge {
                bytes: copied,
                limit: max_bytes,
            });
        }
        out.write_all(&buf[..n]).map_err(write_err)?;
    };
    if let Some(reason) = skip {
        drop(out);
        fs::remove_file(dest).map_err(write_err)?;
        return Ok(Err(reason));
    }
    if let Ok(permissions) = permissions {
        out.set_permissions(permissions).map_err(write_err)?;
    }
    Ok(Ok(copied))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{PermissionsExt, symlink};

    use super::*;

    fn added(path: &str) -> Change {
        Change {
            path: path.to_string(),
            kind: ChangeKind::Added,
            symlink: false,
        }
    }

    fn skipped(report: &ArtifactReport) -> Vec<(&str, &SkipReason)> {
        report
            .skipped
            .iter()
            .map(|s| (s.path.as_str(), &s.reason))
            .collect()
    }

    #[test]
    fn copies_added_files_at_their_relative_paths() {
        let work = tempfile::tempdir().unwrap();
        let run = tempfile::tempdir().unwrap();
        let artifacts = run.path().join("artifacts");
        fs::create_dir_all(work.path().join("out/deep/er")).unwrap();
        fs::write(work.path().join("report.txt"), "hello").unwrap();
        fs::write(work.path().join("out/deep/er/data.bin"), [0u8, 1, 2]).unwrap();
        fs::write(work.path().join("run.sh"), "#!/bin/sh\n").unwrap();
        fs::set_permissions(
            work.path().join("run.sh"),
            fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        let changes = [
            added("report.txt"),
            added("out/deep/er/data.bin"),
            added("run.sh"),
            Change {
                kind: ChangeKind::Modified,
                ..added("modified.txt")
            },
            Change {
                kind: ChangeKind::Deleted,
                ..added("deleted.txt")
            },
        ];
        let report = copy_added(work.path(), &artifacts, &changes, DEFAULT_MAX_BYTES).unwrap();
        assert_eq!(
            report.copied,
            vec![
                Copied {
                    path: "report.txt".into(),
                    bytes: 5
                },
                Copied {
                    path: "out/deep/er/data.bin".into(),
                    bytes: 3
                },
                Copied {
                    path: "run.sh".into(),
                    bytes: 10
                },
            ]
        );
        assert!(report.skipped.is_empty(), "{report:?}");
        assert_eq!(fs::read(artifacts.join("report.txt")).unwrap(), b"hello");
        assert_eq!(
            fs::read(artifacts.join("out/deep/er/data.bin")).unwrap(),
            [0, 1, 2]
        );
        let mode = fs::metadata(artifacts.join("run.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o755);
    }

    #[test]
    fn files_over_the_cap_are_skipped_and_reported() {
        let work = tempfile::tempdir().unwrap();
        let run = tempfile::tempdir().unwrap();
        let artifacts = run.path().join("artifacts");
        fs::write(work.path().join("fits.txt"), vec![b'x'; 100]).unwrap();
        fs::write(work.path().join("big.txt"), vec![b'x'; 101]).unwrap();
        let changes = [added("fits.txt"), added("big.txt")];
        let report = copy_added(work.path(), &artifacts, &changes, 100).unwrap();
        assert_eq!(
            report.copied,
            vec![Copied {
                path: "fits.txt".into(),
                bytes: 100
            }]
        );
        assert_eq!(
            skipped(&report),
            vec![(
                "big.txt",
                &SkipReason::TooLarge {
                    bytes: 101,
                    limit: 100
                }
            )]
        );
        assert!(!artifacts.join("big.txt").exists());
        assert_eq!(
            report.skipped[0].to_string(),
            "big.txt: 101 bytes, over the 100-byte cap"
        );
    }

    #[test]
    fn symlinks_are_skipped_and_never_followed() {
        let work = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let run = tempfile::tempdir().unwrap();
        let artifacts = run.path().join("artifacts");
        fs::write(outside.path().join("secret"), "host secret").unwrap();
        fs::write(work.path().join("inside.txt"), "x").unwrap();
        symlink("/etc/passwd", work.path().join("passwd")).unwrap();
        symlink("inside.txt", work.path().join("alias")).unwrap();
        symlink(outside.path(), work.path().join("linked")).unwrap();
        let changes = [
            added("passwd"),
            added("alias"),
            added("linked/secret"),
            added("../escape"),
            added("gone.txt"),
        ];
        let report = copy_added(work.path(), &artifacts, &changes, DEFAULT_MAX_BYTES).unwrap();
        assert!(report.copied.is_empty(), "{report:?}");
        assert_eq!(
            skipped(&report),
            vec![
                ("passwd", &SkipReason::Symlink),
                ("alias", &SkipReason::Symlink),
                ("linked/secret", &SkipReason::LinkedFolder),
                ("../escape", &SkipReason::NotInWork),
                ("gone.txt", &SkipReason::Missing),
            ]
        );
        assert!(!artifacts.exists(), "nothing copied, no folder made");
    }

    #[test]
    fn folders_and_pipes_are_not_files() {
        let work = tempfile::tempdir().unwrap();
        let run = tempfile::tempdir().unwrap();
        let artifacts = run.path().join("artifacts");
        fs::create_dir(work.path().join("dir")).unwrap();
        let fifo = work.path().join("pipe");
        let c_path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: c_path is a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        let report =
            copy_added(work.path(), &artifacts, &[added("dir"), added("pipe")], 10).unwrap();
        assert_eq!(
            skipped(&report),
            vec![
                ("dir", &SkipReason::NotAFile),
                ("pipe", &SkipReason::NotAFile)
            ]
        );
    }

    #[test]
    fn a_host_side_write_failure_is_an_error() {
        let work = tempfile::tempdir().unwrap();
        let run = tempfile::tempdir().unwrap();
        fs::write(work.path().join("a.txt"), "x").unwrap();
        // The artifacts "folder" is a file: nothing can be created below it.
        let artifacts = run.path().join("artifacts");
        fs::write(&artifacts, "in the way").unwrap();
        let err = copy_added(work.path(), &artifacts, &[added("a.txt")], 10).unwrap_err();
        assert!(err.to_string().contains("cannot write artifact"), "{err}");
    }
}
