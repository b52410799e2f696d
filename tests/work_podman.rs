//! `ah work` with the podman backend: every phase runs in the run's one
//! container, whose `/work` is an overlay of the project. Plan and check
//! cannot change the patch: `write` is refused there, and a command that
//! changes `/work` is undone (in the container too) and flagged, while do
//! writes as in any run; one patch holds do's change, and the container is
//! gone at the end. An `ah work` run copies nothing of the project, a 50 MB
//! file included.
//!
//! Skipped only when podman is absent and `AH_REQUIRE_PODMAN` is unset (see
//! `support::podman`).

use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::overlay_none::{big_project, stamps};
use crate::support::host::{Host, describe, json_file, run_id};
use crate::support::mock::{MockServer, Reply, Turn};
use crate::support::podman::{no_container_left, podman_ready_blocking};
use crate::support::work::{Script, phase_file, phase_of, sees_what_do_left};
use serde_json::json;

#[test]
fn plan_and_check_cannot_change_the_patch_in_the_one_container() {
    let Some(podman) = podman_ready_blocking() else {
        return;
    };
    let host = Host::git(&[("a.txt", "one\n")]);
    let script = Script::new()
        .call("write", json!({"path": "a.txt", "content": "plan wrote\n"}))
        .bash("touch /work/a.txt /work/new.txt; echo status=$?; ls /work")
        .report("## Validation\n```\ntest -f made.txt\n```\n")
        .end("planned")
        .bash("echo made > /work/made.txt && echo two >> /work/a.txt")
        .report("made made.txt")
        .end("done")
        .bash("rm /work/made.txt && echo three >> /work/a.txt")
        .bash("test -f made.txt && echo STILL-THERE; cat a.txt; ls")
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
    assert_eq!(phase_of(&requests[1]), "plan");
    let refused = requests[1].told();
    assert!(
        refused.contains("/work is read-only in this phase"),
        "{refused}"
    );
    let undone = requests[2].told();
    assert!(
        undone.contains("status=0")
            && undone.contains("step undone")
            && undone.contains("read-only"),
        "{undone}"
    );
    assert_eq!(phase_of(&requests[8]), "check");
    let undone = requests[8].told();
    assert!(
        undone.contains("step undone") && undone.contains("read-only"),
        "{undone}"
    );
    // The next command sees /work as do left it: the undo reached the container.
    sees_what_do_left(&requests[9].told());

    assert_eq!(host.read("a.txt"), "one\ntwo\n");
    assert_eq!(host.read("made.txt"), "made\n");
    assert!(!host.project.join("new.txt").exists());
    let run = host.run();
    assert_eq!(phase_file(&run, "do/do-1.md"), "made made.txt");
    let manifest = json_file(&run.join("manifest.json"));
    let flagged: BTreeSet<(u64, &str)> = manifest["violations"]
        .as_array()
        .unwrap_or_else(|| panic!("{manifest}"))
        .iter()
        .map(|v| {
            (
                v["step"].as_u64().unwrap_or(0),
                v["path"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        flagged,
        BTreeSet::from([(2, "new.txt"), (6, "a.txt"), (6, "made.txt")]),
        "{manifest}"
    );
    assert_eq!(manifest["review"]["decision"], json!("applied"));
    no_container_left(&podman, &run_id(&run));
}

#[test]
fn an_ah_work_run_with_podman_copies_nothing() {
    if podman_ready_blocking().is_none() {
        return;
    }
    let host = big_project();
    host.write("check.sh", "grep -qx hi greet.txt\n");
    host.commit_all("check");
    let before = stamps(&host.project);
    let mut turns = Script::new()
        .bash("cat greet.txt check.sh")
        .report("## Approach\nReplace hello.\n## Validation\n```\nsh check.sh\n```\n")
        .end("planned")
        .bash("echo hi > greet.txt")
        .report("greet.txt now says hi.")
        .end("done")
        .bash("sh check.sh; echo exit=$?")
        .turns();
    // Check's report comes late: the run folder is measured meanwhile,
    // with every phase but act behind it.
    let measured = turns.len() + 1;
    turns.push(Turn::stall(
        Reply::new().tool_use(
            "toolu_90",
            "report",
            json!({"content": "| sh check.sh | pass |\n\noverall: pass\n"}),
        ),
        1,
        Duration::from_secs(5),
    ));
    turns.extend(
        Script::new()
            .end("checked")
            .verdict("done", "check.sh passes")
            .end("verdict given")
            .turns(),
    );
    let mock = MockServer::start(turns);
    let child = host
        .ah(&mock.url())
        .args([
            "work",
            "--review",
            "never",
            "--issue",
            "greet.txt must say hi",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("run ah: {e}"));
    mock.wait_for_requests(measured, Duration::from_secs(120));
    let du = Command::new("du")
        .arg("-skx")
        .arg(host.run())
        .output()
        .unwrap_or_else(|e| panic!("du: {e}"));
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("wait for ah: {e}"));
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("copying the project"), "{stderr}");
    let du = String::from_utf8_lossy(&du.stdout);
    let kib: u64 = du
        .split_whitespace()
        .next()
        .and_then(|kib| kib.parse().ok())
        .unwrap_or_else(|| panic!("du said {du:?}"));
    assert!(
        kib < 5 * 1024,
        "the run folder holds {kib} KiB with a 50 MB file in the project"
    );
    let patch = std::fs::read_to_string(host.run().join("session.patch"))
        .unwrap_or_else(|e| panic!("the patch: {e}"));
    assert!(patch.contains("+hi"), "{patch}");
    assert_eq!(stamps(&host.project), before, "the project was touched");
}
