//! `ah work` with the podman backend: plan and check run in a second
//! container that mounts `/work` read-only, so their commands cannot write
//! there at all (the kernel refuses, nothing needs undoing), while do writes
//! through the run's own container into the same work copy; one patch holds
//! do's change, and both containers are gone at the end.
//!
//! Skipped only when podman is absent and `AH_REQUIRE_PODMAN` is unset (see
//! `support::podman`).

use crate::support::host::{Host, describe, json_file, run_id};
use crate::support::mock::MockServer;
use crate::support::podman::{no_container_left, podman_ready_blocking};
use crate::support::work::{Script, phase_file, phase_of};
use serde_json::json;

#[test]
fn plan_and_check_see_work_read_only_in_their_own_container() {
    let Some(podman) = podman_ready_blocking() else {
        return;
    };
    let host = Host::git(&[("a.txt", "one\n")]);
    let try_write = "touch /work/a.txt /work/new.txt; echo status=$?; \
                     mount | grep ' /work ' | grep -o '(ro[,)]' ; ls /work";
    let script = Script::new()
        .bash(try_write)
        .report("## Validation\n```\ntest -f made.txt\n```\n")
        .end("planned")
        .bash("echo made > /work/made.txt && echo two >> /work/a.txt")
        .report("made made.txt")
        .end("done")
        .bash(&format!(
            "rm /work/made.txt; {try_write}; test -f made.txt && echo STILL-THERE"
        ))
        .report("test -f made.txt: pass")
        .end("checked")
        .verdict("done", "made.txt exists")
        .end("verdict given");
    let mock = MockServer::start(script.turns());
    let out = host
        .ah(&mock.url())
        .args(["work", "--review", "auto", "--issue", "make made.txt"])
        .output()
        .unwrap_or_else(|e| panic!("run ah: {e}"));
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));

    let requests = mock.requests();
    let plan_told = requests[1].told();
    assert_eq!(phase_of(&requests[1]), "plan");
    assert!(plan_told.contains("Read-only file system"), "{plan_told}");
    assert!(
        plan_told.contains("status=1") && plan_told.contains("(ro"),
        "{plan_told}"
    );
    assert!(
        !plan_told.lines().any(|l| l == "new.txt"),
        "ls: {plan_told}"
    );
    let check_told = requests[7].told();
    assert_eq!(phase_of(&requests[7]), "check");
    assert!(check_told.contains("Read-only file system"), "{check_told}");
    assert!(check_told.contains("STILL-THERE"), "{check_told}");
    // The kernel refused the writes: nothing needed undoing.
    assert!(!check_told.contains("step undone"), "{check_told}");

    assert_eq!(host.read("a.txt"), "one\ntwo\n");
    assert_eq!(host.read("made.txt"), "made\n");
    assert!(!host.project.join("new.txt").exists());
    let run = host.run();
    assert_eq!(phase_file(&run, "do/do-1.md"), "made made.txt");
    let manifest = json_file(&run.join("manifest.json"));
    assert_eq!(manifest["violations"], json!([]));
    assert_eq!(manifest["review"]["decision"], json!("applied"));
    let id = run_id(&run);
    no_container_left(&podman, &id);
}
