//! Pruning real run directories: which runs go, which stay, and what is
//! counted as freed.

use std::os::unix::fs::PermissionsExt;

use super::*;

const DAY: Duration = Duration::from_secs(24 * 60 * 60);

/// A run directory with a manifest (an ended run of an older ah, without a
/// lock file) and `size` bytes of content.
fn ended_run(ah: &Path, size: usize) -> RunDir {
    // Distinct milliseconds keep the ids, and so "newest", in order.
    std::thread::sleep(Duration::from_millis(3));
    let run = RunDir::create(ah).unwrap();
    fs::write(run.manifest_path(), "{}").unwrap();
    fs::write(run.path().join("session.patch"), vec![b'x'; size]).unwrap();
    run
}

fn ids(pruned: &[Pruned]) -> Vec<Ulid> {
    pruned.iter().map(|p| p.id).collect()
}

#[test]
fn old_ended_runs_go_and_new_live_and_kept_ones_stay() {
    let dir = tempfile::tempdir().unwrap();
    let ah = dir.path().join(".ah");
    let oldest = ended_run(&ah, 100);
    // Ended through its lock, with a folder a step made read-only.
    let locked = ended_run(&ah, 200);
    drop(locked.hold_live().unwrap());
    let ro = locked.work_dir().join("ro");
    fs::create_dir_all(&ro).unwrap();
    fs::write(ro.join("f"), "12345").unwrap();
    fs::set_permissions(&ro, fs::Permissions::from_mode(0o555)).unwrap();
    let live = ended_run(&ah, 300);
    let _held = live.hold_live().unwrap();
    let newest = ended_run(&ah, 400);
    // A file linked from the newest run is not freed by removing the oldest.
    fs::hard_link(
        oldest.path().join("session.patch"),
        newest.path().join("linked"),
    )
    .unwrap();

    let later = SystemTime::now() + 30 * DAY;
    let options = PruneOptions {
        older_than: 14 * DAY,
        keep: 1,
        dry_run: true,
    };
    let dry = prune(&ah, options, later).unwrap();
    assert_eq!(ids(&dry.removed), [locked.id(), oldest.id()]);
    assert!(oldest.path().exists() && locked.path().exists());

    let options = PruneOptions {
        dry_run: false,
        ..options
    };
    let report = prune(&ah, options, later).unwrap();
    assert_eq!(ids(&report.removed), [locked.id(), oldest.id()]);
    assert_eq!(report.live, [live.id()]);
    assert_eq!(report.kept, 1);
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    // The oldest run's patch is still linked from the newest: not freed.
    let manifest = 2;
    assert_eq!(report.removed[0].bytes, manifest + 200 + 5);
    assert_eq!(report.removed[1].bytes, manifest);
    assert_eq!(report.bytes(), dry.bytes());
    assert!(!oldest.path().exists() && !locked.path().exists());
    assert!(live.path().exists() && newest.path().exists());
    assert_eq!(fs::read(newest.path().join("linked")).unwrap().len(), 100);
}

#[test]
fn runs_younger_than_the_age_stay_and_a_run_being_created_is_not_touched() {
    let dir = tempfile::tempdir().unwrap();
    let ah = dir.path().join(".ah");
    let ended = ended_run(&ah, 10);
    // Neither lock file nor manifest: a run starting this very moment.
    let starting = RunDir::create(&ah).unwrap();
    let options = PruneOptions {
        older_than: 14 * DAY,
        keep: 0,
        dry_run: false,
    };
    let report = prune(&ah, options, SystemTime::now()).unwrap();
    assert!(report.removed.is_empty());
    assert_eq!(report.kept, 2);

    let options = PruneOptions {
        older_than: Duration::ZERO,
        ..options
    };
    let report = prune(&ah, options, SystemTime::now()).unwrap();
    assert_eq!(ids(&report.removed), [ended.id()]);
    assert_eq!(report.live, [starting.id()]);
    assert!(starting.path().exists());
}

#[test]
fn no_runs_directory_prunes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let options = PruneOptions {
        older_than: Duration::ZERO,
        keep: 0,
        dry_run: false,
    };
    let report = prune(&dir.path().join(".ah"), options, SystemTime::now()).unwrap();
    assert!(report.removed.is_empty() && report.live.is_empty() && report.kept == 0);
}
