//! ah holds the API key, in its environment and its memory, while the
//! model's commands run as the same user (on the host itself with
//! `--backend none`). A process marked non-dumpable (`PR_SET_DUMPABLE` 0)
//! is out of reach of same-user processes that lack `CAP_SYS_PTRACE`: the
//! kernel refuses them ptrace and its `/proc/<pid>/environ`, `mem`, `maps`
//! and `fd`, and it writes no core dump. Its `/proc/<pid>/stat` stays
//! readable, so the session lock still reads the start time of another ah.
//! The mark belongs to this process: `exec` resets it, so the commands ah
//! starts are dumpable as usual.

use std::io;

use rustix::process::DumpableBehavior;

/// Marks this process non-dumpable (`prctl(PR_SET_DUMPABLE, 0)`).
pub(super) fn mark() -> io::Result<()> {
    Ok(rustix::process::set_dumpable_behavior(
        DumpableBehavior::NotDumpable,
    )?)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_mark_sticks() {
        // Marking the test process is harmless: it only stops other
        // processes from reading it.
        super::mark().unwrap_or_else(|e| panic!("prctl: {e}"));
        let dumpable = rustix::process::dumpable_behavior();
        assert!(matches!(dumpable, Ok(super::DumpableBehavior::NotDumpable)));
    }
}
