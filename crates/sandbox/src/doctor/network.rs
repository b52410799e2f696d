//! Checks for the network modes: whether `ah` itself runs inside the image
//! (`--network proxy` runs it there to hand the proxy its port), and whether
//! a user-mode network stack is installed (`--network full`). Both are
//! warnings: the default, no network at all, needs neither.

use tokio::process::Command;

use super::Check;
use super::probe::ProbeRoot;
use crate::podman::{AH_BIN, find_tool};

pub(super) const PROXY: &str = "network proxy";
pub(super) const FULL: &str = "network full";

/// Runs `ah --version` inside the image (started from `root`, `None` when
/// the image is missing) with the confinement flags of `run`.
pub(super) async fn proxy_check(mut run: Command, root: Option<&ProbeRoot>) -> Check {
    let Some(root) = root else {
        return Check::pass(PROXY, "not tried: image missing");
    };
    let executable = match std::env::current_exe().and_then(std::fs::canonicalize) {
        Ok(path) => path,
        Err(err) => {
            return Check::fail(
                PROXY,
                format!("cannot find the ah executable: {err}"),
                "run ah from its installed path",
            )
            .warning();
        }
    };
    run.arg(format!("--volume={}:{AH_BIN}:ro", executable.display()));
    root.start_from(&mut run);
    run.args([AH_BIN, "--version"]);
    match run.output().await {
        Ok(out) if out.status.success() && out.stdout.starts_with(b"ah ") => Check::pass(
            PROXY,
            "ah runs inside the image (--network proxy can start)",
        ),
        Ok(out) => Check::fail(
            PROXY,
            format!(
                "ah cannot run inside the image: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
            "build ah on a system no newer than the image (Debian bookworm, glibc 2.36); \
             --network none and full do not need it",
        )
        .warning(),
        Err(err) => Check::fail(PROXY, err.to_string(), "reinstall podman").warning(),
    }
}

/// Whether slirp4netns or pasta is installed.
pub(super) fn full_check() -> Check {
    match ["slirp4netns", "pasta"]
        .iter()
        .find_map(|tool| find_tool(tool))
    {
        Some(path) => Check::pass(FULL, format!("{} present", path.display())),
        None => Check::fail(
            FULL,
            "neither slirp4netns nor pasta is installed",
            "apt-get install slirp4netns (only --network full needs it)",
        )
        .warning(),
    }
}
