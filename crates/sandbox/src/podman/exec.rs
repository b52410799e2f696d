//! Running one command in the run's container with its own `podman exec`
//! (where the command channel, `channel`, cannot run), and making sure
//! nothing it started outlives it; the cleanup from outside the channel
//! falls back on is here too. A background job, a `setsid` or
//! `nohup` process, a double fork: any of them could keep changing `/work`
//! while the host commits the step and checks it against the policy. So when
//! a command ends, every process in the container but its init (PID 1:
//! catatonit in pause mode, which starts nothing, or ah's init, which
//! starts only the agent) is killed:
//!
//! - normally by the wrapper the command runs under, right after the command
//!   exits and before the wrapper itself exits, so no extra `podman exec` is
//!   needed: `kill -KILL -1` reaches every process the wrapper may signal
//!   (all of them: everything runs as one user) except PID 1 and itself, in
//!   one go that a forking process cannot outrun;
//! - from a second `podman exec` when the command times out, when the exec
//!   future is dropped, or when the wrapper was killed before it could do it
//!   (its status is then 128 or more); should that fail too (a fork bomb
//!   filled the process limit, the command stopped the init), the container
//!   is restarted.
//!
//! Execs take turns (a lock per container): killing everything at the end of
//! one must never hit another, and a dropped exec's kill must finish before
//! the next command starts.

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::OwnedMutexGuard;

use super::Podman;
use crate::capture::{Capture, HEAD_BYTES, TAIL_BYTES, pump};
use ah_tools::ExecOutput;

/// Output kept in memory per stream (head and tail); the middle is counted
/// and dropped.
pub const OUTPUT_CAP: usize = HEAD_BYTES + TAIL_BYTES;

/// How long the kill from outside may take before it is given up on.
const END_TIMEOUT: Duration = Duration::from_secs(15);

/// Added to a command's errors when the container had to be restarted
/// while it ran (an earlier or this command stopped the container's init,
/// or filled its process table): the command may not have run, or not to
/// its end.
pub(super) const RESTART_NOTE: &str = "\n[ah: the sandbox container was restarted while this command ran \
(its init had stopped, or no process could start): every process in it was killed and /tmp was \
emptied; files in /work are kept. Run the command again if it did not finish.]\n";

/// Bash functions both scripts use. `ah_live`: is any process other than
/// PID 1 and this shell still running (not a zombie)? `/proc/PID/stat` is
/// read whole, and the state taken after the last `) `, since a command name
/// may hold spaces, parentheses and newlines. `ah_end SIG ROUNDS PAUSE`:
/// sends SIG to every process but PID 1 and this shell, then waits for them
/// to end, at most ROUNDS pauses of PAUSE seconds, sending KILL again each
/// round (children forked meanwhile); fails when some are left. Only
/// builtins run between the signal and the check, so the check never sees
/// a process of its own.
macro_rules! reaper {
    () => {
        r#"ah_live() {
  local d s
  for d in /proc/[0-9]*; do
    case ${d#/proc/} in 1|$$) continue ;; esac
    s=
    { read -r -d '' s < "$d/stat"; } 2>/dev/null
    s=${s##*) }
    [ -n "$s" ] && [ "${s%% *}" != Z ] && return 0
  done
  return 1
}
ah_end() {
  local n=0
  kill -"$1" -1 2>/dev/null
  while ah_live; do
    [ "$n" -ge "$2" ] && return 1
    [ "$1" = KILL ] && kill -KILL -1 2>/dev/null
    sleep "$3"
    n=$((n+1))
  done
  return 0
}
"#
    };
}

/// Runs `$1` with `bash -c` and ends every other process before exiting with
/// its status. The first `ah_end` clears what a dropped exec may have left
/// if its command started after the kill sent for it.
const WRAPPER: &str = concat!(
    reaper!(),
    r#"ah_end KILL 300 0.01
bash -c "$1"
status=$?
ah_end KILL 300 0.01 || echo "ah: some processes in the sandbox did not end after SIGKILL" >&2
exit $status
"#
);

/// Ends every process but PID 1 from outside: TERM, up to `$1` tenths of a
/// second for them to exit, then KILL; fails when some are left.
const END_SCRIPT: &str = concat!(
    reaper!(),
    r#"[ "$1" -gt 0 ] && ah_end TERM "$1" 0.1
ah_end KILL 300 0.01
"#
);

/// Grace (tenths of a second) a timed-out or dropped command gets between
/// TERM and KILL, to flush what it has.
pub(super) const TERM_GRACE_TENTHS: &str = "20";

/// Added to a command's errors when the container had stopped before it
/// (killed from outside, or its init ended after the previous command) and
/// was restarted for it.
pub(super) const RESTARTED_BEFORE_NOTE: &str = "\n[ah: the sandbox container had stopped and \
was restarted before this command ran: every process in it had ended and /tmp was emptied; files \
in /work are kept.]\n";

/// The `podman exec` arguments that run `script` with `arg` as `$1`.
fn exec_args<'a>(container: &'a str, script: &'a str, arg: &'a str) -> [&'a str; 8] {
    [
        "exec",
        "--workdir=/work",
        container,
        "bash",
        "-c",
        script,
        "ah-exec",
        arg,
    ]
}

/// While armed, dropping it (a cancelled exec) ends every process in the
/// container from outside, and lets the next exec in only after that.
struct EndOnDrop<T: Send + 'static> {
    podman: Podman,
    container: String,
    turn: Option<OwnedMutexGuard<T>>,
    restarted: Arc<AtomicBool>,
    armed: bool,
}

impl<T: Send + 'static> Drop for EndOnDrop<T> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if let Some(turn) = self.turn.take() {
            end_in_background(&self.podman, &self.container, turn, &self.restarted);
        }
    }
}

/// Ends every process in the container from outside, on a thread (a drop
/// must not block its task), and releases `turn` when that is done (or the
/// thread cannot start).
pub(super) fn end_in_background<T: Send + 'static>(
    podman: &Podman,
    container: &str,
    turn: OwnedMutexGuard<T>,
    restarted: &Arc<AtomicBool>,
) {
    let podman = podman.clone();
    let container = container.to_string();
    let restarted = Arc::clone(restarted);
    let _ = std::thread::Builder::new()
        .name("ah-exec-end".to_string())
        .spawn(move || {
            let quiet = |args: &[&str]| {
                podman
                    .std_command()
                    .args(args)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .is_ok_and(|child| wait_bounded(child, END_TIMEOUT))
            };
            if !quiet(&exec_args(&container, END_SCRIPT, TERM_GRACE_TENTHS)) {
                quiet(&["restart", "--time=0", &container]);
                restarted.store(true, Ordering::SeqCst);
            }
            drop(turn);
        });
}

/// Waits for `child` up to `limit` (then kills it); true when it exited
/// with status 0.
fn wait_bounded(mut child: std::process::Child, limit: Duration) -> bool {
    let deadline = std::time::Instant::now() + limit;
    while std::time::Instant::now() < deadline {
        match child.try_wait() {
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Ok(Some(status)) => return status.success(),
            Err(_) => return false,
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    false
}

/// Runs `command` with `bash -c` in `/work` of `container`, holding the
/// container's `turn` until every process it started has ended. A restart
/// of the container (the last resort of that cleanup) sets `restarted`.
pub(super) async fn run<T: Send + 'static>(
    podman: &Podman,
    container: &str,
    turn: OwnedMutexGuard<T>,
    restarted: &Arc<AtomicBool>,
    command: &str,
    timeout: Duration,
) -> std::io::Result<ExecOutput> {
    let mut child = podman
        .command()
        .args(exec_args(container, WRAPPER, command))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| std::io::Error::new(e.kind(), format!("could not run podman exec: {e}")))?;
    let mut on_drop = EndOnDrop {
        podman: podman.clone(),
        container: container.to_string(),
        turn: Some(turn),
        restarted: Arc::clone(restarted),
        armed: true,
    };
    let (Some(mut stdout), Some(mut stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(std::io::Error::other(
            "podman exec started without output pipes",
        ));
    };
    let mut out = Capture::default();
    let mut err = Capture::default();

    let finished = tokio::time::timeout(timeout, async {
        let (r1, r2, status) = tokio::join!(
            pump(&mut stdout, &mut out),
            pump(&mut stderr, &mut err),
            child.wait()
        );
        r1?;
        r2?;
        status
    })
    .await;

    match finished {
        Ok(status) => {
            let status = status?;
            let (stdout, out_dropped) = out.finish();
            let (mut stderr, err_dropped) = err.finish();
            if refused(status.code(), &stderr) {
                // Podman did not start the command: the container stopped
                // between steps, e.g. its init ended just after the previous
                // command. Restart it so the caller can try once more.
                let message = format!(
                    "podman exec failed: {}; the sandbox container is gone or broken: run 'ah doctor'",
                    String::from_utf8_lossy(&stderr).trim()
                );
                restart(podman, container, restarted).await;
                on_drop.armed = false;
                return Err(std::io::Error::other(NotStarted(message)));
            }
            // The wrapper may have been killed before its cleanup.
            let restarted_now = status.code().is_none_or(|code| code >= 128)
                && end_all(podman, container, "0", restarted).await;
            on_drop.armed = false;
            if restarted_now {
                stderr.extend_from_slice(RESTART_NOTE.as_bytes());
            }
            Ok(ExecOutput {
                stdout,
                stderr,
                exit_code: status.code(),
                timed_out: false,
                dropped_bytes: out_dropped + err_dropped,
                memory_limit_hit: None,
            })
        }
        Err(_elapsed) => {
            let restarted_now = end_all(podman, container, TERM_GRACE_TENTHS, restarted).await;
            on_drop.armed = false;
            // Everything is dead: collect what is still buffered in the
            // pipes, but never wait long.
            let _ = tokio::time::timeout(Duration::from_secs(2), async {
                let _ = tokio::join!(
                    pump(&mut stdout, &mut out),
                    pump(&mut stderr, &mut err),
                    child.wait()
                );
            })
            .await;
            let _ = child.start_kill();
            let (stdout, out_dropped) = out.finish();
            let (mut stderr, err_dropped) = err.finish();
            if restarted_now {
                stderr.extend_from_slice(RESTART_NOTE.as_bytes());
            }
            Ok(ExecOutput {
                stdout,
                stderr,
                exit_code: None,
                timed_out: true,
                dropped_bytes: out_dropped + err_dropped,
                memory_limit_hit: None,
            })
        }
    }
}

/// Ends every process in the container but PID 1, from a second `podman
/// exec`, giving them `grace_tenths` between TERM and KILL. When that cannot
/// be done (the container is out of process ids, or stopped, or something
/// would not die), the container is restarted instead: its `/tmp` is lost,
/// but no process survives the step and the next step has a sandbox
/// (`restarted` tells the backend to renew what lived in the old one).
/// Returns whether the container was restarted.
pub(super) async fn end_all(
    podman: &Podman,
    container: &str,
    grace_tenths: &str,
    restarted: &AtomicBool,
) -> bool {
    let ended = podman
        .command()
        .args(exec_args(container, END_SCRIPT, grace_tenths))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .status();
    if let Ok(Ok(status)) = tokio::time::timeout(END_TIMEOUT, ended).await
        && status.success()
    {
        return false;
    }
    restart(podman, container, restarted).await;
    true
}

/// Restarts the container at once (its processes are killed), and tells the
/// backend through `restarted`.
pub(super) async fn restart(podman: &Podman, container: &str, restarted: &AtomicBool) {
    let killed = podman
        .command()
        .args(["restart", "--time=0", container])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .status();
    let _ = tokio::time::timeout(END_TIMEOUT, killed).await;
    restarted.store(true, Ordering::SeqCst);
}

/// Whether podman refused to start the command: its own error (exit 125, or
/// 255 for "container state improper" in podman 4) instead of the command's.
pub(super) fn refused(code: Option<i32>, stderr: &[u8]) -> bool {
    let says = |text: &str| {
        stderr
            .windows(text.len())
            .any(|window| window == text.as_bytes())
    };
    stderr.starts_with(b"Error: ")
        && (code == Some(125) || (code == Some(255) && says("container state improper")))
}

/// Podman refused to run a command (the container was not running); the
/// container has been restarted since, and the command can be tried again.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(super) struct NotStarted(String);

impl NotStarted {
    pub(super) fn new(message: String) -> NotStarted {
        NotStarted(message)
    }

    /// Whether `err` says the command never started.
    pub(super) fn is(err: &std::io::Error) -> bool {
        err.get_ref()
            .is_some_and(|inner| inner.downcast_ref::<NotStarted>().is_some())
    }
}
