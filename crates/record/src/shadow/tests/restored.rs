//! A run restored from an earlier run's step as an overlay: the upper
//! folder written by `overlay::restore_layer` over the project as it is now
//! makes the merged view hold the step's recorded files (whatever the user
//! changed in the project since) and the project's unrecorded ones, and
//! later steps are recorded from it as from any overlay. Real overlay
//! mounts; needs root (skipped, with a note, without it).

use std::fs;
use std::os::unix::fs::symlink;
use std::process::Command;

use super::chmod;
use super::layered::{Mounted, hide, mount, mounted, sh, write};
use crate::overlay;
use crate::shadow::{Layers, MAX_FILE_BYTES, ShadowRepo, StatCache};
use ah_tools::fs_beneath::dir::DirHandle;

/// Records a step of `repo` from the mounted overlay `m`.
fn step(repo: &ShadowRepo, m: &Mounted, cache: &mut StatCache) {
    let merged = DirHandle::open_root(&m.merged).unwrap();
    let upper = DirHandle::open_root(&m.dirs.upper).unwrap();
    let layers = Layers {
        merged: &merged,
        upper: &upper,
    };
    repo.commit_layered_step(repo.head().unwrap(), "step", &layers, cache, MAX_FILE_BYTES)
        .unwrap();
}

/// Unmounts `m` and moves its upper folder aside, for a new run's layers.
fn end_run(m: &Mounted) {
    let status = Command::new("umount").arg(&m.merged).status().unwrap();
    assert!(status.success(), "umount");
    fs::rename(&m.dirs.upper, m.root.join("upper.old")).unwrap();
    fs::remove_dir_all(&m.dirs.work).unwrap();
}

fn tree(repo: &ShadowRepo) -> git2::Oid {
    repo.commit_tree(repo.head().unwrap()).unwrap().id()
}

/// A full walk of the merged view, as a plain work copy is recorded.
fn walked(m: &Mounted, name: &str) -> ShadowRepo {
    let full = ShadowRepo::init(&m.root.join(name), &m.merged).unwrap();
    full.baseline().unwrap();
    full
}

#[test]
fn a_restored_overlay_holds_the_steps_files_and_records_later_steps() {
    let Some(m) = mounted() else {
        return;
    };
    // The earlier run: every kind of change, recorded from its layers.
    let old = ShadowRepo::init(&m.root.join("old.git"), &m.project).unwrap();
    let (old, _) = hide(old, &m, &|_| false);
    mount(&m);
    let w = &m.merged;
    write(&w.join("src/lib.rs"), "fn main() { edited(); }\n");
    write(&w.join("new/deeper/n.txt"), "n\n");
    fs::remove_dir_all(w.join("docs")).unwrap();
    sh(w, "rm -r deep && echo file > deep");
    sh(
        w,
        "rm README.md && mkdir README.md && echo inside > README.md/x",
    );
    chmod(&w.join("run.sh"), 0o755);
    fs::remove_file(w.join("link")).unwrap();
    symlink("new/deeper", w.join("link")).unwrap();
    fs::write(w.join("bin.dat"), [9u8, 0, 9]).unwrap();
    write(&w.join("target/out.o"), "built\n");
    let mut cache = StatCache::default();
    step(&old, &m, &mut cache);
    let head = old.head().unwrap();
    end_run(&m);

    // Meanwhile the user changes the project: a file the run changed, one
    // it did not, a new recorded file and a new ignored one.
    let p = &m.project;
    write(&p.join("src/lib.rs"), "fn main() { user(); }\n");
    write(&p.join("docs/b.md"), "b by the user\n");
    write(&p.join("user.txt"), "new\n");
    write(&p.join("user.log"), "ignored\n");

    // The new run, restored over the project as it is now.
    let new = ShadowRepo::init(&m.root.join("new.git"), &m.project).unwrap();
    new.take_objects(&m.root.join("old.git")).unwrap();
    let laid = overlay::lay(new, &m.project, &m.dirs, &|_| false).unwrap();
    let new = laid.shadow;
    let written = overlay::restore_layer(&new, &m.project, &m.dirs, laid.baseline, head).unwrap();
    assert!(written > 0);
    let baseline = new.adopt(head).unwrap();
    let mut first = old.repo.find_commit(head).unwrap();
    while first.parent_count() > 0 {
        first = first.parent(0).unwrap();
    }
    assert_eq!(baseline, first.id(), "the earlier run's baseline");
    mount(&m);
    let full = walked(&m, "full.git");
    assert_eq!(
        tree(&full),
        old.commit_tree(head).unwrap().id(),
        "restored files"
    );
    // Recorded paths come from the step: the user's new file is not
    // there, the user's edit of a file the run changed neither. Unrecorded
    // ones come from the project.
    assert!(!w.join("user.txt").exists());
    assert_eq!(
        fs::read_to_string(w.join("src/lib.rs")).unwrap(),
        "fn main() { edited(); }\n"
    );
    assert_eq!(fs::read_to_string(w.join("user.log")).unwrap(), "ignored\n");
    assert_eq!(fs::read_to_string(w.join("keep.log")).unwrap(), "ignored\n");
    assert!(
        !w.join("target").exists(),
        "the earlier run's ignored output stays behind"
    );
    // A folder the earlier run removed is gone, not left empty.
    assert!(!w.join("docs").exists(), "docs is left");

    // Later steps are recorded from the upper folder as in any overlay.
    write(&w.join("README.md/y"), "y\n");
    fs::remove_file(w.join("deep")).unwrap();
    write(&w.join("docs/again.md"), "again\n");
    let mut cache = StatCache::default();
    step(&new, &m, &mut cache);
    let after = full
        .commit_step(full.head().unwrap(), "step", MAX_FILE_BYTES)
        .unwrap();
    assert!(after.commit.is_some());
    assert_eq!(tree(&new), tree(&full), "a step after the restore");

    // The project was never written.
    assert_eq!(
        fs::read_to_string(p.join("src/lib.rs")).unwrap(),
        "fn main() { user(); }\n"
    );
    assert!(p.join("README.md").is_file() && p.join("deep/x/y/z.txt").is_file());
    assert!(!p.join("docs/again.md").exists());
}
