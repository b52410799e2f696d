//! `ah org` with the podman backend: the agents share one container and one
//! work copy (one agent reads what another wrote), one agent's violation is
//! undone and told to it alone, and one patch holds the work; the container
//! is gone at the end.
//!
//! Skipped only when podman is absent and `AH_REQUIRE_PODMAN` is unset (see
//! `support::podman`).

use crate::support::host::{Host, describe, run_id};
use crate::support::mock::{MockServer, Reply, Turn};
use crate::support::podman::{containers_of, podman_ready_blocking};
use serde_json::json;

fn say(text: &str) -> Turn {
    Turn::reply(Reply::new().text(text))
}

fn bash(id: &str, command: &str) -> Turn {
    Turn::reply(Reply::new().tool_use(id, "bash", json!({ "command": command })))
}

#[test]
fn agents_share_one_sandbox_and_one_patch() {
    let Some(podman) = podman_ready_blocking() else {
        return;
    };
    let host = Host::git(&[("README.md", "hello\n")]);
    let mock = MockServer::start_agents(vec![
        (
            "coder",
            vec![
                bash("t1", "echo from-coder > /work/made.txt"),
                bash("t2", "echo nope > /work/locked.txt"),
                say("Made it. @@tester check made.txt"),
            ],
        ),
        (
            "tester",
            vec![
                bash("t3", "cat /work/made.txt; ls /work"),
                say("It says from-coder."),
            ],
        ),
    ]);
    let out = host
        .ah(&mock.url())
        .args(["org", "--review", "auto", "--deny", "locked.txt"])
        .args(["--agents", "coder:opus,tester:opus", "Make a file."])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let requests = mock.requests();
    let agents: Vec<String> = requests.iter().filter_map(|r| r.agent()).collect();
    assert_eq!(agents, ["coder", "coder", "coder", "tester", "tester"]);
    // The violation was undone and told to the coder.
    assert!(
        requests[2].told().contains("locked.txt"),
        "{}",
        requests[2].told()
    );
    // The tester reads the coder's file in the same /work.
    let seen = requests[4].told();
    assert!(seen.contains("from-coder"), "{seen}");
    assert!(!seen.contains("locked.txt"), "{seen}");
    // One patch, applied.
    assert_eq!(host.read("made.txt"), "from-coder\n");
    assert!(!host.project.join("locked.txt").exists());
    let id = run_id(&host.run());
    assert_eq!(containers_of(&podman, &id), "", "no container left");
}
