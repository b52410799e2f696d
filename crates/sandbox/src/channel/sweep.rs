//! The agent's view of the container's processes: which are alive besides
//! PID 1 and the agent, signalling all of them at once (`kill(-1, SIG)`,
//! which spares the caller and the namespace's init), and reaping the
//! agent's own children.

use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, WaitOptions, WaitStatus};

/// How long a KILL sweep keeps trying before it reports survivors.
const KILL_LIMIT: Duration = Duration::from_secs(3);
/// The pause between two rounds of a sweep.
const ROUND: Duration = Duration::from_millis(10);

/// Whether any process other than PID 1 and `me` is alive (zombies are
/// not). A process gone between listing and reading is not alive.
pub(super) fn others_alive(me: u32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        // Without /proc nothing can be checked: assume the worst.
        return true;
    };
    entries.flatten().any(|entry| {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
            return false;
        };
        if pid == 1 || pid == me {
            return false;
        }
        std::fs::read(entry.path().join("stat")).is_ok_and(|stat| alive_in_stat(&stat))
    })
}

/// The state in `/proc/PID/stat` comes after the last `) `: the command
/// name before it may hold spaces, parentheses and newlines.
pub(super) fn alive_in_stat(stat: &[u8]) -> bool {
    let Some(close) = stat.windows(2).rposition(|w| w == b") ") else {
        return false;
    };
    !matches!(stat.get(close + 2), None | Some(b'Z' | b'X' | b'x'))
}

/// Sends `signal` to every process but PID 1 and the caller.
pub(super) fn signal_all(signal: Signal) {
    // `kill(-1, signal)`: the "group" of PID 1 is every process we may
    // signal but ourselves and the namespace's init. None left is fine.
    let _ = rustix::process::kill_process_group(Pid::INIT, signal);
}

/// KILLs every other process, again and again (children forked meanwhile)
/// until none is alive, for at most [`KILL_LIMIT`]; reaps the agent's own
/// children through `reap`. Whether everything ended.
pub(super) fn kill_all(me: u32, reap: &mut dyn FnMut()) -> bool {
    let deadline = Instant::now() + KILL_LIMIT;
    loop {
        signal_all(Signal::KILL);
        reap();
        if !others_alive(me) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(ROUND);
    }
}

/// Reaps every child that has ended without waiting; returns the wait
/// status of `watched` when it was among them.
pub(super) fn reap(watched: Option<Pid>) -> Option<WaitStatus> {
    let mut found = None;
    // `wait`, not `waitpid(None)`: any child, whatever its process group.
    while let Ok(Some((pid, status))) = rustix::process::wait(WaitOptions::NOHANG) {
        if Some(pid) == watched {
            found = Some(status);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_is_read_after_the_last_parenthesis() {
        assert!(alive_in_stat(b"12 (sleep) S 1 12 12 0"));
        assert!(
            alive_in_stat(b"12 (a) Z) R 1 12"),
            "a name that fakes a state"
        );
        assert!(!alive_in_stat(b"12 (sleep) Z 1 12 12 0"));
        assert!(!alive_in_stat(b"12 (x) ) ) Z 1"));
        assert!(!alive_in_stat(b"garbage"));
        assert!(!alive_in_stat(b"12 (x) "));
    }
}
