//! "Revise" in a `--review ask` review at a real terminal (tmux): the user's
//! note goes to the model as the next user message of the same run, the
//! agent goes on in the same sandbox and work copy, and the review opens
//! again on the new patch; after three rounds the user applies. On `none`
//! and on podman.

use crate::support::host::{Host, json_file};
use crate::support::mock::{MockServer, Turn};
use crate::support::org::last_user_text;
use crate::support::podman::podman_ready_blocking;
use crate::support::tmux::{Tmux, ah_script_on};
use serde_json::json;
use std::time::Duration;

/// Writes `content` to a.txt, then says it is done: one round's work.
fn round(n: usize, content: &str) -> [Turn; 2] {
    crate::support::steps::write_then_say(n, "a.txt", content, &format!("round {n} done"))
}

const QUESTION: &str = "What should happen to this patch?";
/// "revise" is the sixth choice.
const TO_REVISE: [&str; 6] = ["Down", "Down", "Down", "Down", "Down", "Enter"];

fn three_rounds_of_revise_then_apply(backend: &str) {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(
        [
            round(1, "two\n"),
            round(2, "three\n"),
            round(3, "four\n"),
            round(4, "five\n"),
        ]
        .into_iter()
        .flatten()
        .collect(),
    );
    let script = ah_script_on(&host, &mock.url(), backend, "'change a'");
    let Some(tmux) = Tmux::start(&script.path) else {
        return;
    };
    let notes = ["not two: three", "make it four", "five, please"];
    for (i, (note, shown)) in notes.iter().zip(["+two", "+three", "+four"]).enumerate() {
        let screen = tmux.wait_for_after(&format!("round {} done", i + 1), QUESTION);
        assert!(screen.contains(shown), "round {}:\n{screen}", i + 1);
        assert!(screen.contains("revise: send the model back"), "{screen}");
        tmux.keys(&TO_REVISE);
        tmux.wait_for("What should the model change?");
        tmux.keys(&[note, "Enter"]);
        // The note is the next user message of the run.
        let requests = mock.wait_for_requests(2 * (i + 1) + 1, Duration::from_secs(60));
        let sent = last_user_text(&requests[2 * (i + 1)]);
        assert!(sent.contains(note), "round {}: {sent}", i + 1);
        assert!(sent.contains("nothing was applied"), "{sent}");
        assert_eq!(host.read("a.txt"), "one\n", "nothing applied yet");
    }
    let screen = tmux.wait_for_after("round 4 done", QUESTION);
    assert!(screen.contains("+five"), "{screen}");
    tmux.keys(&["Enter"]);
    assert_eq!(script.exit_code(), 0, "{}", tmux.history());
    assert_eq!(host.read("a.txt"), "five\n");
    // One run, in one sandbox: `run` finds exactly one run folder.
    let run = host.run();
    let manifest = json_file(&run.join("manifest.json"));
    assert_eq!(manifest["review"]["decision"], json!("applied"));
    let rounds = manifest["review"]["rounds"].as_array().unwrap();
    let recorded: Vec<&str> = rounds.iter().map(|r| r["note"].as_str().unwrap()).collect();
    assert_eq!(recorded, notes);
    assert_eq!(mock.pending_turns(), 0);
}

#[test]
fn three_rounds_of_revise_then_apply_without_a_sandbox() {
    three_rounds_of_revise_then_apply("none");
}

#[test]
fn three_rounds_of_revise_then_apply_on_podman() {
    if podman_ready_blocking().is_none() {
        return;
    }
    three_rounds_of_revise_then_apply("podman");
}

#[test]
fn without_a_terminal_there_is_no_revise() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(round(1, "two\n").into_iter().collect());
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "ask", "change a"])
        .output()
        .unwrap();
    assert!(
        out.status.success() || out.status.code() == Some(3),
        "{out:?}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no terminal to ask on"), "{stderr}");
    assert!(!stderr.contains("revise"), "{stderr}");
    assert_eq!(mock.requests().len(), 2, "the model is not asked again");
}
