//! The host's way into an overlay `/work`. The merged view exists only in
//! the container's mount namespace, so the host reaches it through
//! `/proc/PID/root/work` of the container's init, for the file tools, the
//! policy check and an undo (a step itself is recorded from the upper
//! folder and this view).
//!
//! A process id can be reused once its process is gone, and a root taken
//! from the wrong process would point the host at its own files. So a
//! pidfd is opened on the init first, the folder is opened through its
//! `/proc` entry, and the folder is kept only if the pidfd says the init
//! still ran after that (then the id was still its) and the folder is an
//! overlay. The open folder is given out as `/proc/self/fd/N/.`, and let go
//! before every command ([`Merged::release`]): a folder held open would keep
//! the overlay mount alive across a restart of the container, which mounts
//! the same upper folder again. It is opened again after the command, from
//! the same pidfd while the init lives, else (the container was restarted:
//! a new init, a new overlay) from scratch.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::process::{Pid, PidfdFlags};

use super::Podman;

/// `statfs` type of an overlay file system.
const OVERLAYFS_SUPER_MAGIC: rustix::fs::FsWord = 0x794c_7630;

/// The merged view of one container's `/work`, held open.
#[derive(Debug)]
pub(super) struct Merged {
    pid: Pid,
    pidfd: OwnedFd,
    root: Option<OwnedFd>,
}

impl Merged {
    /// Opens the merged view of `container`'s `/work`.
    pub(super) async fn open(podman: &Podman, container: &str) -> std::io::Result<Merged> {
        let output = podman
            .command()
            .args(["inspect", "--format", "{{.State.Pid}}", container])
            .stdin(std::process::Stdio::null())
            .output()
            .await?;
        let text = String::from_utf8_lossy(&output.stdout);
        let pid = match text.trim().parse::<i32>() {
            Ok(pid) if output.status.success() && pid > 0 => Pid::from_raw(pid),
            _ => None,
        };
        let Some(pid) = pid else {
            return Err(std::io::Error::other(format!(
                "the sandbox container is not running (podman inspect: {}{})",
                text.trim(),
                String::from_utf8_lossy(&output.stderr).trim()
            )));
        };
        let pidfd = rustix::process::pidfd_open(pid, PidfdFlags::empty())?;
        let mut merged = Merged {
            pid,
            pidfd,
            root: None,
        };
        merged.reopen()?;
        Ok(merged)
    }

    /// The merged view as a path the host can open folders beneath, opened
    /// again if it was let go.
    pub(super) fn path(&mut self) -> std::io::Result<PathBuf> {
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
    pub(super) fn release(&mut self) {
        self.root = None;
    }

    fn reopen(&mut self) -> std::io::Result<&OwnedFd> {
        let root: OwnedFd =
            std::fs::File::open(format!("/proc/{}/root/work", self.pid.as_raw_nonzero()))?.into();
        if !self.alive() {
            return Err(std::io::Error::other(
                "the sandbox container stopped while its work tree was opened",
            ));
        }
        if !is_overlay(&root)? {
            return Err(std::io::Error::other(
                "the sandbox's /work is not an overlay; refusing to record from it",
            ));
        }
        Ok(self.root.insert(root))
    }

    /// Whether the init is still running.
    pub(super) fn alive(&self) -> bool {
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
