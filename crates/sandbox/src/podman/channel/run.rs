//! One command over the channel: send it, collect its output into the
//! bounded captures until its exit frame, kill it at its timeout, and,
//! should the future be dropped (Ctrl+C) while it runs, kill it from a task
//! of its own that holds the container's turn until everything has ended.

use std::io;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use tokio::sync::OwnedMutexGuard;
use tokio::time::Instant;

use super::super::Podman;
use super::super::exec::{self, RESTART_NOTE, TERM_GRACE_TENTHS};
use super::{Channel, EXIT_LIMIT, GRACE, Lane, Next};
use crate::capture::Capture;
use crate::channel::frame::{Exit, Frame, MAX_REQUEST, MemorySeen, Status};
use ah_tools::ExecOutput;

/// How far a command got, for what a drop must undo.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Nothing sent: nothing to undo.
    Idle,
    /// Part of the request may be on its way: the channel is unusable.
    Sending,
    /// The command runs: the agent can kill it.
    Running,
    /// Cleaning up from outside: the channel is gone.
    Outside,
}

/// The container's turn while a command runs, and what to do with it when
/// the future is dropped.
struct Held {
    turn: Option<OwnedMutexGuard<Lane>>,
    podman: Podman,
    container: String,
    restarted: Arc<AtomicBool>,
    phase: Phase,
    armed: bool,
}

/// How the conversation about one command ended.
enum Ended {
    Exit(Exit),
    Broken(String),
}

/// Runs `command` over the channel in `turn` (which must hold one), holding
/// the turn until everything it started has ended; with what the agent saw
/// of its memory cgroup, where it told.
pub(in super::super) async fn run(
    podman: &Podman,
    container: &str,
    turn: OwnedMutexGuard<Lane>,
    restarted: &Arc<AtomicBool>,
    command: &str,
    timeout: Duration,
) -> io::Result<(ExecOutput, Option<MemorySeen>)> {
    if command.len() > MAX_REQUEST {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "the command is {} bytes long; a command can be at most 128 KiB: write long \
                 scripts to a file first",
                command.len()
            ),
        ));
    }
    let mut held = Held {
        turn: Some(turn),
        podman: podman.clone(),
        container: container.to_string(),
        restarted: Arc::clone(restarted),
        phase: Phase::Idle,
        armed: true,
    };
    let mut out = Capture::default();
    let mut err = Capture::default();
    let (ended, timed_out) = held.converse(command, timeout, &mut out, &mut err).await;
    let memory = match &ended {
        Ended::Exit(exit) => exit.memory,
        Ended::Broken(_) => None,
    };
    let (code, note) = match ended {
        Ended::Exit(exit) => {
            let note = match exit.clean {
                true => None,
                false => held
                    .clean_outside("0")
                    .await
                    .then_some(RESTART_NOTE.to_string()),
            };
            let code = match exit.status {
                Status::Code(code) => code,
                Status::Signal(signal) => 128 + signal,
            };
            (Some(code), note)
        }
        Ended::Broken(why) => {
            let code = match held.channel() {
                Some(channel) => channel.end().await,
                None => None,
            };
            let grace = if timed_out { TERM_GRACE_TENTHS } else { "0" };
            let note = match held.clean_outside(grace).await {
                true => RESTART_NOTE.to_string(),
                false => broken_note(&why),
            };
            (code, Some(note))
        }
    };
    held.armed = false;
    let (stdout, out_dropped) = out.finish();
    let (mut stderr, err_dropped) = err.finish();
    if let Some(note) = note {
        stderr.extend_from_slice(note.as_bytes());
    }
    let output = ExecOutput {
        stdout,
        stderr,
        exit_code: if timed_out { None } else { code },
        timed_out,
        dropped_bytes: out_dropped + err_dropped,
        memory_limit_hit: None,
    };
    Ok((output, memory))
}

/// What the model is told when the channel broke but the container did not
/// need a restart.
fn broken_note(why: &str) -> String {
    format!(
        "\n[ah: the sandbox's command channel broke while this command ran ({why}; a command \
         that kills every process, or the process that ran it, does this): every process in \
         the sandbox was killed; files in /work and /tmp are kept. Run the command again if it \
         did not finish.]\n"
    )
}

impl Held {
    fn channel(&mut self) -> Option<&mut Channel> {
        self.turn.as_mut().and_then(|turn| turn.channel.as_mut())
    }

    /// Sends the command and reads its output until its exit, killing it at
    /// `timeout`; whether it timed out.
    async fn converse(
        &mut self,
        command: &str,
        timeout: Duration,
        out: &mut Capture,
        err: &mut Capture,
    ) -> (Ended, bool) {
        let Some(channel) = self.turn.as_mut().and_then(|turn| turn.channel.as_mut()) else {
            return (Ended::Broken("there was none".to_string()), false);
        };
        let mut deadline = Instant::now() + timeout;
        self.phase = Phase::Sending;
        if let Err(why) = channel.send(&Frame::Run(command.as_bytes().to_vec())).await {
            return (Ended::Broken(why), false);
        }
        self.phase = Phase::Running;
        let mut timed_out = false;
        loop {
            match channel.next(deadline).await {
                Next::Frame(Frame::Stdout(bytes)) => out.push(&bytes),
                Next::Frame(Frame::Stderr(bytes)) => err.push(&bytes),
                Next::Frame(Frame::Exit(exit)) => {
                    self.phase = Phase::Idle;
                    return (Ended::Exit(exit), timed_out);
                }
                Next::Frame(_) => {
                    let why = "it sent a frame only the host may send".to_string();
                    return (Ended::Broken(why), timed_out);
                }
                Next::Timeout if !timed_out => {
                    timed_out = true;
                    let grace_ms = u32::try_from(GRACE.as_millis()).unwrap_or(u32::MAX);
                    if let Err(why) = channel.send(&Frame::Kill { grace_ms }).await {
                        return (Ended::Broken(why), true);
                    }
                    deadline = Instant::now() + GRACE + EXIT_LIMIT;
                }
                Next::Timeout => {
                    let why = "it did not end the timed-out command".to_string();
                    return (Ended::Broken(why), true);
                }
                Next::Broken(why) => return (Ended::Broken(why), timed_out),
            }
        }
    }

    /// Drops the channel and ends every process from outside (`exec`);
    /// whether the container had to be restarted.
    async fn clean_outside(&mut self, grace_tenths: &str) -> bool {
        self.phase = Phase::Outside;
        if let Some(turn) = self.turn.as_mut() {
            turn.channel = None;
        }
        exec::end_all(&self.podman, &self.container, grace_tenths, &self.restarted).await
    }
}

impl Drop for Held {
    /// A dropped command is killed at once; the next command waits for it.
    fn drop(&mut self) {
        let Some(mut turn) = self.turn.take() else {
            return;
        };
        if !self.armed || self.phase == Phase::Idle {
            return;
        }
        let handle = tokio::runtime::Handle::try_current();
        match (self.phase, handle) {
            (Phase::Running, Ok(handle)) => {
                let podman = self.podman.clone();
                let container = self.container.clone();
                let restarted = Arc::clone(&self.restarted);
                handle.spawn(async move {
                    let ended = match turn.channel.as_mut() {
                        Some(channel) => channel.kill().await,
                        None => false,
                    };
                    if !ended {
                        turn.channel = None;
                        exec::end_all(&podman, &container, TERM_GRACE_TENTHS, &restarted).await;
                    }
                    drop(turn);
                });
            }
            _ => {
                turn.channel = None;
                exec::end_in_background(&self.podman, &self.container, turn, &self.restarted);
            }
        }
    }
}
