//! Whether a run is live: the ah process running it holds an exclusive lock
//! on `<run>/live.lock` from the start of the run to its end. The kernel
//! drops the lock when the process exits, however it exits, so a crashed
//! run never looks live, and no process id can be mistaken for another.

use std::fs::{File, OpenOptions, TryLockError};
use std::io;

use super::{Result, RunDir, io_err};

/// The lock file's name in a run directory.
pub(super) const LOCK_FILE: &str = "live.lock";

/// Held while a run is going; dropping it ends the run's liveness.
#[derive(Debug)]
pub struct LiveLock {
    file: File,
}

impl LiveLock {
    /// Another handle on the held lock, for a process that must keep the
    /// run live after this one has exited (the sandbox's cleanup, as its
    /// standard input): the lock holds while either handle is open.
    pub fn share(&self) -> io::Result<File> {
        self.file.try_clone()
    }
}

/// What can be told about a run directory's process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    /// A process holds the run's lock.
    Live,
    /// No process holds it: the run ended (or its process died).
    Ended,
    /// The run has neither a lock file nor a manifest: it is being created
    /// this very moment, or was left by a crash before it started. Treated
    /// as live by anything that would remove it.
    Unknown,
}

impl RunDir {
    /// Marks the run as live until the returned lock is dropped. Waits for
    /// an `ah runs prune` that is looking at the run at the same moment.
    pub fn hold_live(&self) -> Result<LiveLock> {
        let path = self.path.join(LOCK_FILE);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io_err("create", &path))?;
        file.lock().map_err(io_err("lock", &path))?;
        Ok(LiveLock { file })
    }

    /// Whether a process is running this run. A run without a lock file
    /// was made by an older ah, which wrote the manifest at the run's end:
    /// with a manifest it has ended; without one nothing can be told.
    pub fn liveness(&self) -> Result<Liveness> {
        let path = self.path.join(LOCK_FILE);
        let file = match File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Ok(if self.manifest_path().is_file() {
                    Liveness::Ended
                } else {
                    Liveness::Unknown
                });
            }
            Err(e) => return Err(io_err("open", &path)(e)),
        };
        match file.try_lock_shared() {
            Ok(()) => Ok(Liveness::Ended),
            Err(TryLockError::WouldBlock) => Ok(Liveness::Live),
            Err(TryLockError::Error(e)) => Err(io_err("lock", &path)(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_is_live_and_a_dropped_one_has_ended() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::create(dir.path()).unwrap();
        assert_eq!(run.liveness().unwrap(), Liveness::Unknown);
        let lock = run.hold_live().unwrap();
        assert_eq!(run.liveness().unwrap(), Liveness::Live);
        drop(lock);
        assert_eq!(run.liveness().unwrap(), Liveness::Ended);
    }

    #[test]
    fn an_older_run_with_a_manifest_has_ended() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::create(dir.path()).unwrap();
        std::fs::write(run.manifest_path(), "{}").unwrap();
        assert_eq!(run.liveness().unwrap(), Liveness::Ended);
    }
}
