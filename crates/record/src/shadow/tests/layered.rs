//! Recording an overlay work copy from its upper folder gives the same
//! trees as a full walk of the merged view, step after step, on a real
//! overlay mount (needs root to mount; skipped, with a note, without it),
//! and what the container must not see of the project stays hidden.

use std::collections::HashSet;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::chmod;
use crate::overlay;
use crate::shadow::{Layers, MAX_FILE_BYTES, ProjectSeed, ShadowRepo, StatCache};
use ah_sandbox::podman::OverlayDirs;
use ah_tools::fs_beneath::dir::DirHandle;

/// A named change to the merged view.
type Step<'a> = (&'a str, &'a dyn Fn(&Path));

/// A mounted overlay of a small project, unmounted when dropped.
pub(super) struct Mounted {
    _dir: tempfile::TempDir,
    pub(super) root: PathBuf,
    pub(super) project: PathBuf,
    pub(super) merged: PathBuf,
    pub(super) dirs: OverlayDirs,
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.merged).status();
    }
}

pub(super) fn write(path: &Path, text: &str) {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).unwrap();
    }
    fs::write(path, text).unwrap();
}

/// The project, its overlay mounted at `merged`; `None` where this process
/// may not mount (not root).
pub(super) fn mounted() -> Option<Mounted> {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: mounting an overlay needs root");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let project = root.join("project");
    write(&project.join("README.md"), "hello\n");
    write(&project.join("src/lib.rs"), "fn main() {}\n");
    write(&project.join("run.sh"), "#!/bin/sh\n");
    write(&project.join("docs/a.md"), "a\n");
    write(&project.join("docs/b.md"), "b\n");
    write(&project.join("deep/x/y/z.txt"), "z\n");
    write(&project.join(".gitignore"), "target/\n*.log\n");
    write(&project.join("keep.log"), "ignored\n");
    fs::write(project.join("bin.dat"), [0u8, 1, 2, 255, 0]).unwrap();
    symlink("README.md", project.join("link")).unwrap();
    let dirs = OverlayDirs {
        upper: root.join("upper"),
        work: root.join("scratch"),
    };
    let merged = root.join("merged");
    fs::create_dir(&merged).unwrap();
    Some(Mounted {
        _dir: dir,
        root,
        project,
        merged,
        dirs,
    })
}

/// Takes `repo`'s baseline from the project and makes the upper folder, as
/// a run does; returns the shadow repo that holds it and the withheld
/// files.
pub(super) fn hide(
    repo: ShadowRepo,
    m: &Mounted,
    withhold: &(dyn Fn(&Path) -> bool + Sync),
) -> (ShadowRepo, Vec<String>) {
    let laid = overlay::lay(repo, &m.project, &m.dirs, withhold).unwrap();
    (laid.shadow, laid.withheld)
}

pub(super) fn mount(m: &Mounted) {
    let options = format!(
        "lowerdir={},upperdir={},workdir={}",
        m.project.display(),
        m.dirs.upper.display(),
        m.dirs.work.display()
    );
    let status = Command::new("mount")
        .args(["-t", "overlay", "overlay", "-o", &options])
        .arg(&m.merged)
        .status()
        .unwrap();
    assert!(status.success(), "mount -t overlay failed");
}

pub(super) fn sh(dir: &Path, script: &str) {
    let status = Command::new("sh")
        .args(["-c", script])
        .current_dir(dir)
        .status()
        .unwrap();
    assert!(status.success(), "{script}");
}

#[test]
fn steps_recorded_from_the_upper_folder_match_a_full_walk_of_the_merged_view() {
    let Some(m) = mounted() else {
        return;
    };
    let layered = ShadowRepo::init(&m.root.join("layered.git"), &m.project).unwrap();
    let (layered, _) = hide(layered, &m, &|_| false);
    mount(&m);
    let full = ShadowRepo::init(&m.root.join("full.git"), &m.merged).unwrap();
    full.baseline().unwrap();
    let tree = |repo: &ShadowRepo| repo.commit_tree(repo.head().unwrap()).unwrap().id();
    assert_eq!(tree(&layered), tree(&full), "the baselines differ");

    let mut cache = StatCache::default();
    let steps: [Step<'_>; 12] = [
        ("edit", &|w| {
            write(&w.join("src/lib.rs"), "fn main() { edited(); }\n")
        }),
        ("add in a new folder", &|w| {
            write(&w.join("new/deeper/n.txt"), "n\n")
        }),
        ("delete a file", &|w| {
            fs::remove_file(w.join("docs/a.md")).unwrap()
        }),
        ("delete a folder", &|w| {
            fs::remove_dir_all(w.join("docs")).unwrap()
        }),
        ("make it again", &|w| write(&w.join("docs/c.md"), "c\n")),
        ("rename a folder", &|w| sh(w, "mv deep moved")),
        ("rename a file", &|w| sh(w, "mv README.md README.txt")),
        ("modes", &|w| chmod(&w.join("run.sh"), 0o755)),
        ("links", &|w| {
            fs::remove_file(w.join("link")).unwrap();
            symlink("../outside", w.join("link")).unwrap();
        }),
        ("binary and ignored", &|w| {
            fs::write(w.join("bin.dat"), [9u8, 0, 9]).unwrap();
            write(&w.join("target/out.o"), "built\n");
            write(&w.join("x.log"), "log\n");
        }),
        ("added then gone", &|w| {
            write(&w.join("tmp.txt"), "t\n");
            fs::remove_file(w.join("tmp.txt")).unwrap();
            fs::remove_file(w.join("new/deeper/n.txt")).unwrap();
        }),
        ("same bytes again", &|w| {
            write(&w.join("src/lib.rs"), "fn main() {}\n")
        }),
    ];
    for (name, step) in steps {
        step(&m.merged);
        let merged = DirHandle::open_root(&m.merged).unwrap();
        let upper = DirHandle::open_root(&m.dirs.upper).unwrap();
        let layers = Layers {
            merged: &merged,
            upper: &upper,
        };
        let got = layered
            .commit_layered_step(
                layered.head().unwrap(),
                name,
                &layers,
                &mut cache,
                MAX_FILE_BYTES,
            )
            .unwrap();
        let want = full
            .commit_step(full.head().unwrap(), name, MAX_FILE_BYTES)
            .unwrap();
        assert_eq!(got.changes, want.changes, "step {name}");
        assert_eq!(tree(&layered), tree(&full), "step {name}");
    }
    // The project itself was never written.
    assert_eq!(
        fs::read_to_string(m.project.join("src/lib.rs")).unwrap(),
        "fn main() {}\n"
    );
    assert!(m.project.join("docs/a.md").exists());
}

#[test]
fn the_container_does_not_see_what_the_baseline_hides() {
    let Some(m) = mounted() else {
        return;
    };
    write(&m.project.join(".env"), "KEY=secret\n");
    write(&m.project.join(".git/config"), "[core]\n");
    write(&m.project.join(".ah/runs/x"), "state\n");
    write(
        &m.project.join("target/.env"),
        "KEY=also withheld, in an ignored folder\n",
    );
    // Names git refuses: one ah's walk knows, one only libgit2 does (a
    // stream of `.git` on NTFS); and a nested repository, left as it is.
    write(
        &m.project.join("src/.GIT/hooks/post-checkout"),
        "#!/bin/sh\n",
    );
    write(&m.project.join("docs/.git:x/y"), "y\n");
    write(
        &m.project.join("vendor/lib/.git/HEAD"),
        "ref: refs/heads/main\n",
    );
    write(&m.project.join("vendor/lib/a.txt"), "a\n");
    let socket = std::os::unix::net::UnixListener::bind(m.project.join("tmp.sock")).unwrap();
    let fifo = m.project.join("target/pipe");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let repo = ShadowRepo::init(&m.root.join("layered.git"), &m.project).unwrap();
    let withhold = |p: &Path| p.file_name().is_some_and(|n| n == ".env");
    let (repo, withheld) = hide(repo, &m, &withhold);
    assert_eq!(withheld, [".env", "target/.env"]);
    let baseline = repo.commit_tree(repo.head().unwrap()).unwrap();
    for left_out in ["src/.GIT", "docs/.git:x", "vendor/lib"] {
        assert!(
            baseline.get_path(Path::new(left_out)).is_err(),
            "{left_out} recorded"
        );
    }
    assert!(baseline.get_path(Path::new("README.md")).is_ok());
    mount(&m);
    assert!(m.merged.join("vendor/lib/.git/HEAD").exists());
    for hidden in [
        ".env",
        ".git",
        ".ah",
        "target/.env",
        "tmp.sock",
        "target/pipe",
        "src/.GIT",
        "docs/.git:x",
    ] {
        assert!(
            fs::symlink_metadata(m.merged.join(hidden)).is_err(),
            "{hidden} is visible"
        );
        assert!(m.project.join(hidden).exists(), "{hidden} left the project");
    }
    assert!(m.merged.join("README.md").exists());
    drop(socket);
}

#[test]
fn a_project_ignored_file_a_step_unignores_stays_out_of_the_record() {
    let Some(m) = mounted() else {
        return;
    };
    let repo = ShadowRepo::init(&m.root.join("layered.git"), &m.project).unwrap();
    let (repo, _) = hide(repo, &m, &|_| false);
    mount(&m);
    write(&m.merged.join(".gitignore"), "target/\n");
    let merged = DirHandle::open_root(&m.merged).unwrap();
    let upper = DirHandle::open_root(&m.dirs.upper).unwrap();
    let layers = Layers {
        merged: &merged,
        upper: &upper,
    };
    let step = repo
        .commit_layered_step(
            repo.head().unwrap(),
            "unignore",
            &layers,
            &mut StatCache::default(),
            MAX_FILE_BYTES,
        )
        .unwrap();
    let paths: Vec<&str> = step.changes.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(
        paths,
        [".gitignore"],
        "keep.log is the user's, not the step's"
    );
}

/// A git project of `files`, committed, with its index written a second
/// ago so no entry is racily clean.
fn git_project(files: &[(&str, &[u8])]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    for (path, bytes) in files {
        let path = project.join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, bytes).unwrap();
    }
    let git = |args: &[&str]| crate::testing::git(&project, args);
    git(&["init", "-q", "-b", "main"]);
    git(&["-c", "core.autocrlf=false", "add", "-A"]);
    git(&[
        "-c",
        "user.name=u",
        "-c",
        "user.email=u@u",
        "commit",
        "-q",
        "-m",
        "one",
    ]);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    git(&["update-index", "--really-refresh"]);
    (dir, project)
}

/// The baseline's tree with the project's index as a stat cache, and the
/// same project hashed whole (no repository to vouch for anything).
fn seeded_and_hashed(project: &Path, root: &Path) -> (git2::Oid, git2::Oid) {
    let seeded = ShadowRepo::init(&root.join("seeded.git"), project).unwrap();
    let commit = seeded
        .project_baseline(project, &HashSet::new(), ProjectSeed::read(project))
        .unwrap();
    let seeded_tree = seeded.commit_tree(commit).unwrap().id();
    let copy = root.join("copy");
    crate::workspace::copy_project(project, &copy, &|_| false).unwrap();
    let hashed = ShadowRepo::init(&root.join("hashed.git"), &copy).unwrap();
    let commit = hashed.baseline().unwrap();
    (seeded_tree, hashed.commit_tree(commit).unwrap().id())
}

#[test]
fn the_project_index_spares_hashing_and_records_the_same_bytes() {
    let (dir, project) = git_project(&[
        ("a.txt", b"one\n"),
        ("src/b.rs", b"fn b() {}\n"),
        ("dirty.txt", b"before\n"),
    ]);
    // Dirty and untracked files are hashed, not taken from the index.
    fs::write(project.join("dirty.txt"), "after, longer\n").unwrap();
    fs::write(project.join("untracked.txt"), "new\n").unwrap();
    let (seeded, hashed) = seeded_and_hashed(&project, dir.path());
    assert_eq!(seeded, hashed);
    // The objects the index named are reached through the project's store:
    // without it, the shadow repo has only what it hashed.
    let alternates = dir.path().join("seeded.git/objects/info/alternates");
    assert!(
        fs::read_to_string(&alternates)
            .unwrap()
            .contains("/project/.git/objects")
    );
    fs::remove_file(&alternates).unwrap();
    assert_eq!(
        own_blobs(dir.path(), &project),
        ["dirty.txt", "untracked.txt"]
    );
}

/// The files of `project` whose blobs the shadow repo `seeded.git` holds
/// itself.
fn own_blobs(root: &Path, project: &Path) -> Vec<String> {
    let repo = git2::Repository::open_bare(root.join("seeded.git")).unwrap();
    let odb = repo.odb().unwrap();
    let mut own = Vec::new();
    for entry in walkdir(project) {
        let rel = entry
            .strip_prefix(project)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let id = git2::Oid::hash_file(git2::ObjectType::Blob, &entry).unwrap();
        if odb.exists(id) {
            own.push(rel);
        }
    }
    own.sort();
    own
}

/// The regular files under `dir`, its `.git` left out.
fn walkdir(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().is_some_and(|n| n == ".git") {
            continue;
        }
        match path.is_dir() {
            true => files.extend(walkdir(&path)),
            false => files.push(path),
        }
    }
    files
}

#[test]
fn an_index_that_holds_converted_content_is_not_trusted() {
    // With `text=auto`, git's index holds LF where the file has CRLF: the
    // blob is not the file's bytes, and its size says so.
    let (dir, project) = git_project(&[
        (".gitattributes", b"* text=auto\n"),
        ("crlf.txt", b"one\r\ntwo\r\n"),
    ]);
    let (seeded, hashed) = seeded_and_hashed(&project, dir.path());
    assert_eq!(seeded, hashed);
    let alternates = dir.path().join("seeded.git/objects/info/alternates");
    fs::remove_file(&alternates).unwrap();
    assert!(own_blobs(dir.path(), &project).contains(&"crlf.txt".to_string()));
}
