//! Behaviour of the shadow repo on real directories.

mod attacks;
mod baseline;
mod hostile;
mod layered;
mod restored;

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use tempfile::TempDir;

use git2::Oid;

use super::{MAX_FILE_BYTES, ShadowError, ShadowRepo, StepCommit};
use crate::{Change, ChangeKind};

struct Fixture {
    _dir: TempDir,
    work: PathBuf,
    repo: ShadowRepo,
}

/// A work tree with a few files, its shadow repo, and its baseline.
fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    fs::create_dir_all(work.join("src")).unwrap();
    fs::write(work.join("README.md"), "hello\n").unwrap();
    fs::write(work.join("src/lib.rs"), "fn main() {}\n").unwrap();
    fs::write(work.join("run.sh"), "#!/bin/sh\n").unwrap();
    let repo = ShadowRepo::init(&dir.path().join("shadow.git"), &work).unwrap();
    repo.baseline().unwrap();
    Fixture {
        _dir: dir,
        work,
        repo,
    }
}

fn change(path: &str, kind: ChangeKind, symlink: bool) -> Change {
    Change {
        path: path.to_string(),
        kind,
        symlink,
    }
}

/// Records a step on the current HEAD, with the default size cap.
fn record(repo: &ShadowRepo, message: &str) -> StepCommit {
    repo.commit_step(repo.head().unwrap(), message, MAX_FILE_BYTES)
        .unwrap()
}

fn chmod(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn no_work_dot_git_and_baseline_records_everything() {
    let f = fixture();
    assert!(!f.work.join(".git").exists());
    let base = f.repo.head().unwrap();
    let tree = f.repo.commit_tree(base).unwrap();
    let names: Vec<_> = tree
        .iter()
        .filter_map(|e| e.name().ok().map(String::from))
        .collect();
    assert_eq!(names, ["README.md", "run.sh", "src"]);
    assert!(matches!(
        f.repo.baseline(),
        Err(ShadowError::BaselineExists(_))
    ));
}

#[test]
fn step_without_changes_is_unchanged() {
    let f = fixture();
    let base = f.repo.head().unwrap();
    let step = record(&f.repo, "nothing");
    assert_eq!(step.commit, None);
    assert!(step.changes.is_empty());
    assert_eq!(f.repo.head().unwrap(), base);
}

#[test]
fn steps_report_additions_modifications_and_deletions() {
    let f = fixture();
    fs::write(f.work.join("src/new.rs"), "new\n").unwrap();
    fs::write(f.work.join("README.md"), "changed\n").unwrap();
    fs::remove_file(f.work.join("run.sh")).unwrap();
    let step = record(&f.repo, "edit");
    let commit = step.commit.expect("a commit");
    assert_eq!(f.repo.head().unwrap(), commit);
    assert_eq!(
        step.changes,
        [
            change("README.md", ChangeKind::Modified, false),
            change("run.sh", ChangeKind::Deleted, false),
            change("src/new.rs", ChangeKind::Added, false),
        ]
    );
}

#[test]
fn rename_is_deletion_plus_addition() {
    let f = fixture();
    fs::rename(f.work.join("src/lib.rs"), f.work.join("src/main.rs")).unwrap();
    let step = record(&f.repo, "mv");
    assert_eq!(
        step.changes,
        [
            change("src/lib.rs", ChangeKind::Deleted, false),
            change("src/main.rs", ChangeKind::Added, false),
        ]
    );
}

#[test]
fn mode_change_is_a_modification() {
    let f = fixture();
    chmod(&f.work.join("run.sh"), 0o755);
    let step = record(&f.repo, "chmod");
    assert_eq!(
        step.changes,
        [change("run.sh", ChangeKind::Modified, false)]
    );
}

#[test]
fn symlinks_are_recorded_as_links() {
    let f = fixture();
    symlink("/etc/passwd", f.work.join("out")).unwrap();
    symlink("missing", f.work.join("dangling")).unwrap();
    let step = record(&f.repo, "links");
    assert_eq!(
        step.changes,
        [
            change("dangling", ChangeKind::Added, true),
            change("out", ChangeKind::Added, true),
        ]
    );
    // File replaced by a link: a modification whose new side is a link.
    fs::remove_file(f.work.join("README.md")).unwrap();
    symlink("src/lib.rs", f.work.join("README.md")).unwrap();
    let step = record(&f.repo, "file to link");
    assert_eq!(
        step.changes,
        [change("README.md", ChangeKind::Modified, true)]
    );
    // And back.
    fs::remove_file(f.work.join("README.md")).unwrap();
    fs::write(f.work.join("README.md"), "plain\n").unwrap();
    let step = record(&f.repo, "link to file");
    assert_eq!(
        step.changes,
        [change("README.md", ChangeKind::Modified, false)]
    );
}

#[test]
fn gitignored_files_are_not_recorded() {
    let f = fixture();
    fs::write(f.work.join(".gitignore"), "/target/\n*.log\n").unwrap();
    record(&f.repo, "ignore");
    fs::create_dir(f.work.join("target")).unwrap();
    fs::write(f.work.join("target/app"), "bin").unwrap();
    fs::write(f.work.join("src/debug.log"), "log").unwrap();
    let step = record(&f.repo, "build");
    assert_eq!(step.commit, None);
    // A top-level .ah/ in the work tree is never recorded either.
    fs::create_dir(f.work.join(".ah")).unwrap();
    fs::write(f.work.join(".ah/x.db"), "db").unwrap();
    assert_eq!(record(&f.repo, "ah").commit, None);
    // A revert leaves ignored files alone.
    let head = f.repo.head().unwrap();
    fs::write(f.work.join("added"), "a").unwrap();
    record(&f.repo, "add");
    f.repo.revert_to(head).unwrap();
    assert!(!f.work.join("added").exists());
    assert!(f.work.join("target/app").exists());
}

#[test]
fn a_touched_but_unchanged_file_is_not_a_change() {
    let f = fixture();
    let path = f.work.join("README.md");
    fs::write(&path, "hello\n").unwrap();
    let step = record(&f.repo, "rewrite same content");
    assert_eq!(step.commit, None);
}

#[test]
fn same_size_rewrites_in_quick_succession_are_all_seen() {
    // The stat cache must not hide a change made in the same instant as the
    // previous commit.
    let f = fixture();
    for content in ["jello\n", "mello\n", "hello\n"] {
        fs::write(f.work.join("README.md"), content).unwrap();
        let step = record(&f.repo, content);
        assert_eq!(
            step.changes,
            [change("README.md", ChangeKind::Modified, false)]
        );
    }
}

#[test]
fn revert_restores_the_earlier_commit_exactly() {
    let f = fixture();
    let base = f.repo.head().unwrap();
    fs::write(f.work.join("README.md"), "changed\n").unwrap();
    fs::remove_file(f.work.join("src/lib.rs")).unwrap();
    fs::create_dir_all(f.work.join("new/deep")).unwrap();
    fs::write(f.work.join("new/deep/file"), "x").unwrap();
    chmod(&f.work.join("run.sh"), 0o755);
    let bad = record(&f.repo, "violating").commit.unwrap();
    // Written after the commit, never staged.
    fs::write(f.work.join("untracked.txt"), "later").unwrap();

    let reverted = f.repo.revert_to(base).unwrap();
    assert_eq!(reverted.head, base);
    assert_eq!(reverted.dropped, Some(bad));
    assert_eq!(f.repo.head().unwrap(), base);
    assert_eq!(
        fs::read_to_string(f.work.join("README.md")).unwrap(),
        "hello\n"
    );
    assert_eq!(
        fs::read_to_string(f.work.join("src/lib.rs")).unwrap(),
        "fn main() {}\n"
    );
    assert!(!f.work.join("new").exists());
    assert!(!f.work.join("untracked.txt").exists());
    let mode = fs::metadata(f.work.join("run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o111, 0);
    // The work tree matches the index and HEAD again.
    assert_eq!(record(&f.repo, "after revert").commit, None);
    // The dropped commit is still readable, for the record.
    assert!(f.repo.changes_between(base, bad).unwrap().len() >= 3);
}

#[test]
fn changes_between_lists_the_whole_range() {
    let f = fixture();
    let base = f.repo.head().unwrap();
    fs::write(f.work.join("a"), "1").unwrap();
    record(&f.repo, "one");
    fs::write(f.work.join("b"), "2").unwrap();
    fs::remove_file(f.work.join("a")).unwrap();
    let head = record(&f.repo, "two").commit.unwrap();
    assert_eq!(
        f.repo.changes_between(base, head).unwrap(),
        [change("b", ChangeKind::Added, false)]
    );
}

#[test]
fn open_continues_where_init_left_off() {
    let f = fixture();
    let base = f.repo.head().unwrap();
    let reopened = ShadowRepo::open(f.repo.git_dir(), &f.work).unwrap();
    assert_eq!(reopened.head().unwrap(), base);
    fs::write(f.work.join("c"), "3").unwrap();
    let step = record(&reopened, "after reopen");
    assert_eq!(step.changes, [change("c", ChangeKind::Added, false)]);
}

#[test]
fn steps_need_a_baseline() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    fs::create_dir(&work).unwrap();
    let repo = ShadowRepo::init(&dir.path().join("shadow.git"), &work).unwrap();
    assert!(matches!(
        repo.commit_step(Oid::ZERO_SHA1, "x", MAX_FILE_BYTES),
        Err(ShadowError::NoBaseline(_))
    ));
}

#[test]
fn nested_repositories_are_left_out_and_reported() {
    let f = fixture();
    let base = f.repo.head().unwrap();
    let git = |dir: &Path, args: &[&str]| {
        let status = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(dir)
            .status()
            .unwrap();
        assert!(status.success());
    };
    // A `git init` at the work root is never recorded.
    git(&f.work, &["init", "-q"]);
    // A nested repo with a commit, one without, and a submodule's `.git`
    // file whose target was not copied.
    for name in ["full", "empty", "submodule"] {
        fs::create_dir(f.work.join(name)).unwrap();
        fs::write(f.work.join(name).join("file"), name).unwrap();
    }
    git(&f.work.join("full"), &["init", "-q"]);
    git(&f.work.join("full"), &["add", "file"]);
    git(&f.work.join("full"), &["commit", "-qm", "x"]);
    git(&f.work.join("empty"), &["init", "-q"]);
    fs::write(
        f.work.join("submodule/.git"),
        "gitdir: ../.git/modules/submodule\n",
    )
    .unwrap();
    // Empty directories are not recorded, as in git.
    fs::create_dir(f.work.join("nothing")).unwrap();
    fs::write(f.work.join("plain"), "x").unwrap();
    let step = record(&f.repo, "nested");
    assert_eq!(step.changes, [change("plain", ChangeKind::Added, false)]);
    assert_eq!(step.nested_repos, ["empty", "full", "submodule"]);
    // A revert leaves them alone too.
    f.repo.revert_to(base).unwrap();
    assert!(!f.work.join("plain").exists());
    for name in ["full", "empty", "submodule"] {
        assert!(f.work.join(name).join("file").exists(), "{name}");
    }
}

#[test]
fn init_refuses_a_missing_work_dir_and_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let git_dir = dir.path().join("shadow.git");
    let err = ShadowRepo::init(&git_dir, &dir.path().join("missing")).unwrap_err();
    assert!(err.to_string().contains("missing"), "{err}");
    assert!(!git_dir.exists());
}

#[test]
fn a_person_can_inspect_the_repo_with_git() {
    let f = fixture();
    fs::write(f.work.join("README.md"), "changed\n").unwrap();
    let out = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(f.repo.git_dir())
        .args(["status", "--porcelain"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), " M README.md\n");
}
