//! Race-free access to the work tree from the host: every host-side read or
//! write of a tree the model controls goes through this module. Files
//! beneath the work root for `read`, `write`, `edit` and `apply_patch` (whose
//! renames and removals are in [`folder`]); whole-tree walks and rewrites
//! for the shadow repo's scan, staging, undo and restores in [`dir`].
//!
//! [`super::path::resolve`] checks the model's path and computes `rel`: the
//! path relative to the root with every symlink already expanded (links to
//! `/work/...` included) and no `..`. The container can still change the tree
//! between that check and the open, e.g. swap a folder for a symlink to the
//! host, so opening `root/rel` by name could land outside. Here every access
//! starts from an open handle of the root and walks `rel` refusing *every*
//! symlink: with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` where the
//! kernel has it (Linux 5.6+), else with one `openat(O_NOFOLLOW)` per
//! component. Since `rel` has no links and no `..`, what gets opened is exactly
//! the entry at `rel` — the path the write policy checked — or the open fails
//! with [`BeneathError::Changed`]; nothing can be redirected, so no check of
//! the opened file against the checked path is needed afterwards. Missing
//! parent folders are made with `mkdirat` on the handle of their parent.

use std::ffi::{CStr, CString};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libc::{c_int, mode_t};

pub mod dir;
pub mod folder;
pub mod own_file;

/// Why a file could not be opened beneath the root.
#[derive(Debug, thiserror::Error)]
pub enum BeneathError {
    #[error("it does not exist")]
    NotFound,
    #[error("it is a directory")]
    Directory,
    #[error("it is not a regular file (a device, socket or FIFO)")]
    NotRegular,
    #[error(
        "a folder or file in its path was replaced (e.g. by a symlink) after the path was \
         checked"
    )]
    Changed,
    #[error("cannot open the work directory {root}: {source}")]
    Root { root: PathBuf, source: io::Error },
    #[error("cannot create the folder /work/{folder}: {source}")]
    Folder { folder: String, source: io::Error },
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// How paths are looked up: chosen once per process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lookup {
    /// One `openat2` call with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`.
    Openat2,
    /// One `openat(O_NOFOLLOW)` per component (kernels before 5.6, or seccomp
    /// filters that refuse `openat2`).
    Walk,
}

/// Opens the existing regular file `rel` beneath `root` for reading, or for
/// reading and writing. Never blocks on a FIFO.
pub fn open_file(root: &Path, rel: &str, write: bool) -> Result<File, BeneathError> {
    let root = open_root(root)?;
    open_file_with(&root, rel, write, lookup(&root))
}

fn open_file_with(
    root: &OwnedFd,
    rel: &str,
    write: bool,
    lookup: Lookup,
) -> Result<File, BeneathError> {
    let access = if write { libc::O_RDWR } else { libc::O_RDONLY };
    let flags = access | libc::O_NOFOLLOW | libc::O_NONBLOCK;
    let fd = open_beneath(root.as_fd(), &parts(rel), flags, 0, lookup).map_err(classify)?;
    regular(File::from(fd))
}

/// Opens (creating as needed, one `mkdirat` at a time) the folders beneath
/// `root`; returns a handle of the last one.
fn make_folders(root: &OwnedFd, folders: &[&str], lookup: Lookup) -> Result<OwnedFd, BeneathError> {
    let flags = libc::O_PATH | libc::O_DIRECTORY;
    let mut current = root.try_clone()?;
    for (index, name) in folders.iter().enumerate() {
        let at = current.as_fd();
        let next = match open_beneath(at, &[name], flags, 0, lookup) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                mkdirat(at, name).map_err(|source| BeneathError::Folder {
                    folder: folders[..=index].join("/"),
                    source,
                })?;
                open_beneath(at, &[name], flags, 0, lookup)
            }
            other => other,
        };
        current = next.map_err(classify)?;
    }
    Ok(current)
}

/// The components of `rel`; `rel` comes from `path::resolve`, so none is `.`
/// or `..`, but they are dropped here too as a second guard.
fn parts(rel: &str) -> Vec<&str> {
    rel.split('/')
        .filter(|p| !matches!(*p, "" | "." | ".."))
        .collect()
}

/// Refuses anything but a regular file.
fn regular(file: File) -> Result<File, BeneathError> {
    let meta = file.metadata()?;
    if meta.is_dir() {
        Err(BeneathError::Directory)
    } else if !meta.is_file() {
        Err(BeneathError::NotRegular)
    } else {
        Ok(file)
    }
}

fn classify(e: io::Error) -> BeneathError {
    match e.raw_os_error() {
        Some(libc::ENOENT) => BeneathError::NotFound,
        Some(libc::EISDIR) => BeneathError::Directory,
        // A socket, or a FIFO opened for writing without a reader.
        Some(libc::ENXIO) => BeneathError::NotRegular,
        // A symlink met (ELOOP) or an escape or rename race seen by the kernel.
        Some(libc::ELOOP | libc::EXDEV | libc::EAGAIN) => BeneathError::Changed,
        _ => BeneathError::Io(e),
    }
}

fn open_root(root: &Path) -> Result<OwnedFd, BeneathError> {
    let fail = |source| BeneathError::Root {
        root: root.to_path_buf(),
        source,
    };
    let path = CString::new(root.as_os_str().as_bytes()).map_err(|e| fail(e.into()))?;
    sys_openat(libc::AT_FDCWD, &path, libc::O_PATH | libc::O_DIRECTORY, 0).map_err(fail)
}

/// `Openat2` unless the kernel (or a seccomp filter) refuses the syscall.
fn lookup(root: &OwnedFd) -> Lookup {
    static CHOSEN: OnceLock<Lookup> = OnceLock::new();
    *CHOSEN.get_or_init(
        || match openat2(root.as_fd(), c".", libc::O_PATH | libc::O_DIRECTORY, 0) {
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) => Lookup::Walk,
            _ => Lookup::Openat2,
        },
    )
}

/// Opens `parts` beneath `dir` with `flags`, refusing every symlink on the way
/// (ELOOP). No parts means `dir` itself.
fn open_beneath(
    dir: BorrowedFd<'_>,
    parts: &[&str],
    flags: c_int,
    mode: mode_t,
    lookup: Lookup,
) -> io::Result<OwnedFd> {
    let Some((last, folders)) = parts.split_last() else {
        return sys_openat(dir.as_raw_fd(), c".", flags, mode);
    };
    if lookup == Lookup::Openat2 {
        return openat2(dir, &CString::new(parts.join("/"))?, flags, mode);
    }
    let mut current: Option<OwnedFd> = None;
    for name in folders {
        let at = current.as_ref().map_or(dir, AsFd::as_fd);
        current = Some(openat_nofollow(
            at,
            name,
            libc::O_PATH | libc::O_DIRECTORY,
            0,
        )?);
    }
    openat_nofollow(current.as_ref().map_or(dir, AsFd::as_fd), last, flags, mode)
}

/// One component with `O_NOFOLLOW`. With `O_PATH | O_DIRECTORY` a symlink
/// gives ENOTDIR; it is reported as ELOOP like everywhere else.
fn openat_nofollow(
    dir: BorrowedFd<'_>,
    name: &str,
    flags: c_int,
    mode: mode_t,
) -> io::Result<OwnedFd> {
    let name = CString::new(name)?;
    sys_openat(dir.as_raw_fd(), &name, flags | libc::O_NOFOLLOW, mode).map_err(|e| {
        if e.raw_os_error() == Some(libc::ENOTDIR) && is_symlink(dir, &name) {
            io::Error::from_raw_os_error(libc::ELOOP)
        } else {
            e
        }
    })
}

fn is_symlink(dir: BorrowedFd<'_>, name: &CStr) -> bool {
    let mut stat = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `name` is NUL-terminated and `stat` points to writable memory
    // of the right size; the kernel fills it when it returns 0.
    let rc = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            stat.as_mut_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    // SAFETY: fstatat returned 0, so `stat` was initialized.
    rc == 0 && (unsafe { stat.assume_init() }.st_mode & libc::S_IFMT) == libc::S_IFLNK
}

fn openat2(dir: BorrowedFd<'_>, path: &CStr, flags: c_int, mode: mode_t) -> io::Result<OwnedFd> {
    // SAFETY: `open_how` is plain integers (libc marks it non-exhaustive, so
    // it cannot be built with a struct expression); all zeros is valid.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = u64::from((flags | libc::O_CLOEXEC).cast_unsigned());
    how.mode = u64::from(mode);
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
    retry(|| {
        // SAFETY: `path` is NUL-terminated, `how` is a valid `open_how` whose
        // size we pass; the kernel reads both and returns a new fd or -1.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                dir.as_raw_fd(),
                path.as_ptr(),
                &raw const how,
                size_of::<libc::open_how>(),
            )
        };
        c_int::try_from(fd).map_err(|_| io::Error::from_raw_os_error(libc::EOVERFLOW))
    })
}

fn sys_openat(dir: c_int, path: &CStr, flags: c_int, mode: mode_t) -> io::Result<OwnedFd> {
    retry(|| {
        // SAFETY: `path` is NUL-terminated; openat returns a new fd or -1.
        Ok(unsafe { libc::openat(dir, path.as_ptr(), flags | libc::O_CLOEXEC, mode) })
    })
}

fn mkdirat(dir: BorrowedFd<'_>, name: &str) -> io::Result<()> {
    let name = CString::new(name)?;
    // SAFETY: `name` is NUL-terminated; mkdirat only reads it.
    let rc = unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), 0o777) };
    match rc {
        0 => Ok(()),
        _ => match io::Error::last_os_error() {
            // Made meanwhile (by the container?): the open that follows decides.
            e if e.raw_os_error() == Some(libc::EEXIST) => Ok(()),
            e => Err(e),
        },
    }
}

/// Runs blocking file work off the async executor. `Err` only when the work
/// could not finish (its thread panicked or the runtime shut down).
pub async fn unblock<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| format!("the file operation was interrupted: {e}"))
}

/// Runs an fd-returning syscall, retrying on EINTR.
fn retry(mut call: impl FnMut() -> io::Result<c_int>) -> io::Result<OwnedFd> {
    loop {
        let fd = call()?;
        if fd >= 0 {
            // SAFETY: a non-negative result is a new fd that nothing else owns.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

#[cfg(test)]
mod tests;
