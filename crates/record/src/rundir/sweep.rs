//! Sweeping what ended runs left of their sandbox: an overlay's upper and
//! scratch folders, a work copy. A run's end hands them to a cleanup of
//! their own (`ah_sandbox::cleanup`), which holds the run's `live.lock`
//! until it is done; an ah or a cleanup that was killed leaves them, and
//! the next podman run of the project sweeps them, after its start has
//! removed the containers of dead runs that mounted them.
//!
//! Only what ah made is removed: folders of those three names, in a run
//! folder under `<ah_dir>/runs/` named by a run id, whose lock says no
//! process runs it (a run without a lock file is never touched), each of
//! them reached without following a symbolic link. The shadow repo, the
//! patch, the manifest and the step records stay: they are the run's
//! record, which only `ah runs prune` removes.

use std::path::{Path, PathBuf};

use ulid::Ulid;

use super::live::Liveness;
use super::{RunDir, runs_dir};

/// The folders of ended runs under `<ah_dir>/runs/` that are left to
/// remove, each a real folder (not a link to one).
pub fn leftovers(ah_dir: &Path) -> Vec<PathBuf> {
    let runs = runs_dir(ah_dir);
    if !is_real_dir(ah_dir) || !is_real_dir(&runs) {
        return Vec::new();
    }
    let Ok(entries) = std::fs::read_dir(&runs) else {
        return Vec::new();
    };
    let mut left = Vec::new();
    for entry in entries.flatten() {
        let Some(id) = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<Ulid>().ok())
        else {
            continue;
        };
        let path = entry.path();
        if !is_real_dir(&path) {
            continue;
        }
        let run = RunDir { id, path };
        let folders: Vec<PathBuf> = [run.overlay_scratch_dir(), run.upper_dir(), run.work_dir()]
            .into_iter()
            .filter(|folder| is_real_dir(folder))
            .collect();
        // Asked only of runs with something left: each asks the kernel
        // about a lock.
        if !folders.is_empty() && has_ended(&run) {
            left.extend(folders);
        }
    }
    left
}

/// Whether the run's lock file exists and no process holds it.
fn has_ended(run: &RunDir) -> bool {
    run.path.join(super::live::LOCK_FILE).is_file() && matches!(run.liveness(), Ok(Liveness::Ended))
}

/// A folder, not a link to one.
fn is_real_dir(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|meta| meta.is_dir())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_folders_of_ended_runs_are_left_to_remove() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ah_dir = dir.path().join(".ah");
        let ended = RunDir::create(&ah_dir).unwrap_or_else(|e| panic!("{e}"));
        drop(ended.hold_live());
        let live = RunDir::create(&ah_dir).unwrap_or_else(|e| panic!("{e}"));
        let _held = live.hold_live().unwrap_or_else(|e| panic!("{e}"));
        let unknown = RunDir::create(&ah_dir).unwrap_or_else(|e| panic!("{e}"));
        for run in [&ended, &live, &unknown] {
            for folder in [run.upper_dir(), run.overlay_scratch_dir()] {
                std::fs::create_dir(&folder).unwrap_or_else(|e| panic!("{e}"));
            }
        }
        // A link named like a work copy is not followed, nor removed.
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(&elsewhere, ended.work_dir()).unwrap_or_else(|e| panic!("{e}"));

        let mut left = leftovers(&ah_dir);
        left.sort();
        let mut expected = vec![ended.upper_dir(), ended.overlay_scratch_dir()];
        expected.sort();
        assert_eq!(left, expected);
    }
}
