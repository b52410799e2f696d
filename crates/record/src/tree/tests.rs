//! The walk and the ignore rules on real trees, compared with git's own
//! view where git decides.

use std::fs;
use std::path::Path;

use super::ignore::IgnoreCheck;
use super::scan::{self, Limits, Untracked, Visit, WalkError};
use ah_tools::fs_beneath::dir::DirHandle;

fn recorded(root: &Path) -> Vec<String> {
    let dir = DirHandle::open_root(root).unwrap();
    let mut seen = Vec::new();
    scan::walk(
        &dir,
        &Untracked,
        Limits::within(30),
        &mut |v: Visit<'_>| -> Result<(), WalkError> {
            seen.push(String::from_utf8_lossy(v.path).into_owned());
            Ok(())
        },
    )
    .unwrap();
    seen.sort();
    seen
}

/// What `git add -A` would record, by git itself.
fn git_view(root: &Path) -> Vec<String> {
    let run = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(root)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    run(&["init", "-q"]);
    let listed = run(&["ls-files", "--others", "--exclude-standard", "-z"]);
    fs::remove_dir_all(root.join(".git")).unwrap();
    let mut paths: Vec<String> = listed
        .split('\0')
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect();
    paths.sort();
    paths
}

#[test]
fn the_walk_records_what_git_add_would() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for (path, text) in [
        (
            ".gitignore",
            "*.log\nbuild/\n/top.txt\n!keep.log\nnested/**/deep\n",
        ),
        ("a.log", ""),
        ("keep.log", ""),
        ("top.txt", ""),
        ("sub/top.txt", ""),
        ("sub/.gitignore", "*.tmp\n!important.log\n"),
        ("sub/x.tmp", ""),
        ("sub/important.log", ""),
        ("sub/build/out.o", ""),
        ("build/out.o", ""),
        ("nested/a/deep", ""),
        ("nested/a/shallow", ""),
        ("src/main.rs", ""),
    ] {
        let path = root.join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }
    assert_eq!(recorded(root), git_view(root));
}

#[test]
fn the_ignore_check_agrees_with_the_walk() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    fs::create_dir_all(root.join("sub/build")).unwrap();
    fs::write(root.join(".gitignore"), "build/\n*.o\n").unwrap();
    fs::write(root.join("sub/.gitignore"), "!x.o\n").unwrap();
    let handle = DirHandle::open_root(root).unwrap();
    let mut check = IgnoreCheck::new(&handle);
    assert!(check.is_ignored(b"sub/build", true).unwrap());
    assert!(check.is_ignored(b"sub/build/anything.rs", false).unwrap());
    assert!(check.is_ignored(b"a.o", false).unwrap());
    assert!(!check.is_ignored(b"sub/x.o", false).unwrap());
    assert!(!check.is_ignored(b"build", false).unwrap());
    assert!(!check.is_ignored(b"missing/dir/file.rs", false).unwrap());
}

#[test]
fn the_walk_gives_up_past_its_entry_bound() {
    let dir = tempfile::tempdir().unwrap();
    for n in 0..50 {
        fs::write(dir.path().join(n.to_string()), "").unwrap();
    }
    let handle = DirHandle::open_root(dir.path()).unwrap();
    let mut limits = Limits::within(30);
    limits.max_entries = 10;
    let result = scan::walk(&handle, &Untracked, limits, &mut |_: Visit<'_>| -> Result<
        (),
        WalkError,
    > { Ok(()) });
    assert!(matches!(result, Err(WalkError::TooManyEntries(10))));
}

#[test]
fn git_names_in_every_disguise_are_refused() {
    for name in [
        ".git", ".GIT", ".git ", ".git.", ".git. .", "git~1", "GIT~1",
    ] {
        assert!(scan::is_git_name(name.as_bytes()), "{name:?}");
    }
    for name in [".gitignore", "git", ".git-x", "x.git", ".gitkeep"] {
        assert!(!scan::is_git_name(name.as_bytes()), "{name:?}");
    }
}
