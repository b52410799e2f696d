//! ah's init: `ah __sandbox-init`, PID 1 of a local container, run from
//! the execute-only copy of ah mounted at [`INIT_PATH`]. It starts the
//! command channel's agent on its own stdin, stdout and stderr (which
//! `podman run -i` connects to the host), lets go of them, and then only
//! reaps the processes the kernel gives it, for the container's life: the
//! container starts with its agent, and no `podman exec` is needed to open
//! the channel (~100 ms of CPU per start, and most of what eight attempts
//! starting at once wait for on two cores).
//!
//! It outlives its agent: a command that kills the agent leaves the
//! container running; the init tells the host so, with the agent's status,
//! in a last frame on the channel ([`Frame::Gone`]: podman keeps the
//! channel open while the container runs), and the host opens a new agent
//! with `podman exec` as before. It installs no signal handler and blocks no signal, so the
//! kernel drops every signal a process of the container sends it (even
//! KILL: it is the namespace's init); from the host, podman's KILL ends it
//! (`podman rm -f -t 0`, `podman restart -t 0`). Like the agent it is
//! non-dumpable: the commands (same uid) cannot trace it or reach its
//! descriptors through `/proc`.

use std::os::fd::OwnedFd;
use std::process::Command;
use std::time::Duration;

use rustix::io::Errno;
use rustix::process::{DumpableBehavior, WaitOptions, WaitStatus};

use super::agent;
use super::frame::{Exit, Frame, Status};
use crate::podman::{AGENT_PATH, INIT_PATH};

/// The hidden subcommand that runs the init.
pub const COMMAND: &str = "__sandbox-init";

/// How long the init sleeps when it has no child to wait for: an orphan
/// that ends meanwhile stays a zombie at most this long.
const IDLE: Duration = Duration::from_millis(100);

/// Runs the init; returns only when it refuses to (not PID 1) or cannot
/// protect itself, with the process's exit code.
pub fn main() -> i32 {
    if std::process::id() != 1 {
        eprintln!(
            "ah: {COMMAND} refused to start: it is the init of ah's sandbox and runs only as \
             PID 1 there (from {INIT_PATH})"
        );
        return 2;
    }
    if let Err(err) = rustix::process::set_dumpable_behavior(DumpableBehavior::NotDumpable) {
        eprintln!("ah: {COMMAND} could not protect itself (prctl: {err})");
        return 1;
    }
    // The agent gets the channel; the init keeps only a way to say when
    // the agent ended, so that nothing else of it holds the channel.
    let agent = match Command::new(AGENT_PATH).arg(agent::COMMAND).spawn() {
        Ok(agent) => Some(agent.id()),
        Err(err) => {
            eprintln!("ah: {COMMAND} could not start the agent {AGENT_PATH} ({err})");
            None
        }
    };
    let mut channel = rustix::io::dup(rustix::stdio::stdout()).ok();
    let _ = let_go_of_stdio();
    loop {
        match rustix::process::wait(WaitOptions::empty()) {
            Ok(Some((pid, status))) if Some(pid.as_raw_nonzero().get().unsigned_abs()) == agent => {
                if let Some(channel) = channel.take() {
                    say_gone(&channel, status);
                }
            }
            Ok(_) | Err(Errno::INTR) => {}
            Err(_) => std::thread::sleep(IDLE),
        }
    }
}

/// Writes [`Frame::Gone`] with the agent's `status` on `channel`.
fn say_gone(channel: &OwnedFd, status: WaitStatus) {
    let status = match (status.exit_status(), status.terminating_signal()) {
        (Some(code), _) => Status::Code(code),
        (None, Some(signal)) => Status::Signal(signal),
        (None, None) => Status::Code(-1),
    };
    let frame = Frame::Gone(Exit {
        status,
        clean: false,
        memory: None,
    });
    let _ = rustix::io::write(channel, &frame.encode());
}

/// Points stdin, stdout and stderr at `/dev/null`.
fn let_go_of_stdio() -> std::io::Result<()> {
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")?;
    rustix::stdio::dup2_stdin(&null)?;
    rustix::stdio::dup2_stdout(&null)?;
    rustix::stdio::dup2_stderr(&null)?;
    Ok(())
}
