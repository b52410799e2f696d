//! Snapshots of `ah doctor`, the text people read when the sandbox will
//! not start: which checks it makes, in what order, what it says of each
//! and the fix it names. It checks the real machine, so what describes the
//! host (paths, podman's version, the cgroup layout, limits) is replaced by
//! `support::snap::doctor_settings`; what is left is the same here and on
//! a fresh CI machine set up by `scripts/setup`, which runs the tests as
//! root, as this snapshot does (a user's rootless checks are other lines).

use crate::support::host::{Host, describe};
use crate::support::podman::podman_ready_blocking;
use crate::support::snap;

/// Whether the host is one the snapshot describes: podman with the image
/// (else skipped as the podman tests are) and root (else skipped outside CI).
fn described_host() -> bool {
    if podman_ready_blocking().is_none() {
        return false;
    }
    if !rustix::process::geteuid().is_root() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs the tests as root; the doctor snapshot is of root's checks"
        );
        eprintln!("skipped: the doctor snapshot is of root's checks");
        return false;
    }
    true
}

#[test]
fn a_host_that_is_ready() {
    if !described_host() {
        return;
    }
    let host = Host::git(&[("a.txt", "one\n")]);
    let out = host
        .ah("http://127.0.0.1:9")
        .arg("doctor")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let _filters = snap::doctor_settings(&host).bind_to_scope();
    insta::assert_snapshot!(snap::output(&out));
}

#[test]
fn a_missing_image_and_its_fix() {
    if !described_host() {
        return;
    }
    let host = Host::git(&[("a.txt", "one\n")]);
    let out = host
        .ah("http://127.0.0.1:9")
        .args(["doctor", "--image", "localhost/ah-missing-image:never"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let _filters = snap::doctor_settings(&host).bind_to_scope();
    insta::assert_snapshot!(snap::output(&out));
}
