//! Gives the owner back access to the folders and files a revert must touch,
//! for when a step took it away (`chmod 555 .github/workflows`, so the file it
//! added there cannot be removed).
//!
//! For each path: every folder from the work root down to it gets `u+rwx`, and
//! the path itself, when it is a regular file, `u+rw`. Git lists files, never
//! folders, so the folders above the files a checkout writes or removes are
//! all the folders it needs. Nothing is followed: each folder is opened
//! relative to the one above it with `O_NOFOLLOW`, and modes are changed with
//! `AT_SYMLINK_NOFOLLOW`, so a link swapped in by a process still running in
//! the work tree cannot point the change at a host path. Best effort: what
//! cannot be changed (someone else's file, an immutable one) is left as it is;
//! the checkout that follows says whether it was enough.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Adds owner access along each of `paths` (relative to `work_dir`, as git
/// writes them).
pub(super) fn make_writable(work_dir: &Path, paths: &[Vec<u8>]) {
    let Ok(root) = CString::new(work_dir.as_os_str().as_bytes()) else {
        return;
    };
    // The work root is ah's own path: it may be reached through links.
    let Some(root) = open_dir(libc::AT_FDCWD, &root, 0) else {
        return;
    };
    for path in paths {
        make_path_writable(&root, path);
    }
}

fn make_path_writable(root: &OwnedFd, path: &[u8]) {
    let mut parts = Vec::new();
    for part in path.split(|&b| b == b'/').filter(|part| !part.is_empty()) {
        match CString::new(part) {
            Ok(part) => parts.push(part),
            Err(_) => return,
        }
    }
    let Some((leaf, folders)) = parts.split_last() else {
        return;
    };
    let mut current: Option<OwnedFd> = None;
    for folder in folders {
        let parent = current.as_ref().unwrap_or(root).as_raw_fd();
        add_mode_bits(parent, folder, libc::S_IFDIR, 0o700);
        match open_dir(parent, folder, libc::O_NOFOLLOW) {
            Some(fd) => current = Some(fd),
            None => return,
        }
    }
    let parent = current.as_ref().unwrap_or(root).as_raw_fd();
    add_mode_bits(parent, leaf, libc::S_IFREG, 0o600);
}

/// Opens a folder as a path handle (no read access needed), below `parent`.
fn open_dir(parent: libc::c_int, name: &CString, extra: libc::c_int) -> Option<OwnedFd> {
    let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC | extra;
    // SAFETY: `name` is NUL-terminated; `parent` is AT_FDCWD or an open fd.
    let fd = unsafe { libc::openat(parent, name.as_ptr(), flags) };
    // SAFETY: a non-negative result is a new descriptor that nothing else owns.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Adds `bits` to the mode of `name` below `parent` when it is of type
/// `kind` (never a symlink) and lacks them.
fn add_mode_bits(parent: libc::c_int, name: &CString, kind: libc::mode_t, bits: libc::mode_t) {
    // SAFETY: a zeroed `stat` is a valid value for fstatat to fill.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `name` is NUL-terminated, `stat` is writable, `parent` is open.
    let found =
        unsafe { libc::fstatat(parent, name.as_ptr(), &mut stat, libc::AT_SYMLINK_NOFOLLOW) };
    if found != 0 || stat.st_mode & libc::S_IFMT != kind || stat.st_mode & bits == bits {
        return;
    }
    let mode = (stat.st_mode & 0o7777) | bits;
    // SAFETY: as above. AT_SYMLINK_NOFOLLOW: a link swapped in since the
    // fstatat is refused, never followed.
    unsafe { libc::fchmodat(parent, name.as_ptr(), mode, libc::AT_SYMLINK_NOFOLLOW) };
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::{PermissionsExt, symlink};
    use std::path::Path;

    use super::make_writable;

    fn mode(path: &Path) -> u32 {
        fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
    }

    fn chmod(path: &Path, mode: u32) {
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn folders_on_the_way_and_the_file_get_owner_access() {
        let work = tempfile::tempdir().unwrap();
        let root = work.path();
        fs::create_dir_all(root.join("a/b")).unwrap();
        fs::write(root.join("a/b/f"), "x").unwrap();
        fs::create_dir(root.join("other")).unwrap();
        chmod(&root.join("a/b/f"), 0o444);
        chmod(&root.join("a/b"), 0o555);
        chmod(&root.join("a"), 0o055);
        chmod(&root.join("other"), 0o555);
        make_writable(root, &[b"a/b/f".to_vec(), b"a/gone/f".to_vec()]);
        assert_eq!(mode(&root.join("a")), 0o755);
        assert_eq!(mode(&root.join("a/b")), 0o755);
        assert_eq!(mode(&root.join("a/b/f")), 0o644);
        assert_eq!(mode(&root.join("other")), 0o555, "not on any path");
    }

    #[test]
    fn links_are_never_followed() {
        let work = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = work.path();
        fs::create_dir(outside.path().join("dir")).unwrap();
        fs::write(outside.path().join("file"), "host").unwrap();
        chmod(&outside.path().join("dir"), 0o500);
        chmod(&outside.path().join("file"), 0o400);
        symlink(outside.path().join("dir"), root.join("linked_dir")).unwrap();
        symlink(outside.path().join("file"), root.join("linked_file")).unwrap();
        make_writable(root, &[b"linked_dir/x".to_vec(), b"linked_file".to_vec()]);
        assert_eq!(mode(&outside.path().join("dir")), 0o500);
        assert_eq!(mode(&outside.path().join("file")), 0o400);
        chmod(&outside.path().join("dir"), 0o700);
    }
}
