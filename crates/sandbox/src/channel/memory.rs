//! What the agent reads of the memory cgroup it runs in, for a host that
//! cannot look into the engine's cgroups (a remote engine): the limit, and
//! the OOM killer's count before and after each command. A container sees
//! its own memory cgroup at `/sys/fs/cgroup/memory` (cgroup v1 and hybrid
//! hosts: `memory.oom_control`, `memory.limit_in_bytes`) or at
//! `/sys/fs/cgroup` (v2 with a cgroup namespace: `memory.events`,
//! `memory.max`). Where it has none of its own (rootless podman on v1), what
//! it sees there is a larger cgroup's: the host trusts a count only from a
//! cgroup whose limit is within the one it asked for.

use std::path::{Path, PathBuf};

use super::frame::MemorySeen;
use crate::podman::parse_kills;

/// The memory cgroup the agent runs in.
#[derive(Debug)]
pub(super) struct MemoryCgroup {
    /// `memory.oom_control` or `memory.events`: an `oom_kill N` line.
    kills: PathBuf,
    /// Its limit in bytes (`u64::MAX`: none), read once: a run's limit
    /// does not change.
    limit: u64,
}

impl MemoryCgroup {
    /// The cgroup under `root` (`/sys/fs/cgroup`), where its counter and
    /// its limit read.
    pub(super) fn find(root: &Path) -> Option<MemoryCgroup> {
        let v1 = root.join("memory");
        [
            (
                v1.join("memory.oom_control"),
                v1.join("memory.limit_in_bytes"),
            ),
            (root.join("memory.events"), root.join("memory.max")),
        ]
        .into_iter()
        .find_map(|(kills, limit)| {
            let limit = match std::fs::read_to_string(limit).ok()?.trim() {
                "max" => u64::MAX,
                n => n.parse().ok()?,
            };
            let cgroup = MemoryCgroup { kills, limit };
            cgroup.kills().map(|_| cgroup)
        })
    }

    /// How many processes the OOM killer has ended in the cgroup.
    pub(super) fn kills(&self) -> Option<u64> {
        parse_kills(&std::fs::read_to_string(&self.kills).ok()?)
    }

    /// What a command saw, given the count read before it: the limit and
    /// the kills since.
    pub(super) fn seen(&self, before: Option<u64>) -> Option<MemorySeen> {
        Some(MemorySeen {
            limit: self.limit,
            oom_kills: self.kills()?.saturating_sub(before?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn a_v1_cgroup_is_read_before_a_v2_one_and_kills_count_from_before() {
        let root = tempfile::tempdir().unwrap();
        let oom = root.path().join("memory/memory.oom_control");
        write(&oom, "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n");
        write(
            &root.path().join("memory/memory.limit_in_bytes"),
            "268435456\n",
        );
        write(&root.path().join("memory.events"), "oom_kill 9\n");
        let cgroup = MemoryCgroup::find(root.path()).unwrap();
        let before = cgroup.kills();
        assert_eq!(before, Some(3));
        write(&oom, "oom_kill_disable 0\nunder_oom 0\noom_kill 5\n");
        assert_eq!(
            cgroup.seen(before),
            Some(MemorySeen {
                limit: 256 << 20,
                oom_kills: 2
            })
        );
    }

    #[test]
    fn a_v2_cgroup_without_a_limit_says_max_and_none_is_found_without_files() {
        let root = tempfile::tempdir().unwrap();
        assert!(MemoryCgroup::find(root.path()).is_none());
        write(
            &root.path().join("memory.events"),
            "low 0\noom 1\noom_kill 1\n",
        );
        write(&root.path().join("memory.max"), "max\n");
        let cgroup = MemoryCgroup::find(root.path()).unwrap();
        assert_eq!(
            cgroup.seen(Some(1)),
            Some(MemorySeen {
                limit: u64::MAX,
                oom_kills: 0
            })
        );
        assert_eq!(cgroup.seen(None), None, "no count before: nothing said");
    }
}
