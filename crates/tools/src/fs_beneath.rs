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

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};
use rustix::io::{Errno, retry_on_intr};

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
    let access = if write { OFlags::RDWR } else { OFlags::RDONLY };
    let flags = access | OFlags::NOFOLLOW | OFlags::NONBLOCK;
    let fd =
        open_beneath(root.as_fd(), &parts(rel), flags, Mode::empty(), lookup).map_err(classify)?;
    regular(File::from(fd))
}

/// Opens (creating as needed, one `mkdirat` at a time) the folders beneath
/// `root`; returns a handle of the last one.
fn make_folders(root: &OwnedFd, folders: &[&str], lookup: Lookup) -> Result<OwnedFd, BeneathError> {
    let flags = OFlags::PATH | OFlags::DIRECTORY;
    let mut current = root.try_clone()?;
    for (index, name) in folders.iter().enumerate() {
        let at = current.as_fd();
        let next = match open_beneath(at, &[name], flags, Mode::empty(), lookup) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                mkdirat(at, name).map_err(|source| BeneathError::Folder {
                    folder: folders[..=index].join("/"),
                    source,
                })?;
                open_beneath(at, &[name], flags, Mode::empty(), lookup)
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
    match Errno::from_io_error(&e) {
        Some(Errno::NOENT) => BeneathError::NotFound,
        Some(Errno::ISDIR) => BeneathError::Directory,
        // A socket, or a FIFO opened for writing without a reader.
        Some(Errno::NXIO) => BeneathError::NotRegular,
        // A symlink met (ELOOP) or an escape or rename race seen by the kernel.
        Some(Errno::LOOP | Errno::XDEV | Errno::AGAIN) => BeneathError::Changed,
        _ => BeneathError::Io(e),
    }
}

fn open_root(root: &Path) -> Result<OwnedFd, BeneathError> {
    sys_openat(
        rustix::fs::CWD,
        root,
        OFlags::PATH | OFlags::DIRECTORY,
        Mode::empty(),
    )
    .map_err(|source| BeneathError::Root {
        root: root.to_path_buf(),
        source,
    })
}

/// `Openat2` unless the kernel (or a seccomp filter) refuses the syscall.
fn lookup(root: &OwnedFd) -> Lookup {
    static CHOSEN: OnceLock<Lookup> = OnceLock::new();
    *CHOSEN.get_or_init(|| {
        match openat2(
            root.as_fd(),
            ".",
            OFlags::PATH | OFlags::DIRECTORY,
            Mode::empty(),
        ) {
            Err(e) if matches!(Errno::from_io_error(&e), Some(Errno::NOSYS | Errno::PERM)) => {
                Lookup::Walk
            }
            _ => Lookup::Openat2,
        }
    })
}

/// Opens `parts` beneath `dir` with `flags`, refusing every symlink on the way
/// (ELOOP). No parts means `dir` itself.
fn open_beneath(
    dir: BorrowedFd<'_>,
    parts: &[&str],
    flags: OFlags,
    mode: Mode,
    lookup: Lookup,
) -> io::Result<OwnedFd> {
    let Some((last, folders)) = parts.split_last() else {
        return sys_openat(dir, ".", flags, mode);
    };
    if lookup == Lookup::Openat2 {
        return openat2(dir, &parts.join("/"), flags, mode);
    }
    let mut current: Option<OwnedFd> = None;
    for name in folders {
        let at = current.as_ref().map_or(dir, AsFd::as_fd);
        current = Some(openat_nofollow(
            at,
            name,
            OFlags::PATH | OFlags::DIRECTORY,
            Mode::empty(),
        )?);
    }
    openat_nofollow(current.as_ref().map_or(dir, AsFd::as_fd), last, flags, mode)
}

/// One component with `O_NOFOLLOW`. With `O_PATH | O_DIRECTORY` a symlink
/// gives ENOTDIR; it is reported as ELOOP like everywhere else.
fn openat_nofollow(
    dir: BorrowedFd<'_>,
    name: &str,
    flags: OFlags,
    mode: Mode,
) -> io::Result<OwnedFd> {
    sys_openat(dir, name, flags | OFlags::NOFOLLOW, mode).map_err(|e| {
        if Errno::from_io_error(&e) == Some(Errno::NOTDIR) && is_symlink(dir, name) {
            Errno::LOOP.into()
        } else {
            e
        }
    })
}

/// Whether `name` in `dir` is itself a symlink (not followed).
fn is_symlink(dir: BorrowedFd<'_>, name: &str) -> bool {
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|stat| FileType::from_raw_mode(stat.st_mode) == FileType::Symlink)
}

/// `openat2` resolving beneath `dir` only, refusing every symlink (magic
/// `/proc` links included) on the way; close-on-exec.
fn openat2(dir: BorrowedFd<'_>, path: &str, flags: OFlags, mode: Mode) -> io::Result<OwnedFd> {
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    Ok(retry_on_intr(|| {
        rustix::fs::openat2(dir, path, flags | OFlags::CLOEXEC, mode, resolve)
    })?)
}

/// `openat` with close-on-exec, retried when a signal interrupts it.
fn sys_openat<P: rustix::path::Arg + Copy>(
    dir: BorrowedFd<'_>,
    path: P,
    flags: OFlags,
    mode: Mode,
) -> io::Result<OwnedFd> {
    Ok(retry_on_intr(|| {
        rustix::fs::openat(dir, path, flags | OFlags::CLOEXEC, mode)
    })?)
}

/// Makes the folder `name` in `dir`; one that exists already is fine.
fn mkdirat(dir: BorrowedFd<'_>, name: &str) -> io::Result<()> {
    match rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(0o777)) {
        // Made meanwhile (by the container?): the open that follows decides.
        Ok(()) | Err(Errno::EXIST) => Ok(()),
        Err(e) => Err(e.into()),
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

#[cfg(test)]
mod tests;
