//! The host side of the command channel (`crate::channel`): one agent per
//! container, started by the local container's init on the stdio of the
//! `podman run -i` that made it ([`Channel::attach`]), else with `podman
//! exec -i` ([`Channel::open`]), and kept for the run, runs each command at
//! the cost of a fork instead of a `podman exec`.
//!
//! Everything the agent sends is hostile: frames are bounded in size
//! (`frame::MAX_FRAME`) and every wait is bounded in time. When the
//! channel breaks (a command killed the agent, it sent garbage or went
//! silent) the container is cleaned from outside as `exec` does (and
//! restarted as a last resort), the channel is dropped, the next command
//! opens a new one, and the command's errors say what happened. Where the
//! agent cannot start at all, the backend runs commands with `exec`.

mod run;
mod sync;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::exec;
use super::{Makers, Podman};
use crate::channel::agent;
use crate::channel::frame::{Frame, FrameError, MAX_FRAME, Status, VERSION, read_frame_async};

pub(super) use run::run;
pub(crate) use sync::{Bounds, Sink};

/// How long the agent may take to say it is ready.
const OPEN_LIMIT: Duration = Duration::from_secs(15);
/// How long a container started with its agent may take to make and to
/// say it is ready (podman makes eight at once in about a second here).
const START_LIMIT: Duration = Duration::from_secs(60);
/// The grace a timed-out or dropped command gets between TERM and KILL.
const GRACE: Duration = Duration::from_secs(2);
/// How long the agent may take, beyond the grace, to report the end of a
/// command it was told to kill (its KILL sweep gives up after 3 s).
const EXIT_LIMIT: Duration = Duration::from_secs(8);
/// How long writing one frame to the agent may take.
const SEND_LIMIT: Duration = Duration::from_secs(5);
/// How long a ping before a command may take: a channel that does not
/// answer is replaced.
const PING_LIMIT: Duration = Duration::from_secs(2);
/// Bytes kept of podman's own stderr (and the agent's) for an error.
const STDERR_CAP: usize = 4096;

/// The channel a backend keeps between commands, behind its turn lock.
#[derive(Debug, Default)]
pub(super) struct Lane {
    pub(super) channel: Option<Channel>,
    /// How many agents were started so far: a new one knows nothing of
    /// what the last one saw.
    pub(super) opened: u64,
}

/// A running agent and the frames it sent.
#[derive(Debug)]
pub(super) struct Channel {
    child: Child,
    stdin: ChildStdin,
    /// Filled by a task that owns the agent's stdout; ends with an error.
    frames: mpsc::Receiver<Result<Frame, FrameError>>,
    /// The first [`STDERR_CAP`] bytes podman (or the agent) wrote to stderr.
    stderr: Option<tokio::task::JoinHandle<Vec<u8>>>,
    /// The podman process is the `podman run` that made the container and,
    /// the agent having answered, only relays: it never ends by itself
    /// while the container runs, so it is killed when the channel ends or
    /// is dropped (never before: see [`Channel::attach`]). An exec's is
    /// killed on drop by tokio.
    relays: bool,
    /// The exit code the agent ended with, as its init said
    /// ([`Frame::Gone`]).
    gone: Option<i32>,
}

impl Drop for Channel {
    fn drop(&mut self) {
        if self.relays {
            let _ = self.child.start_kill();
        }
    }
}

/// Where the agent is in the container, and how it is started.
#[derive(Debug, Clone, Copy)]
pub(super) struct AgentAt {
    pub(super) path: &'static str,
    /// It keeps an index of `/work` and reports changes (a remote engine).
    pub(super) changes: bool,
}

/// Why no channel was opened.
#[derive(Debug)]
pub(super) enum OpenError {
    /// Podman refused the exec: the container is not running.
    Refused(String),
    /// The agent cannot run here; commands fall back on `exec`.
    Unavailable(String),
}

/// The running program's own executable, as the kernel has it: the file it
/// was started from, whatever it is named now or was named then.
const RUNNING_EXECUTABLE: &str = "/proc/self/exe";

/// The `ah` executable to run as the agent: the configured one, else the
/// running program when it answers the agent's command (it said so with
/// [`agent::answered_here`]; its name does not matter).
pub(super) fn agent_executable(configured: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(path) = configured {
        return Ok(path.to_path_buf());
    }
    if agent::is_answered_here() {
        return Ok(PathBuf::from(RUNNING_EXECUTABLE));
    }
    let exe = std::env::current_exe()
        .map_or_else(|err| format!("({err})"), |exe| exe.display().to_string());
    Err(format!(
        "the running program {exe} is not ah (it does not answer 'ah {}'), and no ah \
         executable was given",
        agent::COMMAND
    ))
}

impl Channel {
    /// Starts the agent (`agent.path`) in `container` and waits for it to
    /// be ready.
    pub(super) async fn open(
        podman: &Podman,
        container: &str,
        agent: &AgentAt,
    ) -> Result<Channel, OpenError> {
        let unavailable = |what: String| OpenError::Unavailable(what);
        let child = podman
            .command()
            .args(["exec", "-i", "--workdir=/work", container, agent.path])
            .arg(agent::COMMAND)
            .args(agent.changes.then_some(agent::CHANGES))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|err| unavailable(format!("podman exec could not run ({err})")))?;
        let mut channel = Channel::with_pipes(child).map_err(unavailable)?;
        let said = tokio::time::timeout(OPEN_LIMIT, channel.frames.recv()).await;
        match said {
            Ok(Some(Ok(Frame::Ready { version: VERSION }))) => return Ok(channel),
            Ok(Some(Ok(Frame::Ready { version }))) => {
                return Err(unavailable(format!(
                    "the agent speaks protocol {version}, this ah {VERSION}"
                )));
            }
            _ => {}
        }
        let code = channel.end().await;
        let stderr = channel.podman_said().await;
        if exec::refused(code, &stderr) {
            return Err(OpenError::Refused(format!(
                "podman exec failed: {}; the sandbox container is gone or broken: run 'ah doctor'",
                String::from_utf8_lossy(&stderr).trim()
            )));
        }
        let said = String::from_utf8_lossy(&stderr).trim().to_string();
        Err(unavailable(
            match (said.is_empty(), said.contains("GLIBC")) {
                (_, true) => format!(
                    "the ah executable cannot run in the sandbox image, whose C library is older \
                 ({said}); build ah on a system no newer than the image"
                ),
                (true, _) => "the agent did not start".to_string(),
                (false, _) => format!("the agent did not start: {said}"),
            },
        ))
    }

    /// Starts a container with `podman` and `args` (a `podman run -i`
    /// whose init starts the agent on the container's stdin and stdout,
    /// see `crate::channel::init`) and waits for the agent to be ready.
    /// `makers` hears of the `podman run`, which is not killed when the
    /// start is dropped (killed while it makes the container, podman could
    /// leave its locks held): an abandoned start's cleanup waits for it or
    /// for the container to exist. `None` when the agent did not say it is
    /// ready; the container may have been made all the same.
    pub(super) async fn attach(
        podman: &Podman,
        args: Vec<OsString>,
        makers: &Makers,
    ) -> Option<Channel> {
        let child = podman
            .command()
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .ok()?;
        if let Some(pid) = child.id() {
            makers.add(pid);
        }
        let mut channel = Channel::with_pipes(child).ok()?;
        let said = tokio::time::timeout(START_LIMIT, channel.frames.recv()).await;
        if let Ok(Some(Ok(Frame::Ready { version: VERSION }))) = said {
            // Made and answering: from now on podman only relays.
            channel.relays = true;
            return Some(channel);
        }
        channel.end().await;
        None
    }

    /// The channel over `child`'s pipes: its stdout read into frames by a
    /// task of its own, the head of its stderr kept by another.
    fn with_pipes(mut child: Child) -> Result<Channel, String> {
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err("podman started without pipes".to_string());
        };
        let (tx, frames) = mpsc::channel(16);
        tokio::spawn(async move {
            let mut stdout = BufReader::with_capacity(MAX_FRAME + 64, stdout);
            loop {
                let frame = read_frame_async(&mut stdout, MAX_FRAME).await;
                let end = frame.is_err();
                if tx.send(frame).await.is_err() || end {
                    return;
                }
            }
        });
        let stderr = tokio::spawn(keep_head(stderr));
        Ok(Channel {
            child,
            stdin,
            frames,
            stderr: Some(stderr),
            relays: false,
            gone: None,
        })
    }

    /// Whether the agent is there and idle: its `podman exec` runs and it
    /// answers a ping. Checked before each command, so that a container
    /// stopped from outside is found before a command is sent (and the
    /// command runs after a restart) rather than while it runs.
    pub(super) async fn ready(&mut self) -> bool {
        if !matches!(self.child.try_wait(), Ok(None)) || self.send(&Frame::Ping).await.is_err() {
            return false;
        }
        let deadline = Instant::now() + PING_LIMIT;
        matches!(
            self.next(deadline).await,
            Next::Frame(Frame::Ready { version: VERSION })
        )
    }

    async fn send(&mut self, frame: &Frame) -> Result<(), String> {
        let bytes = frame.encode();
        match tokio::time::timeout(SEND_LIMIT, self.stdin.write_all(&bytes)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(err)) => Err(format!("writing to it failed ({err})")),
            Err(_) => Err("it stopped reading".to_string()),
        }
    }

    async fn next(&mut self, deadline: Instant) -> Next {
        match tokio::time::timeout_at(deadline, self.frames.recv()).await {
            Err(_) => Next::Timeout,
            Ok(None) => Next::Broken("it closed".to_string()),
            Ok(Some(Err(err))) => Next::Broken(err.to_string()),
            Ok(Some(Ok(Frame::Gone(exit)))) => {
                let (code, how) = match exit.status {
                    Status::Code(code) => (code, format!("exit code {code}")),
                    Status::Signal(signal) => (128 + signal, format!("signal {signal}")),
                };
                self.gone = Some(code);
                Next::Broken(format!("the agent ended ({how})"))
            }
            Ok(Some(Ok(frame))) => Next::Frame(frame),
        }
    }

    /// Tells the agent to kill the running command and waits for its end:
    /// whether everything ended.
    async fn kill(&mut self) -> bool {
        let grace_ms = u32::try_from(GRACE.as_millis()).unwrap_or(u32::MAX);
        if self.send(&Frame::Kill { grace_ms }).await.is_err() {
            return false;
        }
        let deadline = Instant::now() + GRACE + EXIT_LIMIT;
        loop {
            match self.next(deadline).await {
                Next::Frame(Frame::Exit(exit)) => return exit.clean,
                Next::Frame(Frame::Stdout(_) | Frame::Stderr(_)) => {}
                _ => return false,
            }
        }
    }

    /// Ends the agent's `podman exec` (waiting a moment for it to exit on
    /// its own); its exit code. A container's `podman run`, which relays
    /// while the container runs, is killed at once; the code is the one
    /// the init said the agent ended with.
    async fn end(&mut self) -> Option<i32> {
        if self.relays {
            let _ = self.child.start_kill();
            return self.gone;
        }
        let waited = tokio::time::timeout(Duration::from_secs(1), self.child.wait()).await;
        if let Ok(Ok(status)) = waited {
            return status.code();
        }
        let _ = self.child.start_kill();
        None
    }

    /// What podman (or the agent) wrote to stderr, once it exited.
    async fn podman_said(&mut self) -> Vec<u8> {
        let Some(task) = self.stderr.take() else {
            return Vec::new();
        };
        match tokio::time::timeout(Duration::from_secs(2), task).await {
            Ok(Ok(head)) => head,
            _ => Vec::new(),
        }
    }
}

impl OpenError {
    /// Why commands go without the channel, for the run's notices.
    pub(super) fn reason(&self) -> String {
        match self {
            OpenError::Refused(why) | OpenError::Unavailable(why) => why.clone(),
        }
    }
}

/// Reads `stream` to its end, keeping the first [`STDERR_CAP`] bytes.
async fn keep_head(mut stream: impl tokio::io::AsyncRead + Unpin) -> Vec<u8> {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = stream.read(&mut buf).await {
        if n == 0 {
            break;
        }
        let room = STDERR_CAP.saturating_sub(head.len()).min(n);
        head.extend_from_slice(&buf[..room]);
    }
    head
}

enum Next {
    Frame(Frame),
    Timeout,
    Broken(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn podmans_stderr_is_kept_only_up_to_its_cap() {
        let said = vec![b'e'; 3 * STDERR_CAP + 17];
        let kept = keep_head(said.as_slice()).await;
        assert_eq!(kept.len(), STDERR_CAP);
        assert_eq!(
            keep_head(&b"Error: no such container\n"[..]).await.len(),
            25
        );
    }

    #[test]
    fn only_ah_runs_the_agent_unless_told() {
        let given = Path::new("/opt/ah/bin/ah-1.0");
        assert_eq!(agent_executable(Some(given)), Ok(given.to_path_buf()));
        // The unit tests run from a test binary, which is not ah.
        let refused = agent_executable(None).err().unwrap_or_default();
        assert!(refused.contains("is not ah"), "{refused}");
        // A program that answers the agent's command runs it from its own
        // executable, whatever the file's name.
        agent::answered_here();
        assert_eq!(
            agent_executable(None),
            Ok(PathBuf::from(RUNNING_EXECUTABLE))
        );
    }
}
