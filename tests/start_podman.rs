//! The sandbox starts while the model is asked, through the real binary and
//! real podman. A runtime wrapper holds the container's creation until the
//! test lets it go: where the start is, is observed, never timed. So a test
//! sees the first model request arrive while the container is not even
//! created, a run that ends before its container is up (no tool call, or
//! Ctrl+C) leave none behind, and a start that fails end the run with its
//! own error and exit code, the session as it was. Skipped only when podman
//! is absent and `AH_REQUIRE_PODMAN` is unset (see `support::podman`).

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::Duration;

use crate::support::host::{Host, describe, query, run_id, wait_until};
use crate::support::mock::{MockServer, Reply, Turn};
use crate::support::podman::{no_container_left, podman_ready_blocking, sandbox_folders_gone};
use crate::support::steps::{bash, script};
use serde_json::json;

/// How long a test waits for a run to reach a point it synchronises on.
const SYNC: Duration = Duration::from_secs(60);

/// A container runtime that stops in `create` (the container does not
/// exist yet) until the test opens the gate; every other call goes to runc
/// as it is.
struct Gate {
    dir: PathBuf,
}

impl Gate {
    fn new(host: &Host) -> Gate {
        let dir = host.root.path().join("gate");
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let runc = which::which("runc")
            .or_else(|_| which::which("/usr/sbin/runc"))
            .unwrap_or_else(|e| panic!("runc is needed for the gated runtime: {e}"));
        let script = format!(
            "#!/bin/sh\n\
             case \" $* \" in\n\
             *\" create \"*)\n    \
                 : > '{reached}'\n    \
                 while [ ! -e '{open}' ]; do sleep 0.05; done ;;\n\
             esac\n\
             exec '{runc}' \"$@\"\n",
            reached = dir.join("reached").display(),
            open = dir.join("open").display(),
            runc = runc.display(),
        );
        let gate = Gate { dir };
        std::fs::write(gate.runtime(), script).unwrap_or_else(|e| panic!("runtime: {e}"));
        std::fs::set_permissions(gate.runtime(), std::fs::Permissions::from_mode(0o755))
            .unwrap_or_else(|e| panic!("chmod runtime: {e}"));
        gate
    }

    fn runtime(&self) -> PathBuf {
        self.dir.join("runtime")
    }

    /// Waits until podman is creating the container (and held).
    fn wait_reached(&self) {
        let reached = self.dir.join("reached");
        wait_until("the container's creation to reach the gate", SYNC, || {
            reached.exists()
        });
    }

    fn open(&self) {
        let open = self.dir.join("open");
        std::fs::write(&open, "").unwrap_or_else(|e| panic!("{}: {e}", open.display()));
    }
}

/// Starts ah on `host` with the gated runtime, output captured.
fn spawn_gated(host: &Host, mock: &MockServer, gate: &Gate, task: &str) -> Child {
    host.ah(&mock.url())
        .arg("--runtime")
        .arg(gate.runtime())
        .args(["--review", "never", task])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn ah: {e}"))
}

#[test]
fn the_first_model_request_does_not_wait_for_the_container() {
    let Some(podman) = podman_ready_blocking() else {
        return;
    };
    let host = Host::git(&[("a.txt", "one\n")]);
    let gate = Gate::new(&host);
    let mock = MockServer::start(script(vec![bash("cat a.txt")]));
    let child = spawn_gated(&host, &mock, &gate, "look");

    // The model is asked while the container is held before it exists.
    mock.wait_for_requests(1, SYNC);
    gate.wait_reached();
    // Its tool call waits for the container.
    assert_eq!(mock.requests().len(), 1);
    gate.open();
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("wait for ah: {e}"));
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let told = mock.requests()[1].told();
    assert!(told.starts_with("one\n"), "{told}");
    no_container_left(&podman, &run_id(&host.run()));
}

#[test]
fn a_run_that_calls_no_tool_ends_before_its_container_exists_and_leaves_none() {
    let Some(podman) = podman_ready_blocking() else {
        return;
    };
    let host = Host::git(&[("a.txt", "one\n")]);
    let gate = Gate::new(&host);
    // The answer takes a while, so that podman is creating the container
    // by the time it is over.
    let slow = Turn::stall(
        Reply::new().text("nothing to do"),
        1,
        Duration::from_secs(5),
    );
    let mock = MockServer::start(vec![slow]);
    let mut child = spawn_gated(&host, &mock, &gate, "nothing");

    // The run ends while its container is held half made (podman has
    // named it, runc has not created it): it did not wait for the start,
    // nor for a removal.
    gate.wait_reached();
    let status = child.wait().unwrap_or_else(|e| panic!("wait for ah: {e}"));
    assert_eq!(status.code(), Some(0));
    // (podman cannot list it meanwhile: its creation holds its lock.)
    let run = host.run();
    let manifest = std::fs::read_to_string(run.join("manifest.json"))
        .unwrap_or_else(|e| panic!("manifest: {e}"));
    assert!(manifest.contains("\"finished_at\""), "{manifest}");
    // Its cleanup waits for podman to make the container, then removes it
    // and the run's folders.
    gate.open();
    no_container_left(&podman, &run_id(&run));
    sandbox_folders_gone(&run);
}

#[test]
fn an_abort_while_the_container_starts_leaves_no_container() {
    let Some(podman) = podman_ready_blocking() else {
        return;
    };
    let host = Host::git(&[("a.txt", "one\n")]);
    let gate = Gate::new(&host);
    let stalled = Turn::stall(Reply::new().text("thinking"), 2, Duration::from_secs(600));
    let mock = MockServer::start(vec![stalled]);
    let child = spawn_gated(&host, &mock, &gate, "think");

    mock.wait_for_requests(1, SYNC);
    gate.wait_reached();
    crate::support::send_signal(child.id(), rustix::process::Signal::INT);
    gate.open();
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("wait for ah: {e}"));
    assert_eq!(out.status.code(), Some(130), "{}", describe(&out));
    no_container_left(&podman, &run_id(&host.run()));
    sandbox_folders_gone(&host.run());
}

#[test]
fn a_sandbox_that_cannot_start_ends_the_run_and_leaves_the_session_as_it_was() {
    let Some(podman) = podman_ready_blocking() else {
        return;
    };
    let host = Host::git(&[("a.txt", "one\n")]);
    let db = host.root.path().join("session.db");
    let first = MockServer::start(vec![Turn::reply(Reply::new().text("hello"))]);
    let out = host
        .ah(&first.url())
        .arg("--db")
        .arg(&db)
        .args(["--backend", "none", "--review", "never", "hello"])
        .output()
        .unwrap_or_else(|e| panic!("run ah: {e}"));
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let messages = "SELECT seq, role FROM messages ORDER BY seq";
    let before = query(&db, messages);

    // The model asks for a tool while the container fails to start.
    let mock = MockServer::start(script(vec![bash("echo ran > b.txt")]));
    let out = host
        .ah(&mock.url())
        .arg("--db")
        .arg(&db)
        .args(["--runtime", "/bin/false", "--review", "never", "go"])
        .output()
        .unwrap_or_else(|e| panic!("run ah: {e}"));
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("could not start the sandbox container") && stderr.contains("ah doctor"),
        "{stderr}"
    );
    assert!(
        mock.requests().len() <= 1,
        "no tool result reached the model"
    );
    assert_eq!(query(&db, messages), before, "the session is as it was");
    assert_eq!(before.last(), Some(&vec![json!(2), json!("assistant")]));
    assert!(!host.project.join("b.txt").exists());
    let run = host
        .runs()
        .pop()
        .unwrap_or_else(|| panic!("no run directory"));
    no_container_left(&podman, &run_id(&run));
}
