//! The `none` backend: no sandbox. Commands run on the host with `bash -c`, in
//! the run's work folder — a copy of the project, or an overlay of it in a
//! mount namespace of its own ([`holder`]) — with an environment built from nothing (so no API key
//! or token of the user's shell reaches the model's commands), in their own
//! process group so that a timeout or a cancelled step kills everything they
//! started. Output is captured concurrently and capped in memory.
//!
//! A step leaves nothing running: when the command exits, whatever it left in
//! its process group (background jobs) is killed too. With no container around
//! them, such processes would keep changing the work copy after the step's
//! commit and outlive the run on the host.

pub mod holder;

pub use super::capture::{HEAD_BYTES, TAIL_BYTES};

use std::ffi::OsString;
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::{Pin, pin};
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use rustix::process::{Pid, Signal};
use tokio::process::{Child, Command};
use tokio::time::Instant;

use super::capture::{Capture, pump};
use super::podman::OverlayDirs;
use super::{Backend, BackendKind, Changed, Program, Spawned, View};
use ah_tools::ExecOutput;

/// How long a timed-out command gets between SIGTERM and SIGKILL.
pub const KILL_GRACE: Duration = Duration::from_secs(2);

/// How long to wait for the pipes to close after the process group is gone
/// (a process that left the group with `setsid` may still hold them).
const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(1);

/// PATH for commands when ah's own environment has none.
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Runs commands directly on the host, in the work directory.
#[derive(Debug, Clone)]
pub struct NoneBackend {
    work_dir: PathBuf,
    overlay: Option<Arc<Overlay>>,
}

/// The none backend's overlay: its namespace, and its folders.
#[derive(Debug)]
struct Overlay {
    namespace: std::sync::Mutex<holder::Namespace>,
    dirs: OverlayDirs,
}

impl NoneBackend {
    /// Commands run in the work copy `work_dir`.
    pub fn new(work_dir: impl Into<PathBuf>) -> NoneBackend {
        NoneBackend {
            work_dir: work_dir.into(),
            overlay: None,
        }
    }

    /// Commands run in `namespace`, whose overlay with the folders `dirs`
    /// is mounted on `work_dir`.
    pub fn over(
        work_dir: impl Into<PathBuf>,
        namespace: holder::Namespace,
        dirs: OverlayDirs,
    ) -> NoneBackend {
        NoneBackend {
            work_dir: work_dir.into(),
            overlay: Some(Arc::new(Overlay {
                namespace: std::sync::Mutex::new(namespace),
                dirs,
            })),
        }
    }

    /// A command for `program` in the work folder (inside the overlay's
    /// namespaces, for an overlay).
    fn command(&self, program: &str) -> Command {
        match &self.overlay {
            Some(overlay) => overlay.lock().command(program),
            None => {
                let mut command = Command::new(program);
                command.current_dir(&self.work_dir);
                command
            }
        }
    }

    pub fn work_dir(&self) -> &Path {
        &self.work_dir
    }
}

#[async_trait::async_trait]
impl Backend for NoneBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::None
    }

    async fn exec(&self, command: &str, timeout: Duration) -> io::Result<ExecOutput> {
        let mut cmd = self.command("bash");
        cmd.arg("-c")
            .arg(command)
            .env_clear()
            .envs(clean_env(&self.work_dir));
        run_in_group(cmd, timeout).await.map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("running bash in {}: {e}", self.work_dir.display()),
            )
        })
    }

    async fn view(&self) -> io::Result<View> {
        Ok(match &self.overlay {
            Some(overlay) => View {
                root: overlay.lock().view()?,
                changed: Changed::Within(overlay.dirs.upper.clone()),
            },
            None => View {
                root: self.work_dir.clone(),
                changed: Changed::Anywhere,
            },
        })
    }

    /// Starts `program` on the host, in the work copy, with the commands'
    /// clean environment and `program.env`, as the leader of a process
    /// group of its own (a command's end does not reach it).
    async fn spawn(&self, program: &Program<'_>) -> io::Result<Spawned> {
        let mut cmd = self.command(program.command);
        cmd.args(program.args)
            .env_clear()
            .envs(clean_env(&self.work_dir))
            .envs(program.env.iter().map(|(name, value)| (name, value)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        cmd.spawn()
            .map(|child| Spawned::new(child, 0))
            .map_err(|e| io::Error::new(e.kind(), format!("cannot start {}: {e}", program.command)))
    }

    /// Ends an overlay's namespace (its mount goes with it) and removes
    /// its scratch folder and mount point; the upper folder is the run's.
    async fn shutdown(&self) -> io::Result<()> {
        let Some(overlay) = &self.overlay else {
            return Ok(());
        };
        overlay.lock().end();
        if overlay.dirs.work.exists() {
            holder::remove_scratch(&overlay.dirs.work)?;
        }
        match std::fs::remove_dir(&self.work_dir) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

impl Overlay {
    fn lock(&self) -> std::sync::MutexGuard<'_, holder::Namespace> {
        self.namespace
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The whole environment of a command: nothing of ah's own environment but
/// PATH, so no secret can leak into it.
fn clean_env(work_dir: &Path) -> Vec<(&'static str, OsString)> {
    let path = std::env::var_os("PATH")
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| DEFAULT_PATH.into());
    vec![
        ("PATH", path),
        ("HOME", work_dir.as_os_str().to_owned()),
        ("LANG", "C.UTF-8".into()),
        ("TERM", "dumb".into()),
    ]
}

/// Runs `command` as the leader of a new process group with stdin closed and
/// stdout/stderr captured (capped, see [`HEAD_BYTES`]). When `timeout` passes
/// the group gets SIGTERM, then SIGKILL after [`KILL_GRACE`]; the output so far
/// is returned with `timed_out` set. Dropping the returned future kills the
/// group.
pub async fn run_in_group(mut command: Command, timeout: Duration) -> io::Result<ExecOutput> {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = command.spawn()?;
    let pid = child
        .id()
        .ok_or_else(|| io::Error::other("the command exited before ah could read its pid"))?;
    let mut group = GroupGuard {
        pgid: i32::try_from(pid)
            .ok()
            .and_then(Pid::from_raw)
            .ok_or_else(|| {
                io::Error::other(format!("the command's process id {pid} is out of range"))
            })?,
        armed: true,
    };
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| io::Error::other("stdout of the command was not captured"))?;
    let stderr = child
        .stderr
        .take()
        .ok_or_else(|| io::Error::other("stderr of the command was not captured"))?;

    let mut out = Capture::default();
    let mut err = Capture::default();
    let (status, timed_out) = {
        let mut reading = pin!(async {
            let (a, b) = tokio::join!(pump(stdout, &mut out), pump(stderr, &mut err));
            a.and(b)
        });
        let mut read_result = None;
        let mut status = wait_until(
            &mut child,
            reading.as_mut(),
            &mut read_result,
            Instant::now() + timeout,
        )
        .await?;
        let timed_out = status.is_none();
        if timed_out {
            group.signal(Signal::TERM);
            status = wait_until(
                &mut child,
                reading.as_mut(),
                &mut read_result,
                Instant::now() + KILL_GRACE,
            )
            .await?;
        }
        // Whatever is left in the group dies now: the command itself after the
        // grace period, or background jobs it started.
        group.signal(Signal::KILL);
        let status = match status {
            Some(status) => status,
            None => child.wait().await?,
        };
        if read_result.is_none() {
            read_result = tokio::time::timeout(DRAIN_AFTER_EXIT, reading).await.ok();
        }
        if let Some(Err(e)) = read_result {
            return Err(e);
        }
        (status, timed_out)
    };
    group.armed = false;

    let (stdout, out_dropped) = out.finish();
    let (stderr, err_dropped) = err.finish();
    Ok(ExecOutput {
        stdout,
        stderr,
        exit_code: if timed_out { None } else { status.code() },
        timed_out,
        dropped_bytes: out_dropped + err_dropped,
        memory_limit_hit: None,
    })
}

/// Waits for the child to exit until `deadline`, reading its output meanwhile
/// so that it never blocks on a full pipe. `None` when the deadline passed.
async fn wait_until<F>(
    child: &mut Child,
    mut reading: Pin<&mut F>,
    read_result: &mut Option<io::Result<()>>,
    deadline: Instant,
) -> io::Result<Option<ExitStatus>>
where
    F: Future<Output = io::Result<()>>,
{
    let sleep = tokio::time::sleep_until(deadline);
    let mut sleep = pin!(sleep);
    loop {
        tokio::select! {
            status = child.wait() => return status.map(Some),
            result = reading.as_mut(), if read_result.is_none() => *read_result = Some(result),
            () = &mut sleep => return Ok(None),
        }
    }
}

/// Kills the process group when dropped while armed, so that a cancelled step
/// (its future dropped) or an error leaves nothing running.
struct GroupGuard {
    pgid: Pid,
    armed: bool,
}

impl GroupGuard {
    fn signal(&self, signal: Signal) {
        // An empty group (ESRCH) is fine.
        let _ = rustix::process::kill_process_group(self.pgid, signal);
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if self.armed {
            self.signal(Signal::KILL);
        }
    }
}

#[cfg(test)]
mod tests;
