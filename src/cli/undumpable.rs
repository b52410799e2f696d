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

/// Marks this process non-dumpable.
pub(super) fn mark() -> io::Result<()> {
    // SAFETY: PR_SET_DUMPABLE with 0 only changes this process's flag; the
    // unused arguments are zero as prctl(2) asks.
    let rc = unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_mark_sticks() {
        // Marking the test process is harmless: it only stops other
        // processes from reading it.
        super::mark().unwrap_or_else(|e| panic!("prctl: {e}"));
        // SAFETY: PR_GET_DUMPABLE takes no pointer.
        let dumpable = unsafe { libc::prctl(libc::PR_GET_DUMPABLE, 0, 0, 0, 0) };
        assert_eq!(dumpable, 0);
    }
}
