//! `ah org` with the podman backend: the agents share one container and one
//! work copy (one agent reads what another wrote), one agent's violation is
//! undone and told to it alone, and one patch holds the work; the container
//! is gone at the end.
//!
//! Skipped only when podman is absent and `AH_REQUIRE_PODMAN` is unset (see
//! `support::podman`).

use crate::support::host::{Host, describe, run_id};
use crate::support::mock::{MockServer, Reply, Turn};
use crate::support::org::say;
use crate::support::podman::{no_container_left, podman_ready_blocking};
use serde_json::json;

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
    no_container_left(&podman, &id);
}

/// Longer than a start with a runtime that fails at once takes.
const SLOW_ANSWER: std::time::Duration = std::time::Duration::from_secs(10);

#[test]
fn a_failed_start_takes_the_answer_back_and_it_reaches_the_asker_once() {
    let Some(_podman) = podman_ready_blocking() else {
        return;
    };
    let host = Host::git(&[("README.md", "hello\n")]);
    let mock = MockServer::start_agents(vec![
        // The model is asked while the container starts: the failed run
        // may use turns too (its messages are taken back with it). Its
        // answer takes long enough for the start to fail first: a run
        // that needs no tool does not wait for a start still under way.
        (
            "lead",
            vec![
                say("@@user Red or blue?"),
                Turn::stall(Reply::new().text("Blue then."), 1, SLOW_ANSWER),
                say("Blue then."),
            ],
        ),
        ("coder", vec![say("ok"), say("ok")]),
    ]);
    let org = |args: &[&str]| {
        host.ah(&mock.url())
            .args(["org", "--review", "never"])
            .args(args)
            .output()
            .unwrap()
    };
    let out = org(&["--agents", "lead:opus,coder:opus", "Paint."]);
    assert_eq!(out.status.code(), Some(5), "{}", describe(&out));
    let session = host.sessions()[0].clone();
    let id = session.file_stem().unwrap().to_string_lossy().to_string();
    // The container cannot start: the answer is taken back with the run.
    let out = org(&["--runtime", "/bin/false", "-S", &id, "Blue."]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let out = org(&["-S", &id, "Blue."]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let requests = mock.requests();
    let agents: Vec<String> = requests.iter().filter_map(|r| r.agent()).collect();
    let last = requests.len();
    assert_eq!(agents[last - 2..], ["lead", "coder"], "{agents:?}");
    let answer = requests[last - 2].last_message().to_string();
    assert_eq!(answer.matches("Blue.").count(), 1, "{answer}");
    assert!(answer.contains("answer to your question"), "{answer}");
    let coder = requests[last - 1].last_message().to_string();
    assert!(!coder.contains("Blue."), "{coder}");
}
