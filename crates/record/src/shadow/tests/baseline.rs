//! The baseline records exactly what `git add -A` records, and leaves an
//! index whose stat data matches the work tree, so the first step rehashes
//! nothing it need not.

use crate::testing::git;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;

use super::*;

/// A tree with what a baseline must get right: folders, executables, links
/// (to a file, to a folder, dangling), empty and repeated files, a file too
/// large to be read whole, and files the `.gitignore` files leave out.
fn populate(root: &Path) {
    fs::create_dir_all(root.join("src/deep/er")).unwrap();
    fs::create_dir_all(root.join("build")).unwrap();
    fs::create_dir_all(root.join("dir with space")).unwrap();
    fs::write(root.join("README.md"), "hello\n").unwrap();
    fs::write(root.join("src/lib.rs"), "fn main() {}\n").unwrap();
    fs::write(root.join("src/deep/er/mod.rs"), "// deep\n".repeat(500)).unwrap();
    fs::write(root.join("src/copy.rs"), "fn main() {}\n").unwrap();
    fs::write(root.join("dir with space/é.txt"), "x\n").unwrap();
    fs::write(root.join("empty"), "").unwrap();
    fs::write(root.join("run.sh"), "#!/bin/sh\n").unwrap();
    chmod(&root.join("run.sh"), 0o755);
    fs::write(root.join("src/tool"), "#!/bin/sh\n").unwrap();
    chmod(&root.join("src/tool"), 0o700);
    let large: Vec<u8> = (0..9 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
    fs::write(root.join("large.bin"), large).unwrap();
    symlink("src/lib.rs", root.join("link")).unwrap();
    symlink("src", root.join("dirlink")).unwrap();
    symlink("../missing", root.join("src/dangling")).unwrap();
    fs::write(root.join(".gitignore"), "*.log\n!keep.log\n/build/\n").unwrap();
    fs::write(root.join("src/.gitignore"), "generated.rs\n").unwrap();
    fs::write(root.join("debug.log"), "ignored\n").unwrap();
    fs::write(root.join("src/keep.log"), "kept\n").unwrap();
    fs::write(root.join("build/out"), "ignored\n").unwrap();
    fs::write(root.join("src/generated.rs"), "ignored\n").unwrap();
}

#[test]
fn the_baseline_tree_is_what_git_add_records() {
    let dir = tempfile::tempdir().unwrap();
    let (work, host) = (dir.path().join("work"), dir.path().join("host"));
    populate(&work);
    populate(&host);
    let repo = ShadowRepo::init(&dir.path().join("shadow.git"), &work).unwrap();
    let base = repo.baseline().unwrap();
    let tree = repo.commit_tree(base).unwrap();

    git(&host, &["init", "-q"]);
    git(&host, &["add", "-A"]);
    assert_eq!(tree.id().to_string(), git(&host, &["write-tree"]));
    // The ignored files were really there to be left out.
    assert!(tree.get_path(Path::new("src/keep.log")).is_ok());
    for ignored in ["debug.log", "build", "src/generated.rs"] {
        assert!(tree.get_path(Path::new(ignored)).is_err(), "{ignored}");
    }
}

#[test]
fn the_baseline_index_matches_the_work_tree_without_rehashing() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    populate(&work);
    // Files changed within the racy window of the staging are stored to be
    // read again (their stat data could hide a write in the same tick); the
    // files of a project copied earlier are not.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let git_dir = dir.path().join("shadow.git");
    let repo = ShadowRepo::init(&git_dir, &work).unwrap();
    repo.baseline().unwrap();
    // `git diff-files` compares stat data only and lists every entry whose
    // stat data differs from the file's; it never refreshes the index.
    let git_dir = git_dir.to_str().unwrap();
    let dirty = git(&work, &["--git-dir", git_dir, "diff-files", "--name-only"]);
    assert_eq!(dirty, "");
    assert_eq!(record(&repo, "nothing").commit, None);
    // And a change is still seen.
    fs::write(work.join("src/deep/er/mod.rs"), "changed\n").unwrap();
    let step = record(&repo, "change");
    assert_eq!(
        step.changes,
        [change("src/deep/er/mod.rs", ChangeKind::Modified, false)]
    );
}

#[test]
fn the_baseline_writes_packs_not_loose_objects_for_ordinary_files() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    fs::create_dir_all(&work).unwrap();
    for i in 0..50 {
        fs::write(work.join(format!("f{i}")), format!("file {i}\n")).unwrap();
    }
    let git_dir = dir.path().join("shadow.git");
    let repo = ShadowRepo::init(&git_dir, &work).unwrap();
    repo.baseline().unwrap();
    let git_dir = git_dir.to_str().unwrap();
    // The trees and the commit are loose; the 50 blobs are in one pack.
    let counts = git(&work, &["--git-dir", git_dir, "count-objects", "-v"]);
    for line in ["count: 2", "in-pack: 50", "packs: 1"] {
        assert!(counts.lines().any(|l| l == line), "{line}: {counts}");
    }
    git(
        &work,
        &["--git-dir", git_dir, "fsck", "--strict", "--no-dangling"],
    );
}

#[test]
fn what_an_earlier_attempt_left_in_the_index_is_not_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    fs::create_dir_all(&work).unwrap();
    fs::write(work.join("kept"), "kept\n").unwrap();
    fs::write(work.join("gone"), "gone\n").unwrap();
    let git_dir = dir.path().join("shadow.git");
    let repo = ShadowRepo::init(&git_dir, &work).unwrap();
    let git_dir = git_dir.to_str().unwrap();
    git(&work, &["--git-dir", git_dir, "add", "gone", "kept"]);
    fs::remove_file(work.join("gone")).unwrap();
    let base = repo.baseline().unwrap();
    let tree = repo.commit_tree(base).unwrap();
    let names: Vec<_> = tree
        .iter()
        .filter_map(|e| e.name().ok().map(String::from))
        .collect();
    assert_eq!(names, ["kept"]);
}

#[test]
fn each_object_store_is_listed_once_and_none_is_dropped() {
    let f = fixture();
    let stores = tempfile::tempdir().unwrap();
    let (one, two) = (stores.path().join("one"), stores.path().join("two"));
    for store in [&one, &two] {
        fs::create_dir_all(store).unwrap();
    }
    // A restored run's shadow reaches the earlier run's project store, then
    // the project's own.
    for store in [&one, &two, &one] {
        f.repo.add_alternate(store).unwrap();
    }
    let listed = fs::read_to_string(f.repo.git_dir().join("objects/info/alternates")).unwrap();
    assert_eq!(listed, format!("{}\n{}\n", one.display(), two.display()));
}
