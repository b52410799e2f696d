//! Opening beneath the root, with `openat2` and with the per-component walk,
//! and the file tools under a racing thread that swaps a folder for a symlink.

use std::io::{Read as _, Write as _};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use serde_json::json;

use super::*;
use crate::test_exec::{DENIED, TestExec};
use crate::{Exec as _, call};

const BOTH: [Lookup; 2] = [Lookup::Openat2, Lookup::Walk];

/// Opens `rel` beneath `root` to be written from scratch, as a file tool
/// would without staging: missing parents by [`make_folders`], then the
/// file created or truncated, every link refused. Returns whether it was
/// created.
fn create_file_with(
    root: &OwnedFd,
    rel: &str,
    lookup: Lookup,
) -> Result<(File, bool), BeneathError> {
    let parts = parts(rel);
    let Some((name, folders)) = parts.split_last() else {
        return Err(BeneathError::Directory);
    };
    let parent = make_folders(root, folders, lookup)?;
    let name = [*name];
    let flags = OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK;
    let exclusive = flags | OFlags::CREATE | OFlags::EXCL;
    let mode = Mode::from_raw_mode(0o666);
    match open_beneath(parent.as_fd(), &name, exclusive, mode, lookup) {
        Ok(fd) => Ok((File::from(fd), true)),
        Err(e) if Errno::from_io_error(&e) == Some(Errno::EXIST) => {
            let fd = open_beneath(parent.as_fd(), &name, flags, Mode::empty(), lookup)
                .map_err(classify)?;
            let file = regular(File::from(fd))?;
            file.set_len(0)?;
            Ok((file, false))
        }
        Err(e) => Err(classify(e)),
    }
}

fn root_of(exec: &TestExec) -> OwnedFd {
    open_root(exec.root()).unwrap()
}

fn contents(mut file: File) -> String {
    let mut text = String::new();
    file.read_to_string(&mut text).unwrap();
    text
}

/// Names in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn this_kernel_has_openat2() {
    // The primary path must be the one exercised on this machine (Linux 6.18).
    let exec = TestExec::new();
    assert_eq!(lookup(&root_of(&exec)), Lookup::Openat2);
}

#[test]
fn opens_existing_files_and_names_what_is_wrong() {
    let exec = TestExec::new();
    std::fs::create_dir_all(exec.path("a/b")).unwrap();
    std::fs::write(exec.path("a/b/f.txt"), "text").unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(exec.path("pipe"))
        .status()
        .unwrap();
    assert!(made.success());
    let root = root_of(&exec);
    for lookup in BOTH {
        let file = open_file_with(&root, "a/b/f.txt", false, lookup).unwrap();
        assert_eq!(contents(file), "text", "{lookup:?}");
        let outcome = |rel: &str, write: bool| open_file_with(&root, rel, write, lookup);
        assert!(matches!(
            outcome("a/nope", false),
            Err(BeneathError::NotFound)
        ));
        assert!(matches!(
            outcome("nope/f", false),
            Err(BeneathError::NotFound)
        ));
        for write in [false, true] {
            assert!(matches!(
                outcome("a/b", write),
                Err(BeneathError::Directory)
            ));
            assert!(matches!(outcome("", write), Err(BeneathError::Directory)));
            assert!(matches!(
                outcome("pipe", write),
                Err(BeneathError::NotRegular)
            ));
        }
        match outcome("a/b/f.txt/x", false) {
            Err(BeneathError::Io(e)) => {
                assert_eq!(Errno::from_io_error(&e), Some(Errno::NOTDIR));
            }
            other => panic!("{lookup:?}: {other:?}"),
        }
    }
}

#[test]
fn every_symlink_in_the_path_is_refused_even_inside() {
    // `rel` comes with links already expanded: a link met now was swapped in.
    let exec = TestExec::new();
    std::fs::create_dir(exec.path("real")).unwrap();
    std::fs::write(exec.path("real/f"), "inside").unwrap();
    symlink("real", exec.path("dir-link")).unwrap();
    symlink("real/f", exec.path("file-link")).unwrap();
    symlink("/work/real", exec.path("work-link")).unwrap();
    let root = root_of(&exec);
    for lookup in BOTH {
        for rel in ["dir-link/f", "file-link", "work-link/f"] {
            for write in [false, true] {
                let outcome = open_file_with(&root, rel, write, lookup);
                assert!(
                    matches!(outcome, Err(BeneathError::Changed)),
                    "{lookup:?} {rel}: {outcome:?}"
                );
            }
            let outcome = create_file_with(&root, rel, lookup);
            assert!(
                matches!(outcome, Err(BeneathError::Changed)),
                "{lookup:?} {rel}: {outcome:?}"
            );
        }
        let outcome = create_file_with(&root, "dir-link/new/x", lookup);
        assert!(matches!(outcome, Err(BeneathError::Changed)), "{outcome:?}");
    }
    assert_eq!(listing(&exec.path("real")), ["f"]);
    assert_eq!(
        std::fs::read_to_string(exec.path("real/f")).unwrap(),
        "inside"
    );
}

#[test]
fn create_makes_parents_one_by_one_then_truncates() {
    let exec = TestExec::new();
    let root = root_of(&exec);
    for (lookup, top) in BOTH.into_iter().zip(["one", "two"]) {
        let rel = format!("{top}/b/c/new.txt");
        let (mut file, created) = create_file_with(&root, &rel, lookup).unwrap();
        assert!(created, "{lookup:?}");
        file.write_all(b"first version").unwrap();
        assert!(exec.path(&format!("{top}/b/c")).is_dir());
        let (mut file, created) = create_file_with(&root, &rel, lookup).unwrap();
        assert!(!created, "{lookup:?}");
        file.write_all(b"second").unwrap();
        assert_eq!(std::fs::read_to_string(exec.path(&rel)).unwrap(), "second");

        std::fs::write(exec.path(&format!("{top}/plain")), "").unwrap();
        match create_file_with(&root, &format!("{top}/plain/x"), lookup) {
            Err(BeneathError::Io(e)) => {
                assert_eq!(Errno::from_io_error(&e), Some(Errno::NOTDIR));
            }
            other => panic!("{lookup:?}: {other:?}"),
        }
        let outcome = create_file_with(&root, &format!("{top}/b"), lookup);
        assert!(
            matches!(outcome, Err(BeneathError::Directory)),
            "{outcome:?}"
        );
    }
    assert!(matches!(
        create_file_with(&root, "", Lookup::Walk),
        Err(BeneathError::Directory)
    ));
}

#[test]
fn mkdirat_makes_one_folder_relative_to_a_handle() {
    let exec = TestExec::new();
    std::fs::create_dir(exec.path("parent")).unwrap();
    let root = root_of(&exec);
    let parent = open_beneath(
        root.as_fd(),
        &["parent"],
        OFlags::PATH | OFlags::DIRECTORY,
        Mode::empty(),
        Lookup::Walk,
    )
    .unwrap();
    mkdirat(parent.as_fd(), "child").unwrap();
    assert!(exec.path("parent/child").is_dir());
    // Made meanwhile by someone else: fine, the open that follows decides.
    mkdirat(parent.as_fd(), "child").unwrap();
    let missing = mkdirat(parent.as_fd(), "no/child").unwrap_err();
    assert_eq!(Errno::from_io_error(&missing), Some(Errno::NOENT));
}

/// A thread that keeps exchanging two names in the work root (a folder and a
/// symlink) with `renameat2(RENAME_EXCHANGE)`, as a background process in the
/// container could.
struct Swapper {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<u64>>,
}

impl Swapper {
    fn start(a: PathBuf, b: PathBuf) -> Swapper {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut swaps = 0;
            while !flag.load(Ordering::Relaxed) {
                let swapped = rustix::fs::renameat_with(
                    rustix::fs::CWD,
                    &a,
                    rustix::fs::CWD,
                    &b,
                    rustix::fs::RenameFlags::EXCHANGE,
                );
                assert_eq!(swapped, Ok(()));
                swaps += 1;
            }
            swaps
        });
        Swapper {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops swapping; returns how many swaps happened.
    fn stop(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

/// Errors the tools may give while a folder is swapped: `resolve` saw the
/// link, saw the swap in progress, or the open met the link.
fn race_error(message: &str) -> bool {
    [
        "outside /work",
        "is not allowed",
        "cannot inspect",
        "changed while",
    ]
    .iter()
    .any(|known| message.contains(known))
}

/// `work/d` (a real folder) keeps trading places with `work/swap`, a symlink
/// to the sibling folder `outside/` (like `d -> ../../../..` reaching the
/// user's project).
fn racing_root() -> (TestExec, PathBuf) {
    let exec = TestExec::new();
    let outside = exec.outside("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("secret"), "OUTSIDE").unwrap();
    std::fs::create_dir(exec.path("d")).unwrap();
    std::fs::write(exec.path("d/secret"), "inside").unwrap();
    symlink("../outside", exec.path("swap")).unwrap();
    (exec, outside)
}

const RACE_ROUNDS: usize = 2000;

#[tokio::test]
async fn write_never_lands_outside_while_a_folder_is_swapped() {
    let (exec, outside) = racing_root();
    let swapper = Swapper::start(exec.path("d"), exec.path("swap"));
    let mut written = 0;
    for round in 0..RACE_ROUNDS {
        let input = json!({"path": "d/sub/x", "content": format!("round {round}")});
        let out = call("write", &input, &exec).await;
        if !out.is_error {
            written += 1;
        } else {
            assert!(race_error(&out.content), "{}", out.content);
        }
    }
    assert!(swapper.stop() > 0);
    assert_eq!(listing(&outside), ["secret"]);
    assert_eq!(
        std::fs::read_to_string(outside.join("secret")).unwrap(),
        "OUTSIDE"
    );
    // Some writes got through to the real folder (under either name).
    assert!(written > 0);
}

#[tokio::test]
async fn read_never_shows_outside_content_while_a_folder_is_swapped() {
    let (exec, _outside) = racing_root();
    let swapper = Swapper::start(exec.path("d"), exec.path("swap"));
    let mut shown = 0;
    for _ in 0..RACE_ROUNDS {
        let out = call("read", &json!({"path": "d/secret"}), &exec).await;
        if out.is_error {
            assert!(race_error(&out.content), "{}", out.content);
        } else {
            assert_eq!(out.content, "     1\tinside\n");
            shown += 1;
        }
    }
    assert!(swapper.stop() > 0);
    assert!(shown > 0);
}

#[tokio::test]
async fn edit_never_touches_outside_while_a_folder_is_swapped() {
    let (exec, outside) = racing_root();
    std::fs::write(outside.join("secret"), "OUTSIDE a").unwrap();
    std::fs::write(exec.path("d/secret"), "a").unwrap();
    let swapper = Swapper::start(exec.path("d"), exec.path("swap"));
    for round in 0..RACE_ROUNDS / 4 {
        let (old, new) = if round % 2 == 0 {
            ("a", "b")
        } else {
            ("b", "a")
        };
        let input = json!({"path": "d/secret", "old_string": old, "new_string": new});
        call("edit", &input, &exec).await;
    }
    assert!(swapper.stop() > 0);
    assert_eq!(
        std::fs::read_to_string(outside.join("secret")).unwrap(),
        "OUTSIDE a"
    );
}

#[tokio::test]
async fn a_swap_cannot_redirect_a_write_into_a_denied_folder() {
    // `a` (allowed) keeps trading places with a link to the denied folder.
    let exec = TestExec::new();
    std::fs::create_dir(exec.path(DENIED)).unwrap();
    std::fs::create_dir(exec.path("a")).unwrap();
    symlink(DENIED, exec.path("swap")).unwrap();
    let swapper = Swapper::start(exec.path("a"), exec.path("swap"));
    for _ in 0..RACE_ROUNDS {
        let out = call("write", &json!({"path": "a/x", "content": "hook"}), &exec).await;
        if out.is_error {
            assert!(race_error(&out.content), "{}", out.content);
        }
    }
    assert!(swapper.stop() > 0);
    assert!(listing(&exec.path(DENIED)).is_empty());
}

#[test]
fn the_walk_never_leaves_the_root_while_a_folder_is_swapped() {
    let (exec, outside) = racing_root();
    let root = root_of(&exec);
    let swapper = Swapper::start(exec.path("d"), exec.path("swap"));
    for _ in 0..RACE_ROUNDS {
        if let Ok(file) = open_file_with(&root, "d/secret", false, Lookup::Walk) {
            assert_eq!(contents(file), "inside");
        }
        if let Ok((mut file, _)) = create_file_with(&root, "d/sub/x", Lookup::Walk) {
            file.write_all(b"x").unwrap();
        }
    }
    assert!(swapper.stop() > 0);
    assert_eq!(listing(&outside), ["secret"]);
}

#[tokio::test]
async fn links_that_stay_inside_still_work_for_the_tools() {
    let exec = TestExec::new();
    std::fs::create_dir(exec.path("real")).unwrap();
    symlink("real", exec.path("rel-link")).unwrap();
    symlink("/work/real", exec.path("work-link")).unwrap();
    for (link, name) in [("rel-link", "one"), ("work-link", "two")] {
        let path = format!("{link}/new/{name}.txt");
        let out = call("write", &json!({"path": path, "content": "hi\n"}), &exec).await;
        assert!(!out.is_error, "{}", out.content);
        assert_eq!(
            out.details["path"],
            json!(format!("/work/real/new/{name}.txt"))
        );
        let out = call("read", &json!({"path": path}), &exec).await;
        assert_eq!(out.content, "     1\thi\n");
    }
    assert_eq!(listing(&exec.path("real/new")), ["one.txt", "two.txt"]);
}

#[tokio::test]
async fn a_folder_link_to_outside_is_refused_with_the_resolver_message() {
    let exec = TestExec::new();
    let outside = exec.outside("outside");
    std::fs::create_dir(&outside).unwrap();
    symlink("../outside", exec.path("d")).unwrap();
    let out = call("write", &json!({"path": "d/sub/x", "content": "x"}), &exec).await;
    assert_eq!(
        out.content,
        "path \"d/sub/x\" goes through the symlink /work/d whose target \"../outside\" is \
         outside /work: only links that stay inside the work directory can be used"
    );
    assert!(!out.may_change_files);
    let out = call("read", &json!({"path": "d/x"}), &exec).await;
    assert!(
        out.content
            .contains("whose target \"../outside\" is outside /work")
    );
    assert!(listing(&outside).is_empty());
}
