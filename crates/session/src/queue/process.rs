//! Which process holds a lock: its pid and its start time (from
//! `/proc/<pid>/stat`), so a pid the kernel reused for another process is
//! not mistaken for the owner.

use rustix::io::Errno;
use rustix::process::Pid;
/// A process, as the lock records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessId {
    pub pid: u32,
    /// When the process started, in clock ticks after boot (field 22 of
    /// `/proc/<pid>/stat`); 0 when it could not be read.
    pub started: u64,
}

impl ProcessId {
    /// This process.
    pub fn current() -> ProcessId {
        ProcessId::of(std::process::id())
    }

    /// Process `pid` as it is now (start time 0 when it cannot be read).
    pub fn of(pid: u32) -> ProcessId {
        ProcessId {
            pid,
            started: stat(pid).map_or(0, |stat| stat.started),
        }
    }

    /// Whether the process still runs: the pid exists, is not a zombie, and
    /// (when both are known) started when the recorded one did.
    pub fn is_alive(&self) -> bool {
        let Some(pid) = i32::try_from(self.pid).ok().and_then(Pid::from_raw) else {
            return false;
        };
        // Signal 0 only checks that the process exists (EPERM: it does, as
        // another user's).
        let exists = matches!(
            rustix::process::test_kill_process(pid),
            Ok(()) | Err(Errno::PERM)
        );
        if !exists {
            return false;
        }
        match stat(self.pid) {
            // Gone between the two checks, or /proc is not readable: trust kill.
            None => true,
            Some(stat) => stat.state != 'Z' && (self.started == 0 || stat.started == self.started),
        }
    }
}

/// The fields of `/proc/<pid>/stat` the lock needs.
struct Stat {
    state: char,
    started: u64,
}

fn stat(pid: u32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text)
}

/// `pid (comm) state ppid …`: the command name may hold spaces and
/// parentheses, so fields are counted after its last `)`. The state is field
/// 3 and the start time field 22.
fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let started = fields.nth(18)?.parse().ok()?;
    Some(Stat { state, started })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_time_is_read_after_the_command_name() {
        let line =
            "4242 (a b) c)) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10";
        let stat = parse_stat(line).unwrap();
        assert_eq!(stat.state, 'S');
        assert_eq!(stat.started, 987654);
        assert!(parse_stat("12 (x) S 1").is_none());
    }

    #[test]
    fn this_process_is_alive_and_a_reused_pid_is_not_the_owner() {
        let me = ProcessId::current();
        assert!(me.started > 0, "/proc is readable here");
        assert!(me.is_alive());
        let impostor = ProcessId {
            started: me.started + 1,
            ..me
        };
        assert!(!impostor.is_alive(), "same pid, other start time");
    }

    #[test]
    fn a_dead_or_zombie_child_is_not_alive() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let id = ProcessId::of(child.id());
        assert!(id.started > 0);
        assert!(id.is_alive());
        child.kill().unwrap();
        // Not yet reaped: a zombie, which is dead for the lock.
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(!id.is_alive());
        child.wait().unwrap();
        assert!(!id.is_alive());
    }
}
