//! Real repositories in temp dirs: a host repo, the agent's work copy cloned
//! from it, and a patch made by `git diff --binary --full-index` like the run's
//! `session.patch`. git runs with no system or global configuration, so the
//! machine's git identity never leaks in.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::*;
use ah_record::rundir::ensure_ah_dir;

const LETTERS: &str = "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n";
const BINARY: &[u8] = b"\x00\x01\x02binary\xff";

struct World {
    tmp: tempfile::TempDir,
}

impl World {
    fn new() -> World {
        let world = World {
            tmp: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir(world.home()).unwrap();
        world
    }

    fn home(&self) -> PathBuf {
        self.tmp.path().join("home")
    }

    fn path(&self, name: &str) -> PathBuf {
        self.tmp.path().join(name)
    }

    fn isolate(&self, cmd: &mut Command) {
        cmd.env("HOME", self.home())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", self.home().join(".gitconfig"))
            .env_remove("EMAIL");
    }

    /// Runs a fixture git command (commits as "Fixture") and returns stdout.
    fn git(&self, dir: &Path, args: &[&str]) -> String {
        let mut cmd = Command::new("git");
        cmd.args([
            "-c",
            "user.name=Fixture",
            "-c",
            "user.email=fixture@example.com",
        ])
        .args(args)
        .current_dir(dir);
        self.isolate(&mut cmd);
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn applier_git(&self) -> Git {
        Git::find()
            .unwrap()
            .with_env("HOME", self.home())
            .with_env("GIT_CONFIG_NOSYSTEM", "1")
            .with_env("GIT_CONFIG_GLOBAL", self.home().join(".gitconfig"))
    }

    fn apply(
        &self,
        project: &Path,
        patch: &Path,
        commit: bool,
    ) -> Result<ApplyOutcome, ApplyError> {
        let opts = ApplyOptions {
            commit,
            message: "ah: apply run".into(),
        };
        Applier::with_git(self.applier_git(), project, patch).apply(&opts)
    }

    fn check(&self, project: &Path, patch: &Path) -> bool {
        Applier::with_git(self.applier_git(), project, patch)
            .check()
            .unwrap()
    }

    /// A host repo with `files` in its first commit.
    fn host(&self, files: &[(&str, &[u8])]) -> PathBuf {
        let host = self.path("host");
        std::fs::create_dir(&host).unwrap();
        self.git(&host, &["init", "-q"]);
        for (name, content) in files {
            write(&host.join(name), content);
        }
        self.git(&host, &["add", "-A"]);
        self.git(&host, &["commit", "-q", "-m", "baseline"]);
        host
    }

    /// The agent's copy of the host at its current commit.
    fn work_copy(&self, host: &Path) -> PathBuf {
        let work = self.path("work");
        self.git(
            self.tmp.path(),
            &["clone", "-q", host.to_str().unwrap(), "work"],
        );
        work
    }

    /// Everything changed in `work` since its HEAD, as a patch saved where a
    /// run keeps it: `<host>/.ah/runs/r/session.patch`.
    fn patch(&self, work: &Path, host: &Path, relative: Option<&str>) -> PathBuf {
        self.git(work, &["add", "-A"]);
        let mut args = vec!["diff", "--cached", "--binary", "--full-index", "-M"];
        let rel_arg = relative.map(|r| format!("--relative={r}"));
        args.extend(rel_arg.as_deref());
        args.push("HEAD");
        let diff = self.git(work, &args);
        let ah = host.join(".ah");
        ensure_ah_dir(&ah).unwrap();
        let patch = ah.join("runs/r/session.patch");
        write(&patch, diff.as_bytes());
        patch
    }
}

fn write(path: &Path, content: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

fn paths(names: &[&str]) -> Vec<PathBuf> {
    names.iter().map(PathBuf::from).collect()
}

#[test]
fn a_clean_patch_is_committed_alone_and_user_changes_stay_as_they_were() {
    let w = World::new();
    let host = w.host(&[
        ("f", LETTERS.as_bytes()),
        ("old", b"x\n"),
        ("k", b"keep\n"),
        ("staged.txt", b"s0\n"),
        ("unstaged.txt", b"u0\n"),
    ]);
    let work = w.work_copy(&host);
    write(&work.join("f"), LETTERS.replace("b\n", "B\n").as_bytes());
    std::fs::rename(work.join("old"), work.join("new")).unwrap();
    write(&work.join("new"), b"x\ny\n");
    std::fs::remove_file(work.join("k")).unwrap();
    write(&work.join("bin"), BINARY);
    write(&work.join("dir/added.txt"), b"added\n");
    let patch = w.patch(&work, &host, None);

    // The user keeps working meanwhile.
    write(&host.join("staged.txt"), b"s1\n");
    w.git(&host, &["add", "staged.txt"]);
    write(&host.join("staged.txt"), b"s2\n");
    write(&host.join("unstaged.txt"), b"u1\n");
    write(&host.join("notes.txt"), b"mine\n");
    let before = w.git(&host, &["rev-parse", "HEAD"]);

    assert!(w.check(&host, &patch));
    let outcome = w.apply(&host, &patch, true).unwrap();
    assert_eq!(outcome.method, ApplyMethod::ThreeWay);
    assert_eq!(
        outcome.paths,
        paths(&["bin", "dir/added.txt", "f", "k", "new", "old"])
    );
    let commit = outcome.commit.unwrap();
    assert_eq!(w.git(&host, &["rev-parse", "HEAD"]).trim(), commit);
    assert_eq!(w.git(&host, &["rev-parse", "HEAD~1"]), before);

    let committed = w.git(
        &host,
        &[
            "diff-tree",
            "--no-commit-id",
            "--name-only",
            "-r",
            "--no-renames",
            "HEAD",
        ],
    );
    assert_eq!(committed, "bin\ndir/added.txt\nf\nk\nnew\nold\n");
    assert_eq!(
        w.git(&host, &["log", "-1", "--format=%an <%ae>|%cn|%s"]),
        "ah <ah@localhost>|ah|ah: apply run\n"
    );
    assert_eq!(read(&host.join("f")), LETTERS.replace("b\n", "B\n"));
    assert_eq!(read(&host.join("new")), "x\ny\n");
    assert_eq!(std::fs::read(host.join("bin")).unwrap(), BINARY);
    assert!(!host.join("k").exists() && !host.join("old").exists());

    // Staged, unstaged and untracked user work is exactly as it was.
    assert_eq!(
        w.git(&host, &["status", "--porcelain"]),
        "MM staged.txt\n M unstaged.txt\n?? notes.txt\n"
    );
    assert_eq!(w.git(&host, &["show", ":staged.txt"]), "s1\n");
    assert_eq!(read(&host.join("staged.txt")), "s2\n");
    assert_eq!(w.git(&host, &["show", ":unstaged.txt"]), "u0\n");
    assert_eq!(read(&host.join("unstaged.txt")), "u1\n");
    assert_eq!(read(&host.join("notes.txt")), "mine\n");
}

#[test]
fn the_users_own_identity_is_used_when_configured() {
    let w = World::new();
    let host = w.host(&[("f", LETTERS.as_bytes())]);
    w.git(&host, &["config", "user.name", "Jane Doe"]);
    w.git(&host, &["config", "user.email", "jane@example.com"]);
    let work = w.work_copy(&host);
    write(&work.join("f"), b"changed\n");
    let patch = w.patch(&work, &host, None);
    w.apply(&host, &patch, true).unwrap();
    assert_eq!(
        w.git(&host, &["log", "-1", "--format=%an <%ae>"]),
        "Jane Doe <jane@example.com>\n"
    );
}

#[test]
fn a_host_that_moved_on_nearby_is_merged_three_way() {
    let w = World::new();
    let host = w.host(&[("f", LETTERS.as_bytes())]);
    let work = w.work_copy(&host);
    write(&work.join("f"), LETTERS.replace("b\n", "B\n").as_bytes());
    let patch = w.patch(&work, &host, None);
    // The host changes a context line of the agent's hunk: a plain apply fails.
    write(&host.join("f"), LETTERS.replace("d\n", "D\n").as_bytes());
    w.git(&host, &["commit", "-q", "-am", "host moves on"]);
    let plain = Command::new("git")
        .args(["apply", "--check"])
        .arg(&patch)
        .current_dir(&host)
        .output()
        .unwrap();
    assert!(!plain.status.success());

    assert!(w.check(&host, &patch));
    let outcome = w.apply(&host, &patch, true).unwrap();
    assert_eq!(outcome.method, ApplyMethod::ThreeWay);
    let merged = LETTERS.replace("b\n", "B\n").replace("d\n", "D\n");
    assert_eq!(read(&host.join("f")), merged);
    assert_eq!(w.git(&host, &["show", "HEAD:f"]), merged);
    assert_eq!(w.git(&host, &["status", "--porcelain"]), "");
}

#[test]
fn a_real_conflict_is_an_error_naming_the_paths_and_keeps_host_work() {
    let w = World::new();
    let host = w.host(&[("f", LETTERS.as_bytes()), ("g", b"g\n"), ("mine", b"m0\n")]);
    let work = w.work_copy(&host);
    write(&work.join("f"), LETTERS.replace("b\n", "B\n").as_bytes());
    write(&work.join("g"), b"g2\n");
    let patch = w.patch(&work, &host, None);
    write(&host.join("f"), LETTERS.replace("b\n", "X\n").as_bytes());
    w.git(&host, &["commit", "-q", "-am", "host edits the same line"]);
    write(&host.join("mine"), b"m1\n");
    let head = w.git(&host, &["rev-parse", "HEAD"]);

    assert!(!w.check(&host, &patch));
    assert_eq!(
        w.git(&host, &["status", "--porcelain"]),
        " M mine\n",
        "check changed the host"
    );
    let err = w.apply(&host, &patch, true).unwrap_err();
    match &err {
        ApplyError::Conflicted {
            paths: conflicted, ..
        } => assert_eq!(conflicted, &paths(&["f"])),
        other => panic!("expected a conflict, got {other:?}"),
    }
    let message = err.to_string();
    assert!(message.contains("merge conflicts in f"), "{message}");
    assert!(message.contains(&patch.display().to_string()), "{message}");
    // Nothing committed; the host's line is still there, beside the agent's.
    assert_eq!(w.git(&host, &["rev-parse", "HEAD"]), head);
    let f = read(&host.join("f"));
    assert!(
        f.contains("<<<<<<<") && f.contains("X\n") && f.contains("B\n"),
        "{f}"
    );
    assert_eq!(read(&host.join("mine")), "m1\n");
    assert_eq!(read(&host.join("g")), "g2\n");

    // Applying again before the conflict is resolved is refused.
    let again = w.apply(&host, &patch, true).unwrap_err();
    assert!(
        matches!(again, ApplyError::MergeInProgress { .. }),
        "{again:?}"
    );
    assert!(again.to_string().contains("finish or abort"), "{again}");
}

#[test]
fn rejected_hunks_are_an_error_listing_only_new_rej_files() {
    let w = World::new();
    let host = w.host(&[("f", LETTERS.as_bytes())]);
    // An untracked host file the run saw: git has no blob to merge with.
    write(&host.join("u.txt"), LETTERS.as_bytes());
    write(&host.join("f.rej"), b"stale, from an earlier apply\n");
    let work = w.work_copy(&host);
    write(&work.join("u.txt"), LETTERS.as_bytes());
    w.git(&work, &["add", "u.txt"]);
    w.git(
        &work,
        &["commit", "-q", "-m", "baseline with untracked files"],
    );
    write(
        &work.join("u.txt"),
        LETTERS.replace("b\n", "B\n").as_bytes(),
    );
    write(&work.join("f"), LETTERS.replace("j\n", "J\n").as_bytes());
    let patch = w.patch(&work, &host, None);
    write(
        &host.join("u.txt"),
        LETTERS.replace("b\n", "Y\n").as_bytes(),
    );

    assert!(!w.check(&host, &patch));
    let err = w.apply(&host, &patch, true).unwrap_err();
    match &err {
        ApplyError::Rejected { files, .. } => assert_eq!(files, &paths(&["u.txt.rej"])),
        other => panic!("expected rejected hunks, got {other:?}"),
    }
    assert!(err.to_string().contains(&patch.display().to_string()));
    assert_eq!(read(&host.join("u.txt")), LETTERS.replace("b\n", "Y\n"));
}

#[test]
fn an_untracked_host_file_is_patched_directly_but_not_committed() {
    let w = World::new();
    let host = w.host(&[("f", LETTERS.as_bytes()), ("other", b"o0\n")]);
    write(&host.join("u.txt"), LETTERS.as_bytes());
    let work = w.work_copy(&host);
    write(&work.join("u.txt"), LETTERS.as_bytes());
    w.git(&work, &["add", "u.txt"]);
    w.git(
        &work,
        &["commit", "-q", "-m", "baseline with untracked files"],
    );
    write(
        &work.join("u.txt"),
        LETTERS.replace("b\n", "B\n").as_bytes(),
    );
    write(&work.join("new.txt"), b"new\n");
    let patch = w.patch(&work, &host, None);
    write(&host.join("other"), b"o1\n");

    // u.txt is the user's own untracked file: committing it would put
    // their content into ah's commit, so nothing is committed.
    let before = w.git(&host, &["rev-parse", "HEAD"]);
    let outcome = w.apply(&host, &patch, true).unwrap();
    assert_eq!(outcome.method, ApplyMethod::Direct);
    assert_eq!(outcome.paths, paths(&["new.txt", "u.txt"]));
    assert_eq!(outcome.commit, None);
    assert_eq!(outcome.not_committed, paths(&["u.txt"]));
    assert_eq!(w.git(&host, &["rev-parse", "HEAD"]), before);
    assert_eq!(read(&host.join("u.txt")), LETTERS.replace("b\n", "B\n"));
    assert_eq!(read(&host.join("new.txt")), "new\n");
    assert_eq!(
        w.git(&host, &["status", "--porcelain"]),
        " M other\n?? new.txt\n?? u.txt\n"
    );
}

#[test]
fn a_failed_commit_says_the_patch_is_applied() {
    let w = World::new();
    let host = w.host(&[("f", LETTERS.as_bytes())]);
    // Hooks never run (see `a_commit_runs_no_hook`): a signing program the
    // user configured that refuses makes the commit fail instead.
    w.git(&host, &["config", "commit.gpgSign", "true"]);
    w.git(&host, &["config", "gpg.program", "false"]);
    let work = w.work_copy(&host);
    write(&work.join("f"), b"changed\n");
    let patch = w.patch(&work, &host, None);
    let err = w.apply(&host, &patch, true).unwrap_err();
    assert!(matches!(err, ApplyError::CommitFailed { .. }), "{err:?}");
    assert!(err.to_string().contains("failed to sign"), "{err}");
    assert_eq!(read(&host.join("f")), "changed\n");
    assert_eq!(w.git(&host, &["status", "--porcelain"]), "M  f\n");
}

#[test]
fn a_commit_runs_no_hook() {
    let w = World::new();
    let host = w.host(&[("f", LETTERS.as_bytes())]);
    let marker = w.path("hook-ran");
    for hook in ["pre-commit", "post-commit", "post-index-change"] {
        let path = host.join(".git/hooks").join(hook);
        write(
            &path,
            format!("#!/bin/sh\ntouch '{}'\n", marker.display()).as_bytes(),
        );
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
    }
    let work = w.work_copy(&host);
    write(&work.join("f"), b"changed\n");
    let patch = w.patch(&work, &host, None);
    let outcome = w.apply(&host, &patch, true).unwrap();
    assert!(outcome.commit.is_some());
    assert!(!marker.exists(), "a hook ran");
}

#[test]
fn a_project_in_a_subdirectory_of_its_repo() {
    let w = World::new();
    let host = w.host(&[
        ("top", b"t\n"),
        ("sub/f", LETTERS.as_bytes()),
        ("sub/old", b"o\n"),
    ]);
    let work = w.work_copy(&host);
    write(
        &work.join("sub/f"),
        LETTERS.replace("b\n", "B\n").as_bytes(),
    );
    std::fs::remove_file(work.join("sub/old")).unwrap();
    let patch = w.patch(&work, &host, Some("sub"));
    write(
        &host.join("sub/f"),
        LETTERS.replace("d\n", "D\n").as_bytes(),
    );
    w.git(&host, &["commit", "-q", "-am", "host moves on"]);
    write(&host.join("top"), b"t1\n");

    let project = host.join("sub");
    assert!(w.check(&project, &patch));
    let outcome = w.apply(&project, &patch, true).unwrap();
    assert_eq!(outcome.method, ApplyMethod::ThreeWay);
    assert_eq!(outcome.paths, paths(&["f", "old"]));
    let merged = LETTERS.replace("b\n", "B\n").replace("d\n", "D\n");
    assert_eq!(w.git(&host, &["show", "HEAD:sub/f"]), merged);
    let committed = w.git(
        &host,
        &["diff-tree", "--no-commit-id", "--name-only", "-r", "HEAD"],
    );
    assert_eq!(committed, "sub/f\nsub/old\n");
    assert_eq!(w.git(&host, &["status", "--porcelain"]), " M top\n");
}

#[test]
fn a_plain_directory_gets_a_plain_apply_and_no_commit() {
    let w = World::new();
    let repo = w.host(&[("f", LETTERS.as_bytes())]);
    let work = w.work_copy(&repo);
    write(&work.join("f"), LETTERS.replace("b\n", "B\n").as_bytes());
    write(&work.join("dir/new"), b"n\n");
    let patch = w.patch(&work, &repo, None);

    let plain = w.path("plain");
    write(&plain.join("f"), LETTERS.as_bytes());
    assert!(w.check(&plain, &patch));
    let outcome = w.apply(&plain, &patch, true).unwrap();
    assert_eq!(outcome.method, ApplyMethod::Plain);
    assert_eq!(outcome.commit, None);
    assert_eq!(read(&plain.join("f")), LETTERS.replace("b\n", "B\n"));
    assert_eq!(read(&plain.join("dir/new")), "n\n");
    assert!(!plain.join(".git").exists());

    // A patch that does not fit changes nothing.
    let other = w.path("other");
    write(&other.join("f"), b"something else\n");
    assert!(!w.check(&other, &patch));
    let err = w.apply(&other, &patch, false).unwrap_err();
    assert!(matches!(err, ApplyError::DoesNotApply { .. }), "{err:?}");
    assert!(err.to_string().contains("Nothing was changed"), "{err}");
    assert_eq!(read(&other.join("f")), "something else\n");
    assert!(!other.join("dir").exists());
}

#[test]
fn an_empty_patch_is_nothing_to_do() {
    let w = World::new();
    let host = w.host(&[("f", LETTERS.as_bytes())]);
    let head = w.git(&host, &["rev-parse", "HEAD"]);
    for content in ["", "\n  \n"] {
        let patch = w.path("empty.patch");
        write(&patch, content.as_bytes());
        assert!(w.check(&host, &patch));
        let outcome = w.apply(&host, &patch, true).unwrap();
        assert_eq!(outcome.method, ApplyMethod::Nothing);
        assert!(outcome.paths.is_empty() && outcome.commit.is_none());
        // The public entry points find git on PATH themselves.
        let opts = ApplyOptions {
            commit: true,
            message: "m".into(),
        };
        assert_eq!(apply_patch(&host, &patch, &opts).unwrap(), outcome);
        assert!(check_patch(&host, &patch).unwrap());
    }
    assert_eq!(w.git(&host, &["rev-parse", "HEAD"]), head);
    assert_eq!(w.git(&host, &["status", "--porcelain"]), "");
}

#[test]
fn a_missing_patch_file_is_an_error_naming_it() {
    let w = World::new();
    let host = w.host(&[("f", LETTERS.as_bytes())]);
    let missing = w.path("nope.patch");
    let err = w.apply(&host, &missing, true).unwrap_err();
    assert!(matches!(err, ApplyError::Io { .. }), "{err:?}");
    assert!(err.to_string().contains("nope.patch"), "{err}");
}

#[test]
fn user_edits_in_a_touched_file_are_never_committed_as_ah() {
    let w = World::new();
    let host = w.host(&[("f", LETTERS.as_bytes()), ("g", b"g\n")]);
    let work = w.work_copy(&host);
    write(&work.join("f"), LETTERS.replace("i\n", "I-AH\n").as_bytes());
    write(&work.join("g"), b"g2\n");
    let patch = w.patch(&work, &host, None);

    // The user edits another line of the same file and does not commit.
    write(
        &host.join("f"),
        LETTERS.replace("a\n", "a-USER-WIP\n").as_bytes(),
    );
    let before = w.git(&host, &["rev-parse", "HEAD"]);

    let outcome = w.apply(&host, &patch, true).unwrap();
    assert_eq!(outcome.commit, None, "nothing committed");
    assert_eq!(outcome.not_committed, paths(&["f"]));
    assert_eq!(w.git(&host, &["rev-parse", "HEAD"]), before);
    let f = read(&host.join("f"));
    assert!(f.contains("a-USER-WIP\n") && f.contains("I-AH\n"), "{f}");
    assert_eq!(read(&host.join("g")), "g2\n");
    assert!(outcome.to_string().contains("not committed"));
}
