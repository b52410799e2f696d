//! Copies of real project trees: content, modes, links, exclusions, threads.

use std::os::unix::fs::{MetadataExt, symlink};
use std::process::Command;

use super::*;

/// Withholds nothing.
fn nothing(_: &Path) -> bool {
    false
}

fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
}

/// A project with the things a copy must get right.
fn project(root: &Path) {
    fs::create_dir_all(root.join("src/deep")).unwrap();
    fs::create_dir_all(root.join(".git/objects")).unwrap();
    fs::write(root.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    fs::create_dir_all(root.join(".ah/runs")).unwrap();
    fs::write(root.join(".ah/x.db"), "db").unwrap();
    fs::write(root.join("README.md"), "hello\n").unwrap();
    fs::write(root.join("src/deep/data.bin"), vec![0u8; 70_000]).unwrap();
    fs::write(root.join("run.sh"), "#!/bin/sh\n").unwrap();
    fs::set_permissions(root.join("run.sh"), Permissions::from_mode(0o755)).unwrap();
    fs::write(root.join("private"), "p").unwrap();
    fs::set_permissions(root.join("private"), Permissions::from_mode(0o600)).unwrap();
    symlink("README.md", root.join("inside")).unwrap();
    symlink("/etc/passwd", root.join("outside")).unwrap();
    symlink("../../missing", root.join("src/dangling")).unwrap();
    symlink("src", root.join("dirlink")).unwrap();
    // Nested `.git` and `.ah` are ordinary content.
    fs::create_dir_all(root.join("src/.ah")).unwrap();
    fs::write(root.join("src/.ah/keep"), "k").unwrap();
    let fifo = Command::new("mkfifo").arg(root.join("pipe")).status();
    assert!(fifo.unwrap().success());
}

#[test]
fn copies_content_modes_and_links_but_not_ah_git_or_fifos() {
    let dir = tempfile::tempdir().unwrap();
    let (src, dst) = (dir.path().join("project"), dir.path().join("work"));
    project(&src);
    let stats = copy_project(&src, &dst, &nothing).unwrap();
    assert_eq!(
        stats,
        CopyStats {
            files: 5,
            dirs: 3,
            symlinks: 4,
            bytes: 6 + 70_000 + 10 + 1 + 1,
            skipped: 1,
            withheld: Vec::new(),
        }
    );
    assert!(!dst.join(".git").exists());
    assert!(!dst.join(".ah").exists());
    assert!(!dst.join("pipe").exists());
    assert_eq!(fs::read(dst.join("src/.ah/keep")).unwrap(), b"k");
    assert_eq!(
        fs::read(dst.join("src/deep/data.bin")).unwrap().len(),
        70_000
    );
    assert_eq!(mode(&dst.join("run.sh")), 0o755);
    assert_eq!(mode(&dst.join("private")), 0o600);
    let mtime = |p: &Path| fs::metadata(p).unwrap().mtime_nsec();
    assert_eq!(mtime(&dst.join("README.md")), mtime(&src.join("README.md")));
    for (link, target) in [
        ("inside", "README.md"),
        ("outside", "/etc/passwd"),
        ("src/dangling", "../../missing"),
        ("dirlink", "src"),
    ] {
        let meta = fs::symlink_metadata(dst.join(link)).unwrap();
        assert!(meta.file_type().is_symlink(), "{link}");
        assert_eq!(fs::read_link(dst.join(link)).unwrap(), Path::new(target));
    }
}

#[test]
fn every_folder_is_filled_whichever_thread_takes_it() {
    let dir = tempfile::tempdir().unwrap();
    let (src, dst) = (dir.path().join("project"), dir.path().join("work"));
    for d in 0..40 {
        let folder = src.join(format!("d{}/e{d}", d % 4));
        fs::create_dir_all(&folder).unwrap();
        for f in 0..5 {
            fs::write(folder.join(format!("f{f}")), format!("{d}/{f}")).unwrap();
        }
        symlink("f0", folder.join("link")).unwrap();
    }
    let stats = copy_project(&src, &dst, &nothing).unwrap();
    assert_eq!((stats.files, stats.symlinks, stats.dirs), (200, 40, 44));
    let bytes: u64 = (0..40).map(|d| 5 * format!("{d}/0").len() as u64).sum();
    assert_eq!(stats.bytes, bytes);
    for d in 0..40 {
        let folder = dst.join(format!("d{}/e{d}", d % 4));
        for f in 0..5 {
            let text = fs::read_to_string(folder.join(format!("f{f}"))).unwrap();
            assert_eq!(text, format!("{d}/{f}"));
        }
        assert_eq!(fs::read_link(folder.join("link")).unwrap(), Path::new("f0"));
    }
}

#[test]
fn a_git_file_is_excluded_too() {
    let dir = tempfile::tempdir().unwrap();
    let (src, dst) = (dir.path().join("project"), dir.path().join("work"));
    fs::create_dir(&src).unwrap();
    fs::write(src.join(".git"), "gitdir: /elsewhere/.git/worktrees/x\n").unwrap();
    fs::write(src.join("a"), "a").unwrap();
    let stats = copy_project(&src, &dst, &nothing).unwrap();
    assert_eq!(stats.files, 1);
    assert!(!dst.join(".git").exists());
}

#[test]
fn read_only_directories_are_copied_with_their_mode() {
    let dir = tempfile::tempdir().unwrap();
    let (src, dst) = (dir.path().join("project"), dir.path().join("work"));
    fs::create_dir_all(src.join("ro")).unwrap();
    fs::write(src.join("ro/file"), "f").unwrap();
    fs::set_permissions(src.join("ro"), Permissions::from_mode(0o555)).unwrap();
    copy_project(&src, &dst, &nothing).unwrap();
    assert_eq!(fs::read(dst.join("ro/file")).unwrap(), b"f");
    assert_eq!(mode(&dst.join("ro")), 0o555);
}

#[test]
fn refuses_a_non_empty_destination_and_a_missing_project() {
    let dir = tempfile::tempdir().unwrap();
    let (src, dst) = (dir.path().join("project"), dir.path().join("work"));
    fs::create_dir(&src).unwrap();
    fs::create_dir(&dst).unwrap();
    fs::write(dst.join("old"), "").unwrap();
    let err = copy_project(&src, &dst, &nothing).unwrap_err();
    assert!(matches!(err, WorkspaceError::NotEmpty(_)), "{err}");
    let missing = dir.path().join("nope");
    let err = copy_project(&missing, &dir.path().join("w2"), &nothing).unwrap_err();
    assert!(err.to_string().contains("nope"), "{err}");
    // An empty existing directory is fine.
    fs::remove_file(dst.join("old")).unwrap();
    copy_project(&src, &dst, &nothing).unwrap();
}

#[test]
fn withheld_files_and_links_are_listed_and_left_out_at_any_depth() {
    let dir = tempfile::tempdir().unwrap();
    let (src, dst) = (dir.path().join("project"), dir.path().join("work"));
    fs::create_dir_all(src.join("svc/api")).unwrap();
    fs::create_dir_all(src.join("keys")).unwrap();
    fs::write(src.join(".env"), "KEY=1").unwrap();
    fs::write(src.join("svc/api/.env"), "KEY=2").unwrap();
    fs::write(src.join("svc/api/main.rs"), "fn main() {}").unwrap();
    fs::write(src.join("keys/id_rsa"), "private").unwrap();
    fs::write(src.join("keys/id_rsa.pub"), "public").unwrap();
    symlink("/home/u/.env", src.join("svc/.env")).unwrap();
    let names = [".env", "id_rsa"];
    let withhold = |rel: &Path| {
        rel.file_name()
            .is_some_and(|name| names.iter().any(|n| name == *n))
    };
    let stats = copy_project(&src, &dst, &withhold).unwrap();
    assert_eq!(
        stats.withheld,
        [".env", "keys/id_rsa", "svc/.env", "svc/api/.env"]
    );
    assert_eq!((stats.files, stats.symlinks, stats.dirs), (2, 0, 3));
    for absent in stats.withheld.iter() {
        assert!(fs::symlink_metadata(dst.join(absent)).is_err(), "{absent}");
    }
    assert_eq!(fs::read(dst.join("keys/id_rsa.pub")).unwrap(), b"public");

    // A folder copied on its own is asked about with its place in the
    // project.
    let part = dir.path().join("part");
    let stats = copy_folder(
        &src.join("keys"),
        Path::new("keys"),
        &part,
        &|rel: &Path| rel == Path::new("keys/id_rsa"),
    )
    .unwrap();
    assert_eq!(stats.withheld, ["keys/id_rsa"]);
    assert!(!part.join("id_rsa").exists() && part.join("id_rsa.pub").exists());
}
