//! A long-lived program in the run's container (an MCP server): its own
//! `podman exec -i`, in `/work`, with the container's environment and the
//! program's variables added. The values are read by podman from a file
//! only the user can read (removed once the program has started:
//! [`Spawned::started`]), never from its command line (which every user
//! of the host may read). The program ends at the next command's sweep
//! (see `exec`), or with the container.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt;
use std::process::Stdio;

use super::PodmanBackend;
use crate::{Program, Spawned};

impl PodmanBackend {
    /// Starts `program` in the container; its standard streams are the
    /// returned child's.
    pub async fn spawn(&self, program: &Program<'_>) -> std::io::Result<Spawned> {
        if let Some(remote) = &self.remote {
            remote.program_starts();
        }
        let mut cmd = self.podman.command();
        cmd.args(["exec", "-i", "--workdir=/work"]);
        let keep = match program.env.is_empty() {
            true => None,
            false => {
                let dir = tempfile::Builder::new().prefix("ah-serve-").tempdir()?;
                let path = dir.path().join("env");
                let mut file = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(&path)?;
                for (name, value) in program.env {
                    writeln!(file, "{name}={value}")?;
                }
                cmd.arg(format!("--env-file={}", path.display()));
                Some(dir)
            }
        };
        cmd.arg(&self.container)
            .arg(program.command)
            .args(program.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        // Not while a command (or the end of a dropped one) runs: the
        // sweeps counted so far are all over, and the program follows them.
        let _turn = self.turns.lock().await;
        let child = cmd
            .spawn()
            .map_err(|e| std::io::Error::new(e.kind(), format!("cannot run podman exec: {e}")))?;
        Ok(Spawned {
            child,
            sweeps: self.sweeps.load(std::sync::atomic::Ordering::Relaxed),
            start_files: keep,
        })
    }
}
