//! The container's init (PID 1: ah's own, `ah __sandbox-init`, from the
//! agent's copy, else catatonit) and the command channel's agent (`ah
//! __sandbox-agent`) run from execute-only copies.
//!
//! Every process in the container runs as the same user as PID 1, and the
//! kernel lets a same-user process without `CAP_SYS_PTRACE` ptrace another
//! and read its `/proc/<pid>/mem` and `environ`, unless that process is
//! non-dumpable (issue 13 §8: a command could take over the init that
//! reaps and outlives every step). An `exec` of a file its process cannot
//! read makes that process non-dumpable, and the container's processes
//! have no capability to read past a file's mode: so the host's catatonit
//! is copied to a private folder with mode `--x--x--x` and mounted from
//! there. Unlike a seccomp rule against `ptrace`, this also closes
//! `/proc/1/mem` (an `open`, not a `ptrace`), and it leaves `gdb` and
//! `strace` working on the commands' own processes. The copy belongs to the
//! caller: rootless podman cannot `exec` a file of another owner that the
//! caller cannot read.

use std::fs::{self, Permissions};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::cleanup::{Makers, StartDir};

/// Execute for everyone, read and write for no one.
const MODE: u32 = 0o111;

/// An execute-only copy of a program; removed when dropped, so it must live
/// as long as the container (a restart runs the init again, a broken
/// channel the agent). A start abandoned before its container was made
/// leaves it to the cleanup (see [`StartDir`]).
#[derive(Debug)]
pub(super) struct ExecOnly {
    _dir: StartDir,
    path: PathBuf,
}

impl ExecOnly {
    /// Copies `program` to a new private folder named `<name>-…`, as
    /// `name`.
    pub(super) fn copy(program: &Path, name: &str, makers: &Makers) -> std::io::Result<ExecOnly> {
        let dir = StartDir::new(&format!("{name}-"), makers)?;
        let path = dir.path().join(name);
        fs::copy(program, &path)?;
        fs::set_permissions(&path, Permissions::from_mode(MODE))?;
        Ok(ExecOnly { _dir: dir, path })
    }

    /// The copy, to mount at [`INIT_PATH`](super::INIT_PATH) or
    /// [`AGENT_PATH`](super::AGENT_PATH).
    pub(super) fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_copy_is_execute_only_and_goes_with_its_owner() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let host = dir.path().join("catatonit");
        fs::write(&host, "#!/bin/sh\n").unwrap_or_else(|e| panic!("{e}"));
        let init =
            ExecOnly::copy(&host, "ah-init", &Makers::default()).unwrap_or_else(|e| panic!("{e}"));
        let meta = fs::metadata(init.path()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(meta.permissions().mode() & 0o7777, MODE);
        let copy = init.path().to_path_buf();
        drop(init);
        assert!(!copy.exists());
    }
}
