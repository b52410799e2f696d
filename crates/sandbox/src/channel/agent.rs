//! The agent: `ah __sandbox-agent`, started once per container with
//! `podman exec -i` from an execute-only copy of ah, answers the host's
//! frames on stdin with frames on stdout. For each [`Frame::Run`] it makes
//! sure nothing else is alive, runs `bash -c COMMAND` in `/work` in a new
//! process group (stdin `/dev/null`, stdout and stderr piped and forwarded
//! as frames), and when bash exits KILLs every process but PID 1 and
//! itself until none is left, then reports [`Frame::Exit`]. A
//! [`Frame::Kill`] TERMs everything, waits up to its grace, then KILLs.
//!
//! It ends every process it can signal, so it refuses to start anywhere but
//! in ah's sandbox ([`interlock`]), and it is non-dumpable, so the
//! commands it runs (same uid) can neither trace it nor reach its
//! descriptors through `/proc` to forge frames.

use std::ffi::OsStr;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::frame::{Exit, Frame, FrameError, MAX_REQUEST, Status, VERSION, read_frame};
use super::sweep::{kill_all, others_alive, reap, signal_all};
use crate::podman::INIT_PATH;

/// The hidden subcommand that starts the agent.
pub const COMMAND: &str = "__sandbox-agent";
/// Output bytes per frame.
const CHUNK: usize = 32 * 1024;
/// How long the output pipes are read after everything was killed (a
/// process that could not be killed may still hold them).
const DRAIN_LIMIT: Duration = Duration::from_millis(500);
/// The poll period while something must be watched without a descriptor.
const TICK_MS: libc::c_int = 10;

/// Runs the agent on stdin and stdout; the process's exit code.
pub fn main() -> i32 {
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
    // SAFETY: PR_SET_DUMPABLE only changes a flag of this process.
    let marked = unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) == 0 };
    if !marked {
        eprintln!(
            "ah: {COMMAND} could not protect itself (prctl: {})",
            io::Error::last_os_error()
        );
        return 1;
    }
    let mut agent = Agent {
        input: Fd(0),
        output: Fd(1),
        me: std::process::id(),
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
/// ah's init ([`INIT_PATH`]) and this process must not be PID 1. Run by
/// accident on a host, the agent would otherwise kill every process of its
/// user.
pub fn interlock() -> Result<(), String> {
    let cmdline = std::fs::read("/proc/1/cmdline")
        .map_err(|err| format!("cannot read /proc/1/cmdline ({err})"))?;
    if inside_sandbox(&cmdline, std::process::id()) {
        Ok(())
    } else {
        Err(format!(
            "PID 1 is not {INIT_PATH}: this is not ah's sandbox"
        ))
    }
}

/// Whether `init_cmdline` (PID 1's `/proc/1/cmdline`) is ah's init and
/// `pid` is not PID 1.
pub fn inside_sandbox(init_cmdline: &[u8], pid: u32) -> bool {
    pid != 1 && init_cmdline.split(|b| *b == 0).next() == Some(INIT_PATH.as_bytes())
}

/// A raw descriptor read and written without buffering, so `poll` on it
/// tells the truth.
struct Fd(RawFd);

impl Read for Fd {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: read writes at most buf.len() bytes into buf.
        let n = unsafe { libc::read(self.0, buf.as_mut_ptr().cast(), buf.len()) };
        usize::try_from(n).map_err(|_| io::Error::last_os_error())
    }
}

impl Write for Fd {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // SAFETY: write reads at most buf.len() bytes from buf.
        let n = unsafe { libc::write(self.0, buf.as_ptr().cast(), buf.len()) };
        usize::try_from(n).map_err(|_| io::Error::last_os_error())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

struct Agent {
    input: Fd,
    output: Fd,
    me: u32,
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
            match read_frame(&mut self.input, MAX_REQUEST)? {
                Frame::Run(command) => {
                    let exit = self.run(&command)?;
                    self.send(&Frame::Exit(exit))?;
                }
                // Nothing runs: the exit it asks for is on its way.
                Frame::Kill { .. } => {}
                Frame::Ping => self.send(&Frame::Ready { version: VERSION })?,
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
                });
            }
        };
        let pid = libc::pid_t::try_from(child.id()).unwrap_or(libc::pid_t::MAX);
        let mut pipes = [
            child.stdout.take().map(|p| (OwnedFd::from(p), true)),
            child.stderr.take().map(|p| (OwnedFd::from(p), false)),
        ];
        // Waited for through `reap`.
        drop(child);
        let pidfd = pidfd_open(pid);
        let mut status: Option<libc::c_int> = None;
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
                (None, Some(_)) => -1,
                _ => TICK_MS,
            };
            let ready = poll(Some(&self.input), &pipes, watch_pid, timeout)?;
            if ready.input {
                match read_frame(&mut self.input, MAX_REQUEST)? {
                    Frame::Kill { grace_ms } if ending.is_none() => {
                        signal_all(libc::SIGTERM);
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
        let status = match status {
            Some(raw) if libc::WIFEXITED(raw) => Status::Code(libc::WEXITSTATUS(raw)),
            Some(raw) if libc::WIFSIGNALED(raw) => Status::Signal(libc::WTERMSIG(raw)),
            _ => {
                clean = false;
                Status::Signal(libc::SIGKILL)
            }
        };
        Ok(Exit { status, clean })
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
            match Fd(fd.as_raw_fd()).read(&mut buf) {
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
            let ready = poll(None, pipes, None, TICK_MS)?;
            self.forward(pipes, ready.pipes)?;
        }
        Ok(())
    }
}

/// Which descriptors [`poll`] found ready.
struct Ready {
    input: bool,
    pipes: [bool; 2],
}

/// Waits up to `timeout_ms` (-1: for ever) until the input, a pipe or the
/// child's pidfd is ready.
fn poll(
    input: Option<&Fd>,
    pipes: &[Option<(OwnedFd, bool)>; 2],
    pidfd: Option<&OwnedFd>,
    timeout_ms: libc::c_int,
) -> Result<Ready, FrameError> {
    let entry = |fd: RawFd| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // A negative descriptor is skipped by poll.
    let mut fds = [
        entry(input.map_or(-1, |fd| fd.0)),
        entry(pipes[0].as_ref().map_or(-1, |(fd, _)| fd.as_raw_fd())),
        entry(pipes[1].as_ref().map_or(-1, |(fd, _)| fd.as_raw_fd())),
        entry(pidfd.map_or(-1, AsRawFd::as_raw_fd)),
    ];
    // SAFETY: fds is a valid array of fds.len() pollfd entries.
    let rc = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    if rc < 0 {
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(FrameError::Io(err));
        }
    }
    let hit = |i: usize| rc > 0 && fds[i].fd >= 0 && fds[i].revents != 0;
    Ok(Ready {
        input: hit(0),
        pipes: [hit(1), hit(2)],
    })
}

/// A descriptor that becomes readable when `pid` exits, or `None` where
/// the kernel (before 5.3) or a seccomp profile refuses one: the loop then
/// polls every [`TICK_MS`].
fn pidfd_open(pid: libc::pid_t) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    let fd = RawFd::try_from(fd).ok().filter(|fd| *fd >= 0)?;
    // SAFETY: the descriptor was just created and nothing else owns it.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
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
    fn on_this_host_the_interlock_refuses() {
        // The tests run on a host (or in a container whose init is not
        // ah's): the agent must never start here.
        let refused = interlock().err().unwrap_or_default();
        assert!(refused.contains("not ah's sandbox") || refused.contains("cannot read"));
    }
}
