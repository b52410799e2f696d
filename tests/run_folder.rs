//! The run folder on the host is its owner's alone: the container's writes
//! land in `.ah/runs/ID/upper`, and a set-uid file a command makes there
//! (owned by root under rootful podman, by the project's owner under
//! rootless podman) must not be something another local user can run while
//! the run lasts. `.ah/`, `.ah/runs/` and every run folder are mode 0700,
//! those of an existing project made so again. Through the real binary with
//! podman (rootful: the tests run as root); the other user is `nobody`.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::host::{Host, describe, wait_until};
use crate::support::mock::MockServer;
use crate::support::podman::{podman_ready_blocking, work_view};
use crate::support::steps::{bash, script};

/// The file the test drops into `/work` to let the waiting step end.
const GO: &str = ".ah-test-go";

/// A run folder of an older ah, left open to every user.
const OLD_RUN: &str = "01HZY8J5Q8W3V4N1T2C6B7D9EF";

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("chmod {}: {e}", path.display()));
}

#[test]
fn another_user_cannot_run_a_set_uid_file_the_sandbox_made() {
    if podman_ready_blocking().is_none() {
        return;
    }
    let host = Host::git(&[("a.txt", "one\n")]);
    // Every user can reach the project, as in a home folder of mode 0755;
    // its `.ah` comes from an older ah, open to all as well.
    chmod(host.root.path(), 0o755);
    let old = host.project.join(".ah/runs").join(OLD_RUN);
    std::fs::create_dir_all(&old).unwrap();
    for dir in [
        &host.project.join(".ah"),
        &host.project.join(".ah/runs"),
        &old,
    ] {
        chmod(dir, 0o755);
    }
    let mock = MockServer::start(script(vec![bash(&format!(
        "cp /usr/bin/id ./id && chmod 4755 ./id && \
         for i in $(seq 600); do [ -e {GO} ] && rm {GO} && exit 0; sleep 0.1; done; exit 1"
    ))]));
    let child = host
        .ah(&mock.url())
        .args(["--review", "never", "make an id"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn ah: {e}"));

    let new_run = || host.runs().into_iter().find(|run| !run.ends_with(OLD_RUN));
    wait_until("the run's folder", Duration::from_secs(60), || {
        new_run().is_some()
    });
    let run = new_run().unwrap();
    let planted = run.join("upper/id");
    wait_until("the set-uid copy of id", Duration::from_secs(120), || {
        std::fs::symlink_metadata(&planted).is_ok_and(|m| m.permissions().mode() & 0o4000 != 0)
    });
    // `runuser` drops every capability before it runs the file (`setpriv`
    // keeps root's until the exec, which lets it through any folder).
    let tried = Command::new("runuser")
        .args(["-u", "nobody", "--"])
        .arg(&planted)
        .output()
        .unwrap_or_else(|e| panic!("runuser: {e}"));
    std::fs::write(work_view(&run).join(GO), "").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));

    let said = describe(&tried);
    assert!(!said.contains("euid=0"), "another user became root: {said}");
    assert!(
        !tried.status.success() && said.contains("Permission denied"),
        "another user reached the upper folder: {said}"
    );
    for dir in [
        host.project.join(".ah"),
        host.project.join(".ah/runs"),
        run,
        old,
    ] {
        assert_eq!(mode(&dir), 0o700, "{}", dir.display());
    }
}
