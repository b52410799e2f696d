//! Noticing that the sandbox's memory limit was hit. When the kernel's OOM
//! killer ends a process in the container, the command's exit status need
//! not show it: in `python3 big.py | tail -1` the pipeline's status is
//! tail's, and the model sees an empty line and exit 0. So the kill count of
//! the container's memory cgroup is read before and after each command:
//! `oom_kill` in `memory.oom_control` (cgroup v1) or `memory.events` (v2),
//! found from the cgroup of the container's PID 1 (`/proc/PID/cgroup`).
//!
//! Where podman ignores `--memory` (rootless podman on cgroup v1, or on v2
//! without the memory controller delegated) the init's memory cgroup is
//! not the container's and holds no limit within the one asked; nothing is
//! watched then (`ah doctor` says the limits are not enforced). The rule is
//! the one [`crate::limits::check`] tells a limit held by a cgroup with.
//! A remote engine's cgroups cannot be read from here: there the agent
//! reads its own cgroup's count around each command and says it with the
//! command's exit (`channel::memory`), taken by the same rule
//! ([`seen_fired`]).

use std::path::{Path, PathBuf};

use crate::channel::frame::MemorySeen;
use crate::limits::{Observed, memory_bytes};

/// The kill counter of one container's memory cgroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct OomCounter {
    /// `memory.oom_control` or `memory.events`; both hold an `oom_kill N`
    /// line.
    file: PathBuf,
}

impl OomCounter {
    /// The counter of the memory cgroup of the container's init `pid`,
    /// which was `seen` with the limits it got; `None` when that cgroup
    /// holds no limit within `asked` (podman's `--memory`) or cannot be
    /// read.
    pub(super) fn find(asked: &str, pid: u32, seen: &Observed) -> Option<OomCounter> {
        let asked = memory_bytes(asked)?;
        seen.cgroup_memory.filter(|limit| *limit <= asked)?;
        let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
        let counter = OomCounter {
            file: counter_file(&cgroups, Path::new("/sys/fs/cgroup"))?,
        };
        counter.kills().map(|_| counter)
    }

    /// How many processes the OOM killer has ended in the container since
    /// its cgroup was made (a restart makes it again, from 0).
    pub(super) fn kills(&self) -> Option<u64> {
        parse_kills(&std::fs::read_to_string(&self.file).ok()?)
    }
}

/// Whether the OOM killer fired between two readings of the counter. A
/// restart in between starts the count again from 0.
pub(super) fn fired(before: Option<u64>, after: Option<u64>) -> bool {
    match (before, after) {
        (Some(before), Some(after)) => after != before && after > 0,
        (None, Some(after)) => after > 0,
        _ => false,
    }
}

/// Whether the agent saw the OOM killer end a process during a command,
/// in a memory cgroup holding a limit within `asked` (else the cgroup it
/// sees is a larger one's, and its kills are not the sandbox's).
pub(super) fn seen_fired(asked: &str, seen: Option<MemorySeen>) -> bool {
    let (Some(asked), Some(seen)) = (memory_bytes(asked), seen) else {
        return false;
    };
    seen.limit <= asked && seen.oom_kills > 0
}

/// The counter file for a process whose `/proc/PID/cgroup` is `cgroups`,
/// under the cgroup mount `root`: the v1 memory hierarchy where there is
/// one (cgroup v1 and hybrid hosts), else the v2 one.
fn counter_file(cgroups: &str, root: &Path) -> Option<PathBuf> {
    let mut unified = None;
    for line in cgroups.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let relative = path.trim_start_matches('/');
        if controllers.split(',').any(|c| c == "memory") {
            return Some(
                root.join("memory")
                    .join(relative)
                    .join("memory.oom_control"),
            );
        }
        if controllers.is_empty() {
            unified = Some(root.join(relative).join("memory.events"));
        }
    }
    unified
}

/// The `oom_kill N` line of `memory.oom_control` or `memory.events`.
pub(crate) fn parse_kills(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix("oom_kill "))
        .and_then(|n| n.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agents_word_counts_only_from_a_cgroup_within_the_limit_asked() {
        let seen = |limit, oom_kills| Some(MemorySeen { limit, oom_kills });
        assert!(seen_fired("256m", seen(256 << 20, 1)));
        assert!(!seen_fired("256m", seen(256 << 20, 0)));
        // Rootless podman on cgroup v1: the host's own cgroup, no limit.
        assert!(!seen_fired("256m", seen(u64::MAX, 4)));
        assert!(!seen_fired("256m", seen(9_223_372_036_854_771_712, 4)));
        assert!(!seen_fired("256m", None));
    }

    #[test]
    fn the_v1_memory_hierarchy_wins_on_a_hybrid_host() {
        let cgroups = "9:name=systemd:/libpod_parent/libpod-ab\n\
                       4:memory:/libpod_parent/libpod-ab\n\
                       0::/libpod_parent/libpod-ab\n";
        assert_eq!(
            counter_file(cgroups, Path::new("/sys/fs/cgroup")),
            Some(PathBuf::from(
                "/sys/fs/cgroup/memory/libpod_parent/libpod-ab/memory.oom_control"
            ))
        );
    }

    #[test]
    fn a_v2_host_has_memory_events() {
        assert_eq!(
            counter_file(
                "0::/user.slice/libpod-ab.scope\n",
                Path::new("/sys/fs/cgroup")
            ),
            Some(PathBuf::from(
                "/sys/fs/cgroup/user.slice/libpod-ab.scope/memory.events"
            ))
        );
        assert_eq!(counter_file("", Path::new("/sys/fs/cgroup")), None);
    }

    #[test]
    fn the_kill_count_is_read_from_either_file() {
        let v1 = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n";
        assert_eq!(parse_kills(v1), Some(3));
        let v2 = "low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n";
        assert_eq!(parse_kills(v2), Some(2));
        assert_eq!(parse_kills("oom_kill_disable 0\n"), None);
    }

    #[test]
    fn a_kill_is_a_change_of_the_count_even_across_a_restart() {
        assert!(!fired(Some(1), Some(1)));
        assert!(fired(Some(1), Some(2)));
        assert!(fired(Some(3), Some(1)), "restarted, then a kill");
        assert!(!fired(Some(3), Some(0)), "restarted, no kill");
        assert!(!fired(Some(0), None));
        assert!(fired(None, Some(1)));
    }
}
