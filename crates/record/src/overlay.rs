//! The overlay work copy of a podman run. The container's `/work` is an
//! overlay whose lower layer is the project itself and whose upper folder
//! (`upper/` in the run directory) receives every change: nothing is copied
//! before the run, the project is never written, and a step is recorded from
//! what the upper folder holds ([`crate::shadow::Layers`]).
//!
//! Before the container starts, whiteouts (character devices 0/0, which
//! overlayfs reads as "deleted") in the upper folder hide what the container
//! must not see of the project: its `.git` and `.ah`, the files the read
//! policy withholds, and entries git cannot record. The folders leading to a
//! whiteout are made in the upper folder with the mode and owner of the
//! project's, since the merged view shows the upper folder's.

use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;

use ah_sandbox::podman::OverlayDirs;

use rustix::fs::{FileType, Gid, Mode, OFlags, Uid};

/// An overlay work copy: the project it lies over, and its folders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlay {
    /// The lower layer: the project itself.
    pub project: std::path::PathBuf,
    pub dirs: OverlayDirs,
}

/// Makes the empty upper and work folders for `project` and hides `hidden`
/// (paths relative to the project) from the merged view.
pub fn prepare(project: &Path, dirs: &OverlayDirs, hidden: &[Vec<u8>]) -> io::Result<()> {
    for dir in [&dirs.upper, &dirs.work] {
        std::fs::create_dir(dir)?;
    }
    let open = |path: &Path| {
        rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
    };
    let lower = open(project)?;
    let upper = open(&dirs.upper)?;
    same_owner_and_mode(&lower, &upper)?;
    for path in hidden {
        whiteout(&lower, &upper, path)?;
    }
    Ok(())
}

/// Hides `path` of the lower layer with a whiteout in the upper folder.
fn whiteout(lower: &OwnedFd, upper: &OwnedFd, path: &[u8]) -> io::Result<()> {
    let mut parts: Vec<&[u8]> = path.split(|&b| b == b'/').collect();
    let Some(name) = parts.pop() else {
        return Ok(());
    };
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let (mut lower, mut upper) = (lower.try_clone()?, upper.try_clone()?);
    for part in parts {
        let lower_dir = rustix::fs::openat(&lower, part, flags, Mode::empty())?;
        match rustix::fs::mkdirat(&upper, part, Mode::from_raw_mode(0o700)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(e) => return Err(e.into()),
        }
        let upper_dir = rustix::fs::openat(&upper, part, flags, Mode::empty())?;
        same_owner_and_mode(&lower_dir, &upper_dir)?;
        (lower, upper) = (lower_dir, upper_dir);
    }
    match rustix::fs::mknodat(&upper, name, FileType::CharacterDevice, Mode::empty(), 0) {
        Ok(()) | Err(rustix::io::Errno::EXIST) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Gives the upper folder `upper` the owner and mode of the lower `lower`.
fn same_owner_and_mode(lower: &OwnedFd, upper: &OwnedFd) -> io::Result<()> {
    let stat = rustix::fs::fstat(lower)?;
    let uid = Uid::from_raw(stat.st_uid);
    let gid = Gid::from_raw(stat.st_gid);
    match rustix::fs::fchown(upper, Some(uid), Some(gid)) {
        Ok(()) => {}
        // Someone else's folder, for an unprivileged user: the container
        // could not write there either.
        Err(rustix::io::Errno::PERM) => return Ok(()),
        Err(e) => return Err(e.into()),
    }
    rustix::fs::fchmod(upper, Mode::from_raw_mode(stat.st_mode & 0o7777))?;
    Ok(())
}
