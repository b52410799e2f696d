//! Helpers shared by the integration tests in `tests/`.
//!
//! `tests/all.rs` declares this module once, next to every test module, so
//! it is compiled once for the one test binary and each test file reaches it
//! as `crate::support`. Being one crate, a helper no test uses shows up as
//! dead code.

pub(crate) mod fork;
pub(crate) mod host;
pub(crate) mod mcp;
pub(crate) mod mock;
pub(crate) mod org;
pub(crate) mod podman;
pub(crate) mod remote;
pub(crate) mod remote_run;
pub(crate) mod snap;
pub(crate) mod steps;
pub(crate) mod tmux;
pub(crate) mod work;

/// Sends `signal` to process `pid`, one a test started and has not waited
/// for; whether it was sent.
pub(crate) fn send_signal(pid: u32, signal: rustix::process::Signal) -> bool {
    i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .is_some_and(|pid| rustix::process::kill_process(pid, signal).is_ok())
}
