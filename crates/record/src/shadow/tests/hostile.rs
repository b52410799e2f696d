//! A hostile work tree against the host side of the shadow repo: links in
//! ignored folders that an undo would write through, rules files that are
//! links, FIFOs or huge, names git refuses, trees too deep to record.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::time::{Duration, Instant};

use super::*;

fn mkfifo(path: &Path) {
    use rustix::fs::{CWD, FileType, Mode};
    let made = rustix::fs::mknodat(CWD, path, FileType::Fifo, Mode::from_raw_mode(0o644), 0);
    assert_eq!(made, Ok(()));
}

#[test]
fn an_undo_never_writes_through_an_ignored_link_to_a_host_folder() {
    let f = fixture();
    let host = tempfile::tempdir().unwrap();
    // An accepted step adds d/file.
    fs::create_dir(f.work.join("d")).unwrap();
    fs::write(f.work.join("d/authorized_keys"), "ssh-ed25519 AAAA evil\n").unwrap();
    let accepted = record(&f.repo, "adds d/file").commit.unwrap();
    // The next step ignores d, makes it a link to a host folder, and writes
    // a denied path.
    fs::write(f.work.join(".gitignore"), "d\n").unwrap();
    fs::remove_dir_all(f.work.join("d")).unwrap();
    symlink(host.path(), f.work.join("d")).unwrap();
    fs::write(f.work.join(".env"), "SECRET=1\n").unwrap();
    record(&f.repo, "violating");

    f.repo.revert_to(accepted).unwrap();
    assert_eq!(
        fs::read_dir(host.path()).unwrap().count(),
        0,
        "host folder written"
    );
    assert!(f.work.join("d").symlink_metadata().unwrap().is_dir());
    assert_eq!(
        fs::read_to_string(f.work.join("d/authorized_keys")).unwrap(),
        "ssh-ed25519 AAAA evil\n"
    );
    assert!(!f.work.join(".env").exists());
    assert!(!f.work.join(".gitignore").exists());
}

#[test]
fn an_undo_through_a_relative_link_to_the_run_dir_writes_nothing_there() {
    let f = fixture();
    fs::create_dir(f.work.join("d")).unwrap();
    fs::write(f.work.join("d/manifest.json"), "{\"forged\":true}\n").unwrap();
    let accepted = record(&f.repo, "adds d/manifest.json").commit.unwrap();
    fs::write(f.work.join(".gitignore"), "/d\n").unwrap();
    fs::remove_dir_all(f.work.join("d")).unwrap();
    // `..` from the work copy is the folder that holds shadow.git.
    symlink("..", f.work.join("d")).unwrap();
    fs::write(f.work.join("x.pem"), "key\n").unwrap();
    record(&f.repo, "violating");

    f.repo.revert_to(accepted).unwrap();
    let parent = f.work.parent().unwrap();
    assert!(!parent.join("manifest.json").exists());
    assert!(
        f.work
            .join("d/manifest.json")
            .symlink_metadata()
            .unwrap()
            .is_file()
    );
}

#[test]
fn rules_files_that_are_fifos_or_links_are_never_opened() {
    let f = fixture();
    let outside = tempfile::tempdir().unwrap();
    // A FIFO outside with no writer: opening it would block forever.
    mkfifo(&outside.path().join("pipe"));
    mkfifo(&f.work.join(".gitignore"));
    fs::create_dir(f.work.join("sub")).unwrap();
    symlink(outside.path().join("pipe"), f.work.join("sub/.gitignore")).unwrap();
    symlink(outside.path().join("pipe"), f.work.join(".gitattributes")).unwrap();
    fs::write(f.work.join("sub/file"), "x\n").unwrap();
    let started = Instant::now();
    let step = record(&f.repo, "fifos");
    assert!(started.elapsed() < Duration::from_secs(20));
    let paths: Vec<&str> = step.changes.iter().map(|c| c.path.as_str()).collect();
    // The links are recorded as links (the policy judges their targets); the
    // FIFO is not recorded at all.
    assert_eq!(paths, [".gitattributes", "sub/.gitignore", "sub/file"]);
}

#[test]
fn a_huge_rules_file_is_refused_not_honoured() {
    let f = fixture();
    let big = "*.log\n".repeat(300_000);
    fs::write(f.work.join(".gitignore"), &big).unwrap();
    fs::write(f.work.join("a.log"), "x\n").unwrap();
    let step = record(&f.repo, "huge ignore");
    assert_eq!(step.refused.len(), 1, "{:?}", step.refused);
    assert_eq!(step.refused[0].path, b".gitignore");
    // Not honoured: a.log is recorded, so the policy sees it.
    assert!(step.changes.iter().any(|c| c.path == "a.log"));
    let base = f.repo.git().find_commit(f.repo.head().unwrap()).unwrap();
    f.repo.revert_to(base.parent_id(0).unwrap()).unwrap();
    assert!(!f.work.join(".gitignore").exists());
    assert!(!f.work.join("a.log").exists());
}

#[test]
fn names_git_refuses_are_reported_and_removed_by_the_undo() {
    let f = fixture();
    let base = f.repo.head().unwrap();
    fs::create_dir(f.work.join(".git ")).unwrap();
    fs::write(f.work.join(".git /config"), "[core]\n").unwrap();
    fs::create_dir(f.work.join("src/.GIT")).unwrap();
    fs::write(f.work.join("src/.GIT/HEAD"), "ref\n").unwrap();
    fs::write(f.work.join(".env"), "KEY=1\n").unwrap();
    let step = f
        .repo
        .commit_step(base, "git names", MAX_FILE_BYTES)
        .unwrap();
    let refused: Vec<&[u8]> = step.refused.iter().map(|r| r.path.as_slice()).collect();
    assert_eq!(refused, [b".git ".as_slice(), b"src/.GIT"]);
    f.repo.revert_to(base).unwrap();
    assert!(!f.work.join(".git ").exists());
    assert!(!f.work.join("src/.GIT").exists());
    assert!(!f.work.join(".env").exists());
}

#[test]
fn a_tree_too_deep_to_record_is_refused_and_removed() {
    let f = fixture();
    let base = f.repo.head().unwrap();
    let mut deep = f.work.join("deep");
    for _ in 0..200 {
        deep.push("d");
    }
    fs::create_dir_all(&deep).unwrap();
    fs::write(deep.join("x"), "x\n").unwrap();
    let step = f.repo.commit_step(base, "deep", MAX_FILE_BYTES).unwrap();
    assert_eq!(step.refused.len(), 1, "{:?}", step.refused);
    f.repo.revert_to(base).unwrap();
    assert!(!f.work.join("deep").exists());
}

#[test]
fn special_files_are_never_recorded_or_opened() {
    let f = fixture();
    mkfifo(&f.work.join("pipe"));
    let step = record(&f.repo, "fifo");
    assert_eq!(step.commit, None);
    assert!(step.refused.is_empty());
}

#[test]
fn the_projects_own_huge_rules_file_is_kept_and_not_honoured() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    fs::create_dir_all(&work).unwrap();
    fs::write(work.join(".gitignore"), "*.log\n".repeat(300_000)).unwrap();
    fs::write(work.join("a.log"), "x\n").unwrap();
    let repo = ShadowRepo::init(&dir.path().join("shadow.git"), &work).unwrap();
    let base = repo.baseline().unwrap();
    let tree = repo.commit_tree(base).unwrap();
    // Recorded, but not honoured: a.log is recorded too.
    assert!(tree.get_path(Path::new(".gitignore")).is_ok());
    assert!(tree.get_path(Path::new("a.log")).is_ok());
    // Steps accept it as it is, and an undo keeps it.
    fs::write(work.join(".env"), "KEY=1\n").unwrap();
    let step = repo.commit_step(base, "env", MAX_FILE_BYTES).unwrap();
    assert!(step.refused.is_empty(), "{:?}", step.refused);
    repo.revert_to(base).unwrap();
    assert!(work.join(".gitignore").exists());
    assert!(!work.join(".env").exists());
}
