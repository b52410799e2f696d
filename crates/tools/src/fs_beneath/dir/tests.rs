//! Folder handles on real folders: links are never followed, special files
//! never opened, removal never leaves the tree.

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};

use super::*;

#[test]
fn a_link_is_never_entered_as_a_folder() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    symlink(outside.path(), dir.path().join("l")).unwrap();
    let root = DirHandle::open_root(dir.path()).unwrap();
    let err = root.open_dir(b"l").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOTDIR));
    assert_eq!(root.kind(b"l").unwrap(), Some(Kind::Link));
    // A root that is itself a link is refused too.
    assert!(DirHandle::open_root(&dir.path().join("l")).is_err());
}

#[test]
fn a_fifo_is_refused_before_it_is_opened() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = rustix::fs::mknodat(
        rustix::fs::CWD,
        dir.path().join("p"),
        FileType::Fifo,
        Mode::from_raw_mode(0o644),
        0,
    );
    assert_eq!(fifo, Ok(()));
    let root = DirHandle::open_root(dir.path()).unwrap();
    // Would block forever if the FIFO were opened for reading.
    let err = root.open_regular(b"p").unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    assert_eq!(root.kind(b"p").unwrap(), Some(Kind::Special));
}

#[test]
fn removing_a_folder_removes_links_not_what_they_point_at() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("keep"), "host\n").unwrap();
    fs::create_dir_all(dir.path().join("a/b")).unwrap();
    symlink(outside.path(), dir.path().join("a/b/out")).unwrap();
    fs::write(dir.path().join("a/b/f"), "x").unwrap();
    fs::set_permissions(dir.path().join("a/b"), fs::Permissions::from_mode(0o555)).unwrap();
    let root = DirHandle::open_root(dir.path()).unwrap();
    let deadline = Instant::now() + std::time::Duration::from_secs(10);
    root.remove(b"a", deadline).unwrap();
    assert!(!dir.path().join("a").exists());
    assert_eq!(
        fs::read_to_string(outside.path().join("keep")).unwrap(),
        "host\n"
    );
}

#[test]
fn create_file_refuses_to_write_through_a_link() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    symlink(outside.path().join("x"), dir.path().join("x")).unwrap();
    let root = DirHandle::open_root(dir.path()).unwrap();
    assert!(root.create_file(b"x", 0o644).is_err());
    assert!(!outside.path().join("x").exists());
}
