//! `ah review [RUN]` at a real terminal (tmux): the review of a saved run
//! opened again — the newest run not applied by default — applies it, or
//! revises it: a new run of its session whose first message carries the
//! note and whose files go on from the saved run's.

use crate::support::host::{Host, json_file};
use crate::support::mock::{MockServer, Turn};
use crate::support::org::last_user_text;
use crate::support::tmux::{Tmux, ah_script};
use serde_json::json;

/// One run's work: write `content` to a.txt, then say it is done.
fn writes(n: usize, content: &str) -> [Turn; 2] {
    crate::support::steps::write_then_say(n, "a.txt", content, &format!("run {n} done"))
}

const QUESTION: &str = "What should happen to this patch?";

/// A run whose patch is saved, not applied.
fn saved_run(host: &Host, mock: &MockServer) {
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "never", "change a"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(host.read("a.txt"), "one\n");
}

#[test]
fn review_opens_the_newest_saved_run_again_and_applies_it() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(writes(1, "two\n").into_iter().collect());
    saved_run(&host, &mock);
    let script = ah_script(&host, &mock.url(), "review");
    let Some(tmux) = Tmux::start(&script.path) else {
        return;
    };
    let screen = tmux.wait_for(QUESTION);
    assert!(screen.contains("+two"), "{screen}");
    tmux.keys(&["Enter"]);
    assert_eq!(script.exit_code(), 0, "{}", tmux.history());
    assert_eq!(host.read("a.txt"), "two\n");
    let manifest = json_file(&host.run().join("manifest.json"));
    assert_eq!(manifest["applied"], json!(true));
    assert_eq!(manifest["review"]["decision"], json!("applied"));
    // Nothing left to review.
    let again = host.ah(&mock.url()).arg("review").output().unwrap();
    assert_eq!(again.status.code(), Some(1), "{again:?}");
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(
        stderr.contains("no run with a patch that was not applied"),
        "{stderr}"
    );
}

#[test]
fn revise_from_a_saved_review_starts_a_run_that_goes_on_from_its_files() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mut turns: Vec<Turn> = writes(1, "two\n").into_iter().collect();
    turns.extend(writes(2, "two\nthree\n"));
    let mock = MockServer::start(turns);
    saved_run(&host, &mock);
    let first = host.run();
    let id = first.file_name().unwrap().to_string_lossy().into_owned();
    let script = ah_script(&host, &mock.url(), &format!("review {}", &id[..12]));
    let Some(tmux) = Tmux::start(&script.path) else {
        return;
    };
    tmux.wait_for(QUESTION);
    // apply all, choose files, choose hunks, save only, discard, revise.
    tmux.keys(&["Down", "Down", "Down", "Down", "Down", "Enter"]);
    tmux.wait_for("What should the model change?");
    tmux.keys(&["add a line three", "Enter"]);
    let screen = tmux.wait_for_after("run 2 done", QUESTION);
    assert!(screen.contains("+three"), "{screen}");
    tmux.keys(&["Enter"]);
    assert_eq!(script.exit_code(), 0, "{}", tmux.history());
    // The new run started from the saved run's files and applied both.
    assert_eq!(host.read("a.txt"), "two\nthree\n");
    let requests = mock.requests();
    let sent = last_user_text(&requests[2]);
    assert!(sent.contains("add a line three"), "{sent}");
    assert!(sent.contains("after your run ended"), "{sent}");
    assert_eq!(host.runs().len(), 2);
}
