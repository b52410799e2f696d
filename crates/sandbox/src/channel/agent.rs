//! The agent: `ah __sandbox-agent`, started once per container by ah's
//! init (a local container: see `init`) or with `podman exec -i`, from an
//! execute-only copy of ah, answers the host's
//! frames on stdin with frames on stdout. For each [`Frame::Run`] it makes
//! sure nothing else is alive, runs `bash -c COMMAND` in `/work` in a new
//! process group (stdin `/dev/null`, stdout and stderr piped and forwarded
//! as frames), and when bash exits KILLs every process but PID 1 and
//! itself until none is left, then reports [`Frame::Exit`]. A
//! [`Frame::Kill`] TERMs everything, waits up to its grace, then KILLs.
//!
//! Started with [`CHANGES`] (a sandbox on another machine, whose files the
//! host cannot see), it also keeps an index of `/work` and reports what
//! commands changed there on a [`Frame::Scan`], and writes what the host
//! sends with [`Frame::Put`] (see `changes`); each exit then says what
//! its memory cgroup saw (see `memory`).
//!
//! It ends every process it can signal, so it refuses to start anywhere but
//! in ah's sandbox ([`interlock`]), and it is non-dumpable, so the
//! commands it runs (same uid) can neither trace it nor reach its
//! descriptors through `/proc` to forge frames.

use std::ffi::OsStr;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::process::{DumpableBehavior, Pid, PidfdFlags, Signal, WaitStatus};

use super::changes::Index;
use super::frame::{Exit, Frame, FrameError, MAX_REQUEST, Status, VERSION, read_frame};
use super::memory::MemoryCgroup;
use super::sweep::{kill_all, others_alive, reap, signal_all};
use crate::podman::{INIT_PATH, SHARED_INIT_PATH};

/// The hidden subcommand that starts the agent.
pub const COMMAND: &str = "__sandbox-agent";

/// The agent's flag that makes it report the changes of `/work`.
pub const CHANGES: &str = "--changes";

/// Set once the running program has said that it answers [`COMMAND`].
static ANSWERED_HERE: AtomicBool = AtomicBool::new(false);

/// Says that the running program answers [`COMMAND`] (ah does, at its
/// start, before it reads its arguments): its own executable can then run
/// the agent in the sandbox, whatever its file is named (`ah-bin`, a
/// versioned copy). A program that never says so (a test binary, another
/// tool linking this crate) is not copied into the sandbox as the agent.
pub fn answered_here() {
    ANSWERED_HERE.store(true, Ordering::Relaxed);
}

/// Whether the running program said it answers [`COMMAND`]
/// ([`answered_here`]).
pub(crate) fn is_answered_here() -> bool {
    ANSWERED_HERE.load(Ordering::Relaxed)
}
/// Output bytes per frame.
const CHUNK: usize = 32 * 1024;
/// How long the output pipes are read after everything was killed (a
/// process that could not be killed may still hold them).
const DRAIN_LIMIT: Duration = Duration::from_millis(500);
/// The poll period while something must be watched without a descriptor
/// (10 ms).
const TICK: Timespec = Timespec {
    tv_sec: 0,
    tv_nsec: 10_000_000,
};

/// Runs the agent on stdin and stdout (keeping the index of `/work` when
/// `changes`); the process's exit code.
pub fn main(changes: bool) -> i32 {
    if let Err(why) = interlock() {
        eprintln!(
            "ah: {COMMAND} refused to start: {why}. It ends every process it can signal, so \
             only ah starts it, inside its sandbox."
        );
        return 2;
    }
    // The execute-only copy already makes it non-dumpable; this holds also
    // where it was started from a readable file. Orphans are left to the
    // init, which reaps them at once: as their subreaper the agent would
    // collect zombies while a long command runs.
    if let Err(err) = rustix::process::set_dumpable_behavior(DumpableBehavior::NotDumpable) {
        eprintln!("ah: {COMMAND} could not protect itself (prctl: {err})");
        return 1;
    }
    let index = match changes {
        true => match Index::take(std::path::Path::new(ah_tools::path::WORK)) {
            Ok(index) => Some(index),
            Err(err) => {
                eprintln!("ah: {COMMAND}: could not read /work ({err})");
                return 1;
            }
        },
        false => None,
    };
    let mut agent = Agent {
        input: Fd(io::stdin()),
        output: Fd(io::stdout()),
        me: std::process::id(),
        index,
        // Only a host that cannot see the sandbox's files cannot see its
        // cgroups either.
        memory: changes
            .then(|| MemoryCgroup::find(std::path::Path::new("/sys/fs/cgroup")))
            .flatten(),
    };
    let served = agent.serve();
    kill_all(agent.me, &mut || {
        reap(None);
    });
    match served {
        Ok(()) | Err(FrameError::Closed) => 0,
        Err(err) => {
            eprintln!("ah: {COMMAND}: {err}");
            1
        }
    }
}

/// Refuses unless this process runs inside ah's sandbox: PID 1 must be
/// ah's init, run from [`INIT_PATH`] (a local container's bind mount) or
/// from [`SHARED_INIT_PATH`] (the folder a remote engine or a Pod fills),
/// and this process must not be PID 1. Run by accident on a host, the
/// agent would otherwise kill every process of its user.
pub fn interlock() -> Result<(), String> {
    let cmdline = std::fs::read("/proc/1/cmdline")
        .map_err(|err| format!("cannot read /proc/1/cmdline ({err})"))?;
    if inside_sandbox(&cmdline, std::process::id()) {
        Ok(())
    } else {
        Err(format!(
            "PID 1 is neither {INIT_PATH} nor {SHARED_INIT_PATH}: this is not ah's sandbox"
        ))
    }
}

/// Whether `init_cmdline` (PID 1's `/proc/1/cmdline`) is ah's init, at
/// one of its two fixed paths, and `pid` is not PID 1.
pub fn inside_sandbox(init_cmdline: &[u8], pid: u32) -> bool {
    let program = init_cmdline.split(|b| *b == 0).next();
    pid != 1
        && [INIT_PATH, SHARED_INIT_PATH]
            .iter()
            .any(|path| program == Some(path.as_bytes()))
}

/// A descriptor read and written with one system call each, past any
/// buffer of std's, so `poll` on it tells the truth.
struct Fd<T: AsFd>(T);

impl<T: AsFd> Read for Fd<T> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        Ok(rustix::io::read(&self.0, buf)?)
    }
}

impl<T: AsFd> Write for Fd<T> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Ok(rustix::io::write(&self.0, buf)?)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

struct Agent {
    input: Fd<io::Stdin>,
    output: Fd<io::Stdout>,
    me: u32,
    /// What `/work` held at the last report (with [`CHANGES`]).
    index: Option<Index>,
    /// The memory cgroup each exit tells of (with [`CHANGES`]), where one
    /// can be read.
    memory: Option<MemoryCgroup>,
}

impl Agent {
    fn send(&mut self, frame: &Frame) -> Result<(), FrameError> {
        self.output
            .write_all(&frame.encode())
            .map_err(FrameError::Io)
    }

    fn serve(&mut self) -> Result<(), FrameError> {
        self.send(&Frame::Ready { version: VERSION })?;
        loop {
            self.idle()?;
            match read_frame(&mut self.input, MAX_REQUEST)? {
                Frame::Run(command) => {
                    let exit = self.run(&command)?;
                    self.send(&Frame::Exit(exit))?;
                }
                // Nothing runs: the exit it asks for is on its way.
                Frame::Kill { .. } => {}
                Frame::Ping => self.send(&Frame::Ready { version: VERSION })?,
                Frame::Scan => self.scan()?,
                Frame::Put(entry) => self.put(&entry)?,
                Frame::Synced => self.send(&Frame::Done {
                    entries: 0,
                    error: None,
                })?,
                _ => return Err(FrameError::Malformed("request")),
            }
        }
    }

    /// Waits for the host's next frame, reading inotify's events meanwhile
    /// (a program beside the commands may be changing `/work`).
    fn idle(&mut self) -> Result<(), FrameError> {
        loop {
            let events = self.index.as_ref().and_then(Index::events);
            if events.is_none() {
                return Ok(());
            }
            let ready = poll(Some(&self.input), &[None, None], None, events, None)?;
            if ready.events {
                self.note_changes();
            }
            if ready.input {
                return Ok(());
            }
        }
    }

    /// Notes the paths inotify's waiting events name.
    fn note_changes(&mut self) {
        if let Some(index) = self.index.as_mut() {
            index.drain();
        }
    }

    /// Reports what changed in `/work` since the last report.
    fn scan(&mut self) -> Result<(), FrameError> {
        let Some(mut index) = self.index.take() else {
            return self.send(&Frame::Done {
                entries: 0,
                error: Some(format!("the agent was not started with {CHANGES}")),
            });
        };
        let output = &mut self.output;
        let scanned =
            index.scan(&mut |frame| output.write_all(&frame.encode()).map_err(FrameError::Io));
        self.index = Some(index);
        let done = match scanned? {
            Ok(entries) => Frame::Done {
                entries,
                error: None,
            },
            Err(error) => Frame::Done {
                entries: 0,
                error: Some(error),
            },
        };
        self.send(&done)
    }

    /// Writes one of the host's changes; a failure is told at the next
    /// [`Frame::Synced`]'s answer, in place of its own.
    fn put(&mut self, entry: &super::frame::Entry) -> Result<(), FrameError> {
        let input = &mut self.input;
        let mut data = || match read_frame(input, MAX_REQUEST)? {
            Frame::Data(bytes) => Ok(bytes),
            _ => Err(FrameError::Malformed("data")),
        };
        let written = match self.index.as_mut() {
            Some(index) => index.put(entry, &mut data)?,
            None => Err(format!("the agent was not started with {CHANGES}")),
        };
        match written {
            Ok(()) => Ok(()),
            Err(error) => {
                // Every put after it is read and refused with it.
                self.failed_put(error)
            }
        }
    }

    /// Reads the host's frames up to its [`Frame::Synced`] and answers it
    /// with `error`.
    fn failed_put(&mut self, error: String) -> Result<(), FrameError> {
        loop {
            match read_frame(&mut self.input, MAX_REQUEST)? {
                Frame::Synced => {
                    return self.send(&Frame::Done {
                        entries: 0,
                        error: Some(error),
                    });
                }
                Frame::Put(_) | Frame::Data(_) => {}
                _ => return Err(FrameError::Malformed("request")),
            }
        }
    }

    /// Runs one command to its end and the end of everything it started.
    fn run(&mut self, command: &[u8]) -> Result<Exit, FrameError> {
        let me = self.me;
        let mut clean = !others_alive(me)
            || kill_all(me, &mut || {
                reap(None);
            });
        let kills_before = self.memory.as_ref().and_then(MemoryCgroup::kills);
        let memory = |agent: &Agent| agent.memory.as_ref()?.seen(kills_before);
        let spawned = Command::new("bash")
            .arg("-c")
            .arg(OsStr::from_bytes(command))
            .current_dir(ah_tools::path::WORK)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn();
        let mut child = match spawned {
            Ok(child) => child,
            Err(err) => {
                let said = format!("ah: could not start bash in the sandbox: {err}\n");
                self.send(&Frame::Stderr(said.into_bytes()))?;
                return Ok(Exit {
                    status: Status::Code(127),
                    clean,
                    memory: memory(self),
                });
            }
        };
        let pid = Pid::from_child(&child);
        let mut pipes = [
            child.stdout.take().map(|p| (OwnedFd::from(p), true)),
            child.stderr.take().map(|p| (OwnedFd::from(p), false)),
        ];
        // Waited for through `reap`.
        drop(child);
        let pidfd = pidfd_open(pid);
        let mut status: Option<WaitStatus> = None;
        let mut ending: Option<Instant> = None;
        loop {
            if status.is_none() {
                status = reap(Some(pid));
            }
            match ending {
                None if status.is_some() => break,
                Some(deadline) if Instant::now() >= deadline || !others_alive(me) => break,
                _ => {}
            }
            let watch_pid = pidfd.as_ref().filter(|_| status.is_none());
            let timeout = match (ending, watch_pid) {
                (None, Some(_)) => None,
                _ => Some(&TICK),
            };
            let events = self.index.as_ref().and_then(Index::events);
            let ready = poll(Some(&self.input), &pipes, watch_pid, events, timeout)?;
            if ready.events {
                self.note_changes();
            }
            if ready.input {
                match read_frame(&mut self.input, MAX_REQUEST)? {
                    Frame::Kill { grace_ms } if ending.is_none() => {
                        signal_all(Signal::TERM);
                        ending = Some(Instant::now() + Duration::from_millis(grace_ms.into()));
                    }
                    Frame::Kill { .. } => {}
                    _ => return Err(FrameError::Malformed("request")),
                }
            }
            self.forward(&mut pipes, ready.pipes)?;
        }
        clean &= kill_all(me, &mut || {
            if let Some(found) = reap(Some(pid)) {
                status = Some(found);
            }
        });
        self.drain(&mut pipes)?;
        let status = match (
            status.and_then(WaitStatus::exit_status),
            status.and_then(WaitStatus::terminating_signal),
        ) {
            (Some(code), _) => Status::Code(code),
            (None, Some(signal)) => Status::Signal(signal),
            (None, None) => {
                clean = false;
                Status::Signal(Signal::KILL.as_raw())
            }
        };
        Ok(Exit {
            status,
            clean,
            memory: memory(self),
        })
    }

    /// Reads the pipes `ready` marks and forwards what they hold; a pipe at
    /// its end is closed.
    fn forward(
        &mut self,
        pipes: &mut [Option<(OwnedFd, bool)>; 2],
        ready: [bool; 2],
    ) -> Result<(), FrameError> {
        let mut buf = vec![0u8; CHUNK];
        for (slot, ready) in pipes.iter_mut().zip(ready) {
            let Some((fd, is_stdout)) = slot.as_ref().filter(|_| ready) else {
                continue;
            };
            match Fd(fd).read(&mut buf) {
                Ok(0) => *slot = None,
                Ok(n) => {
                    let bytes = buf[..n].to_vec();
                    let is_stdout = *is_stdout;
                    self.send(&match is_stdout {
                        true => Frame::Stdout(bytes),
                        false => Frame::Stderr(bytes),
                    })?;
                }
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => *slot = None,
            }
        }
        Ok(())
    }

    /// Forwards what is left in the pipes once every writer is dead, for at
    /// most [`DRAIN_LIMIT`].
    fn drain(&mut self, pipes: &mut [Option<(OwnedFd, bool)>; 2]) -> Result<(), FrameError> {
        let deadline = Instant::now() + DRAIN_LIMIT;
        while pipes.iter().any(Option::is_some) && Instant::now() < deadline {
            let ready = poll(None, pipes, None, None, Some(&TICK))?;
            self.forward(pipes, ready.pipes)?;
        }
        Ok(())
    }
}

/// Which descriptors [`poll`] found ready.
struct Readiness {
    input: bool,
    pipes: [bool; 2],
    /// inotify's descriptor (the index's events).
    events: bool,
}

/// Waits up to `timeout` (`None`: for ever) until the input, a pipe, the
/// child's pidfd or inotify's descriptor is ready.
fn poll(
    input: Option<&Fd<io::Stdin>>,
    pipes: &[Option<(OwnedFd, bool)>; 2],
    pidfd: Option<&OwnedFd>,
    events: Option<BorrowedFd<'_>>,
    timeout: Option<&Timespec>,
) -> Result<Readiness, FrameError> {
    // The descriptors present, each with its place in `Readiness`: 0 the input,
    // 1 and 2 the pipes, 3 the pidfd, 4 inotify's.
    let watched = [
        input.map(|fd| fd.0.as_fd()),
        pipes[0].as_ref().map(|(fd, _)| fd.as_fd()),
        pipes[1].as_ref().map(|(fd, _)| fd.as_fd()),
        pidfd.map(AsFd::as_fd),
        events,
    ];
    let mut places = Vec::with_capacity(watched.len());
    let mut fds = Vec::with_capacity(watched.len());
    for (place, fd) in watched.into_iter().enumerate() {
        if let Some(fd) = fd {
            places.push(place);
            fds.push(PollFd::from_borrowed_fd(fd, PollFlags::IN));
        }
    }
    let mut hit = [false; 5];
    match rustix::event::poll(&mut fds, timeout) {
        Ok(_) => {
            for (place, fd) in places.into_iter().zip(&fds) {
                hit[place] = !fd.revents().is_empty();
            }
        }
        Err(rustix::io::Errno::INTR) => {}
        Err(err) => return Err(FrameError::Io(err.into())),
    }
    Ok(Readiness {
        input: hit[0],
        pipes: [hit[1], hit[2]],
        events: hit[4],
    })
}

/// A descriptor that becomes readable when `pid` exits, or `None` where
/// the kernel (before 5.3) or a seccomp profile refuses one: the loop then
/// polls every [`TICK`].
fn pidfd_open(pid: Pid) -> Option<OwnedFd> {
    rustix::process::pidfd_open(pid, PidfdFlags::empty()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_runs_only_under_ahs_init() {
        assert!(inside_sandbox(b"/run/ah-init\0-P\0", 7));
        assert!(!inside_sandbox(b"/run/ah-init\0-P\0", 1), "never as PID 1");
        assert!(!inside_sandbox(b"/sbin/init\0", 7));
        assert!(!inside_sandbox(b"/lib/systemd/systemd\0--system\0", 7));
        assert!(!inside_sandbox(b"/run/ah-init-not\0", 7));
        assert!(!inside_sandbox(b"", 7));
    }

    #[test]
    fn the_shared_init_path_is_the_one_other_place_accepted() {
        assert!(inside_sandbox(b"/run/ah/init\0-P\0", 7));
        assert!(!inside_sandbox(b"/run/ah/init\0-P\0", 1), "never as PID 1");
        for other in [
            &b"/run/ah/agent\0__sandbox-agent\0"[..],
            b"/run/ah/init/\0",
            b"/run/ah/init2\0",
            b"/run/ah//init\0",
            b"run/ah/init\0",
            b"/tmp/run/ah/init\0",
            b"/run/ah\0init\0",
            b"/run/ah/init -P\0",
        ] {
            assert!(
                !inside_sandbox(other, 7),
                "{}",
                String::from_utf8_lossy(other)
            );
        }
    }

    #[test]
    fn on_this_host_the_interlock_refuses() {
        // The tests run on a host (or in a container whose init is not
        // ah's): the agent must never start here.
        let refused = interlock().err().unwrap_or_default();
        assert!(refused.contains("not ah's sandbox") || refused.contains("cannot read"));
    }
}
