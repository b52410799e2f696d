//! The host's way into an overlay `/work`. The merged view exists only in
//! the mount namespace of the sandbox (the container's, or the none
//! backend's namespace holder, `none::holder`), so the host reaches it
//! through `/proc/PID/root/PATH` of a process in it — `/work` of the
//! container's init, the mount point of the holder — for the file tools,
//! the policy check and an undo (a step itself is recorded from the upper
//! folder and this view).
//!
//! A process id can be reused once its process is gone, and a root taken
//! from the wrong process would point the host at its own files. So a
//! pidfd is opened on the process first, the folder is opened through its
//! `/proc` entry, and the folder is kept only if the pidfd says the process
//! still ran after that (then the id was still its) and the folder is an
//! overlay. The open folder is given out as `/proc/self/fd/N/.`, and let go
//! before every command ([`Merged::release`]): a folder held open would keep
//! the overlay mount alive across a restart of the container, which mounts
//! the same upper folder again. It is opened again after the command, from
//! the same pidfd while the init lives, else (the container was restarted:
//! a new init, a new overlay) from scratch.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::process::{Pid, PidfdFlags};

/// `statfs` type of an overlay file system.
const OVERLAYFS_SUPER_MAGIC: rustix::fs::FsWord = 0x794c_7630;

/// The merged view of one sandbox's `/work`, held open.
#[derive(Debug)]
pub(crate) struct Merged {
    pid: Pid,
    pidfd: OwnedFd,
    /// Where the view is mounted in the process's mount namespace.
    at: PathBuf,
    root: Option<OwnedFd>,
}

impl Merged {
    /// Opens the merged view mounted at `at` (absolute) in the mount
    /// namespace of process `pid`.
    pub(crate) fn open(pid: Pid, at: &Path) -> std::io::Result<Merged> {
        let pidfd = rustix::process::pidfd_open(pid, PidfdFlags::empty())?;
        let mut merged = Merged {
            pid,
            pidfd,
            at: at.to_path_buf(),
            root: None,
        };
        merged.reopen()?;
        Ok(merged)
    }

    /// The merged view as a path the host can open folders beneath, opened
    /// again if it was let go.
    pub(crate) fn path(&mut self) -> std::io::Result<PathBuf> {
        let root = match &self.root {
            Some(root) => root,
            None => self.reopen()?,
        };
        Ok(PathBuf::from(format!(
            "/proc/self/fd/{}/.",
            root.as_raw_fd()
        )))
    }

    /// Lets the folder go (see the module's doc); the init is still known.
    pub(crate) fn release(&mut self) {
        self.root = None;
    }

    fn reopen(&mut self) -> std::io::Result<&OwnedFd> {
        let root: OwnedFd = std::fs::File::open(
            Path::new(&format!("/proc/{}/root", self.pid.as_raw_nonzero()))
                .join(self.at.strip_prefix("/").unwrap_or(&self.at)),
        )?
        .into();
        if !self.alive() {
            return Err(std::io::Error::other(
                "the sandbox stopped while its work tree was opened",
            ));
        }
        if !is_overlay(&root)? {
            return Err(std::io::Error::other(
                "the sandbox's /work is not an overlay; refusing to record from it",
            ));
        }
        Ok(self.root.insert(root))
    }

    /// Whether the process is still running.
    pub(crate) fn alive(&self) -> bool {
        // No waiting; a pidfd is readable once its process has ended (and a
        // failed poll is taken for an ended one).
        let mut fds = [PollFd::new(&self.pidfd, PollFlags::IN)];
        let now = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        matches!(rustix::event::poll(&mut fds, Some(&now)), Ok(0))
    }
}

/// Whether the open folder `dir` is on an overlay file system.
fn is_overlay(dir: &OwnedFd) -> std::io::Result<bool> {
    Ok(rustix::fs::fstatfs(dir)?.f_type == OVERLAYFS_SUPER_MAGIC)
}
