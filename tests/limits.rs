//! The sandbox's limits, through the real binary: what the start line, the
//! `limits` event and `manifest.json` say holds each limit, that a command
//! allocating past `--memory` is stopped and the model told, and what
//! `--strict-limits` refuses. Rootful podman here (cgroup v1, root) gets its
//! limits from the cgroup; the rootless side is in `run_rootless.rs`.

use crate::support::host::{Host, describe, json_file};
use crate::support::mock::MockServer;
use crate::support::podman::podman_ready_blocking;
use crate::support::steps::{bash, script};
use serde_json::{Value, json};

/// A command that takes 2 GiB of memory and touches it, then says so.
pub(crate) const ALLOCATE_2G: &str =
    "python3 -c \"x = bytearray(2 << 30); print('allocated', len(x))\" | tail -1";

/// The entry of `limit` in a list of held limits.
pub(crate) fn entry<'a>(limits: &'a Value, limit: &str) -> &'a Value {
    limits
        .as_array()
        .and_then(|all| all.iter().find(|l| l["limit"] == json!(limit)))
        .unwrap_or_else(|| panic!("no {limit} in {limits}"))
}

#[test]
fn rootful_memory_is_held_by_the_cgroup_and_an_allocation_past_it_is_told() {
    if podman_ready_blocking().is_none() || ah_sandbox::podman::rootless() {
        return;
    }
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(script(vec![bash(ALLOCATE_2G)]));
    let out = host
        .ah(&mock.url())
        .args([
            "--memory",
            "512m",
            "--strict-limits",
            "--json",
            "--review",
            "never",
            "use memory",
        ])
        .output()
        .unwrap_or_else(|e| panic!("run ah: {e}"));
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let told = mock.requests()[1].told();
    assert!(
        told.contains(
            "[ah: the sandbox's memory limit (512m) was hit during this command: the kernel killed"
        ) && !told.contains("allocated 2147483648"),
        "the cgroup stopped the allocation and the model is told:\n{told}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let start: Value = stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|event| event["type"] == json!("limits"))
        .unwrap_or_else(|| panic!("no limits event:\n{stdout}"));
    assert_eq!(start["checked"], json!(false));
    assert_eq!(entry(&start["limits"], "memory")["by"], json!("cgroup"));
    let manifest = json_file(&host.run().join("manifest.json"));
    assert_eq!(
        entry(&manifest["limits"], "memory"),
        &json!({"limit": "memory", "asked": "512m", "by": "cgroup"})
    );
    assert_eq!(entry(&manifest["limits"], "pids")["by"], json!("cgroup"));
    assert_eq!(entry(&manifest["limits"], "disk")["by"], json!("ah"));
}

#[test]
fn the_host_backend_says_its_limits_do_not_hold_and_strict_refuses_it() {
    let host = Host::git(&[("a.txt", "one\n")]);
    // The sandbox's defaults are not asked of a run without one: nothing
    // to say, and nothing for --strict-limits to refuse.
    let mock = MockServer::start(script(vec![bash("echo hi")]));
    let out = host
        .ah(&mock.url())
        .args([
            "--backend",
            "none",
            "--strict-limits",
            "--review",
            "never",
            "say hi",
        ])
        .output()
        .unwrap_or_else(|e| panic!("run ah: {e}"));
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("limits"), "{stderr}");
    let manifest = json_file(&host.run().join("manifest.json"));
    assert_eq!(
        entry(&manifest["limits"], "memory")["by"],
        json!("not_asked")
    );

    // A limit the user named cannot hold on the host: said at the start.
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(script(vec![bash("echo hi")]));
    let out = host
        .ah(&mock.url())
        .args([
            "--backend",
            "none",
            "--memory",
            "512m",
            "--pids-limit",
            "64",
        ])
        .args(["--review", "never", "say hi"])
        .output()
        .unwrap_or_else(|e| panic!("run ah: {e}"));
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("limits not as asked: memory 512m: not enforced: --backend none runs commands on the host; pids 64: not enforced"),
        "one start line says what does not hold:\n{stderr}"
    );
    let manifest = json_file(&host.run().join("manifest.json"));
    assert_eq!(entry(&manifest["limits"], "memory")["by"], json!("none"));

    let refused = MockServer::start(script(vec![bash("echo hi")]));
    let out = host
        .ah(&refused.url())
        .args(["--backend", "none", "--memory", "512m", "--strict-limits"])
        .args(["--review", "never", "say hi"])
        .output()
        .unwrap_or_else(|e| panic!("run ah: {e}"));
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("refusing to run (--strict-limits): memory 512m: not enforced")
            && stderr.contains("ah doctor"),
        "{stderr}"
    );
    assert!(refused.requests().is_empty(), "the model was never asked");
}
