//! The folders ah keeps in a project are its owner's alone (mode 0700):
//! `.ah/` (the sessions' databases, the runs), `.ah/runs/` and every run
//! folder. A run folder receives what the sandbox writes (an overlay's
//! upper folder, a work copy): a set-uid file a command made there is owned
//! by root under rootful podman and by the project's owner under rootless
//! podman, so another local user who could reach it could run it as them.
//! A folder only its owner can enter keeps every such file out of reach,
//! whatever its bits. An existing project's folders, made open by an older
//! ah, are made private again at every run.

use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

use rustix::fs::{Mode, OFlags};

/// The mode of every folder ah keeps.
const PRIVATE: u32 = 0o700;

/// Makes `dir` (its parent must exist) a private folder: created with mode
/// 0700 if missing, else made 0700. A link or anything but a folder there is
/// an error: ah would not know whose folder it makes its own.
pub(super) fn private_dir(dir: &Path) -> io::Result<()> {
    match std::fs::DirBuilder::new().mode(PRIVATE).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let folder = rustix::fs::open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| match e {
        rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR => io::Error::new(
            io::ErrorKind::InvalidInput,
            "it is a link or not a folder; ah keeps its runs and sessions only in a folder of \
             its own: move it away",
        ),
        e => e.into(),
    })?;
    make_private(&folder)
}

/// Makes the run folders under `runs` (already private) private too, as
/// far as it can: `runs` itself keeps them from other users, this only
/// mends those an older ah left open. Links and files are left alone.
pub(super) fn mend_runs(runs: &Path) {
    let Ok(listing) = std::fs::read_dir(runs) else {
        return;
    };
    for entry in listing.flatten() {
        let folder = rustix::fs::open(
            entry.path(),
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        );
        if let Ok(folder) = folder {
            // Best effort (see above): a run folder of another user's stays.
            let _ = make_private(&folder);
        }
    }
}

/// Sets mode 0700 on the open folder `folder` unless it has it; the
/// umask or an older ah may have left it otherwise.
fn make_private(folder: &OwnedFd) -> io::Result<()> {
    let stat = rustix::fs::fstat(folder)?;
    if stat.st_mode & 0o7777 != PRIVATE {
        rustix::fs::fchmod(folder, Mode::from_raw_mode(PRIVATE))?;
    }
    Ok(())
}
