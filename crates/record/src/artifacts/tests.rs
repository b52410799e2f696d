//! Artifacts as behaviour: copied from the commit, with plain modes, never
//! through a link, within the cap.

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use git2::Oid;
use tempfile::TempDir;

use super::*;
use crate::shadow::MAX_FILE_BYTES;
use ah_sandbox::disk::Room;

struct Fixture {
    dir: TempDir,
    work: PathBuf,
    repo: ShadowRepo,
}

impl Fixture {
    fn artifacts(&self) -> PathBuf {
        self.dir.path().join("artifacts")
    }

    /// Records the work tree as a step and returns its commit.
    fn commit(&self) -> Oid {
        let parent = self.repo.head().unwrap();
        let step = self.repo.commit_step(parent, "step", MAX_FILE_BYTES);
        step.unwrap().commit.unwrap()
    }

    fn copy(&self, commit: Oid, changes: &[Change], max_bytes: u64) -> ArtifactReport {
        let mut room = Room::of(u64::MAX, 4096);
        copy_added(
            &self.repo,
            commit,
            &self.artifacts(),
            changes,
            max_bytes,
            &mut room,
        )
        .unwrap()
    }
}

/// An empty work tree with its shadow repo and baseline.
fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    fs::create_dir(&work).unwrap();
    let repo = ShadowRepo::init(&dir.path().join("shadow.git"), &work).unwrap();
    repo.baseline().unwrap();
    Fixture { dir, work, repo }
}

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

fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
}

#[test]
fn copies_what_was_committed_at_the_same_paths() {
    let f = fixture();
    fs::create_dir_all(f.work.join("out/deep/er")).unwrap();
    fs::write(f.work.join("report.txt"), "hello").unwrap();
    fs::write(f.work.join("out/deep/er/data.bin"), [0u8, 1, 2]).unwrap();
    fs::write(f.work.join("gone.txt"), "committed").unwrap();
    let commit = f.commit();
    // After the commit, a process still running rewrites and removes files:
    // the artifacts are what was committed.
    fs::write(f.work.join("report.txt"), "rewritten after the check").unwrap();
    fs::remove_file(f.work.join("gone.txt")).unwrap();
    let changes = [
        added("report.txt"),
        added("out/deep/er/data.bin"),
        added("gone.txt"),
        Change {
            kind: ChangeKind::Modified,
            ..added("modified.txt")
        },
        Change {
            kind: ChangeKind::Deleted,
            ..added("deleted.txt")
        },
    ];
    let report = f.copy(commit, &changes, DEFAULT_MAX_BYTES);
    let copied: Vec<(&str, u64)> = report
        .copied
        .iter()
        .map(|c| (c.path.as_str(), c.bytes))
        .collect();
    assert_eq!(
        copied,
        [
            ("report.txt", 5),
            ("out/deep/er/data.bin", 3),
            ("gone.txt", 9)
        ]
    );
    assert!(report.skipped.is_empty(), "{report:?}");
    let artifacts = f.artifacts();
    assert_eq!(fs::read(artifacts.join("report.txt")).unwrap(), b"hello");
    assert_eq!(
        fs::read(artifacts.join("out/deep/er/data.bin")).unwrap(),
        [0, 1, 2]
    );
    assert_eq!(fs::read(artifacts.join("gone.txt")).unwrap(), b"committed");
}

#[test]
fn modes_are_plain_0755_or_0644_without_setuid_setgid_or_sticky() {
    let f = fixture();
    let files = [
        ("suid.sh", 0o4755, 0o755),
        ("sgid.sh", 0o2775, 0o755),
        ("sticky.txt", 0o1666, 0o644),
        ("private.txt", 0o600, 0o644),
        ("plain.txt", 0o644, 0o644),
    ];
    for (name, on_disk, _) in files {
        fs::write(f.work.join(name), "#!/bin/sh\n").unwrap();
        fs::set_permissions(f.work.join(name), fs::Permissions::from_mode(on_disk)).unwrap();
        assert_eq!(mode(&f.work.join(name)), on_disk, "{name}");
    }
    let commit = f.commit();
    let changes: Vec<Change> = files.iter().map(|(name, _, _)| added(name)).collect();
    let report = f.copy(commit, &changes, DEFAULT_MAX_BYTES);
    assert_eq!(report.copied.len(), files.len(), "{report:?}");
    for (name, _, expected) in files {
        assert_eq!(mode(&f.artifacts().join(name)), expected, "{name}");
    }
}

#[test]
fn files_over_the_cap_are_skipped_and_reported() {
    let f = fixture();
    fs::write(f.work.join("fits.txt"), vec![b'x'; 100]).unwrap();
    fs::write(f.work.join("big.txt"), vec![b'x'; 101]).unwrap();
    let commit = f.commit();
    let report = f.copy(commit, &[added("fits.txt"), added("big.txt")], 100);
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
    assert!(!f.artifacts().join("big.txt").exists());
    assert_eq!(
        report.skipped[0].to_string(),
        "big.txt: 101 bytes, over the 100-byte cap"
    );
}

#[test]
fn links_folders_and_paths_outside_are_skipped_and_nothing_is_followed() {
    let f = fixture();
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("secret"), "host secret").unwrap();
    fs::write(f.work.join("inside.txt"), "x").unwrap();
    fs::create_dir(f.work.join("dir")).unwrap();
    fs::write(f.work.join("dir/file"), "x").unwrap();
    symlink("/etc/passwd", f.work.join("passwd")).unwrap();
    symlink("inside.txt", f.work.join("alias")).unwrap();
    symlink(outside.path(), f.work.join("linked")).unwrap();
    let commit = f.commit();
    let changes = [
        added("passwd"),
        added("alias"),
        added("linked/secret"),
        added("dir"),
        added("../escape"),
        added("./inside.txt"),
        added("never.txt"),
    ];
    let report = f.copy(commit, &changes, DEFAULT_MAX_BYTES);
    assert!(report.copied.is_empty(), "{report:?}");
    assert_eq!(
        skipped(&report),
        vec![
            ("passwd", &SkipReason::Symlink),
            ("alias", &SkipReason::Symlink),
            ("linked/secret", &SkipReason::Missing),
            ("dir", &SkipReason::NotAFile),
            ("../escape", &SkipReason::NotInWork),
            ("./inside.txt", &SkipReason::NotInWork),
            ("never.txt", &SkipReason::Missing),
        ]
    );
    assert!(!f.artifacts().exists(), "nothing copied, no folder made");
}

#[test]
fn a_host_side_write_failure_is_an_error() {
    let f = fixture();
    fs::write(f.work.join("a.txt"), "x").unwrap();
    let commit = f.commit();
    // The artifacts "folder" is a file: nothing can be created below it.
    fs::write(f.artifacts(), "in the way").unwrap();
    let mut room = Room::of(u64::MAX, 4096);
    let err = copy_added(
        &f.repo,
        commit,
        &f.artifacts(),
        &[added("a.txt")],
        10,
        &mut room,
    )
    .unwrap_err();
    assert!(err.to_string().contains("cannot write artifact"), "{err}");
}

#[test]
fn files_past_the_room_left_are_skipped_each_name_counted() {
    let f = fixture();
    // One file of 10 KiB under four names, and a small one in a folder.
    fs::write(f.work.join("a.bin"), vec![7u8; 10 << 10]).unwrap();
    for name in ["b.bin", "c.bin", "d.bin"] {
        fs::hard_link(f.work.join("a.bin"), f.work.join(name)).unwrap();
    }
    fs::create_dir(f.work.join("dir")).unwrap();
    fs::write(f.work.join("dir/small.txt"), "x").unwrap();
    let commit = f.commit();
    let changes = ["a.bin", "b.bin", "c.bin", "d.bin", "dir/small.txt"].map(added);
    // Blocks of 4 KiB: each name takes 12 KiB, the artifacts folder 4 KiB.
    let mut room = Room::of(30 << 10, 4096);
    let report = copy_added(
        &f.repo,
        commit,
        &f.artifacts(),
        &changes,
        MAX_FILE_BYTES,
        &mut room,
    )
    .unwrap();
    let copied: Vec<&str> = report.copied.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(copied, ["a.bin", "b.bin"]);
    assert_eq!(
        skipped(&report),
        [
            (
                "c.bin",
                &SkipReason::OverBudget {
                    bytes: 10 << 10,
                    left: 2 << 10
                }
            ),
            (
                "d.bin",
                &SkipReason::OverBudget {
                    bytes: 10 << 10,
                    left: 2 << 10
                }
            ),
            // Its folder and itself: two blocks.
            (
                "dir/small.txt",
                &SkipReason::OverBudget {
                    bytes: 1,
                    left: 2 << 10
                }
            ),
        ]
    );
    assert_eq!(room.left(), 2 << 10);
    assert!(!f.artifacts().join("c.bin").exists());
    let shown = report.skipped[0].to_string();
    assert!(shown.contains("left of the run's disk budget"), "{shown}");
}
