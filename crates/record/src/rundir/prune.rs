//! `ah runs prune`: removing old run directories, shadow repos included.
//!
//! A run's directory is kept after the run (its shadow repo is what a
//! forked conversation restores its files from) until it is pruned. A run
//! is removed when it is older than the given age (by its id's time, the
//! run's start), is not among the newest `keep` runs, and is not live (see
//! `super::live`): a live run, or one whose state cannot be told, is
//! never removed.
//!
//! The bytes freed are those of files no other directory links to: a run
//! restored from an earlier one hard-links that run's objects, and those
//! stay on disk while the later run has them.

use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use ulid::Ulid;

use super::live::Liveness;
use super::{Result, RunDir, io_err, list_runs};

/// What to prune.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PruneOptions {
    /// Only runs started longer ago than this are removed.
    pub older_than: Duration,
    /// The newest this-many runs are kept whatever their age.
    pub keep: usize,
    /// Report what would be removed, remove nothing.
    pub dry_run: bool,
}

/// One run pruned (or, in a dry run, that would be).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pruned {
    pub id: Ulid,
    pub path: PathBuf,
    /// Bytes its removal frees.
    pub bytes: u64,
}

/// What a prune did.
#[derive(Debug, Default)]
pub struct PruneReport {
    pub removed: Vec<Pruned>,
    /// Old enough, but kept because a process runs them (or nothing could
    /// tell whether one does).
    pub live: Vec<Ulid>,
    /// Runs that could not be removed (wholly or partly), and why.
    pub failed: Vec<(Ulid, String)>,
    /// Runs kept for being new or among the newest `keep`.
    pub kept: usize,
}

impl PruneReport {
    pub fn bytes(&self) -> u64 {
        self.removed.iter().map(|r| r.bytes).sum()
    }
}

/// Prunes the runs under `<ah_dir>/runs/` as `options` say, as of `now`.
pub fn prune(ah_dir: &Path, options: PruneOptions, now: SystemTime) -> Result<PruneReport> {
    let mut report = PruneReport::default();
    // Newest first.
    for (index, run) in list_runs(ah_dir)?.into_iter().enumerate() {
        let started = run.id.datetime();
        let age = now.duration_since(started).unwrap_or(Duration::ZERO);
        if index < options.keep || age < options.older_than {
            report.kept += 1;
            continue;
        }
        let dir = RunDir {
            id: run.id,
            path: run.path,
        };
        match dir.liveness() {
            Ok(Liveness::Ended) => {}
            Ok(Liveness::Live | Liveness::Unknown) => {
                report.live.push(dir.id);
                continue;
            }
            Err(err) => {
                report.failed.push((dir.id, err.to_string()));
                continue;
            }
        }
        let bytes = match freed_bytes(&dir.path) {
            Ok(bytes) => bytes,
            Err(err) => {
                report.failed.push((dir.id, err.to_string()));
                continue;
            }
        };
        if !options.dry_run
            && let Err(err) = remove(&dir.path)
        {
            report.failed.push((dir.id, err.to_string()));
            continue;
        }
        report.removed.push(Pruned {
            id: dir.id,
            path: dir.path,
            bytes,
        });
    }
    Ok(report)
}

/// The size of the files under `dir` that have no other link.
fn freed_bytes(dir: &Path) -> Result<u64> {
    let mut bytes = 0;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        for entry in fs::read_dir(&next).map_err(io_err("list", &next))? {
            let entry = entry.map_err(io_err("list", &next))?;
            let meta = entry
                .metadata()
                .map_err(io_err("read the size of", &entry.path()))?;
            if meta.is_dir() {
                pending.push(entry.path());
            } else if meta.nlink() <= 1 {
                bytes += meta.len();
            }
        }
    }
    Ok(bytes)
}

/// Removes `dir` whole. A step may have left folders without write access
/// (in the work copy of a run that crashed); they are made writable and the
/// removal is tried once more.
fn remove(dir: &Path) -> Result<()> {
    // A crashed podman run's overlay scratch folder holds a folder only
    // the user namespace may remove; what fails shows in the removal below.
    let scratch = RunDir::overlay_scratch_of(dir);
    if scratch.exists() {
        let _ = ah_sandbox::podman::remove_scratch(&scratch);
    }
    match fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(_) => {
            make_folders_writable(dir);
            fs::remove_dir_all(dir).map_err(io_err("remove", dir))
        }
    }
}

/// Gives the owner full access to every folder under `dir` it can reach;
/// what cannot be changed is left for the retry to report.
fn make_folders_writable(dir: &Path) {
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        let Ok(meta) = fs::symlink_metadata(&next) else {
            continue;
        };
        if !meta.is_dir() {
            continue;
        }
        let mode = meta.permissions().mode() | 0o700;
        // A failure shows up as the retried removal's error.
        let _ = fs::set_permissions(&next, fs::Permissions::from_mode(mode));
        if let Ok(entries) = fs::read_dir(&next) {
            pending.extend(entries.filter_map(|e| e.ok()).map(|e| e.path()));
        }
    }
}

#[cfg(test)]
mod tests;
