//! A session goes on from the files its conversation left when the previous
//! run's patch was not applied (saved, aborted), and from the project when
//! it was applied or discarded; after a discard the model is told. Real
//! binary, `--backend none`, mock model; the discard is chosen in a real
//! terminal (tmux).

use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::host::{Host, describe, json_file, run_id};
use crate::support::mock::{MockServer, RecordedRequest};
use crate::support::steps::{bash, script, write};
use crate::support::tmux::{Tmux, ah_script};
use serde_json::{Value, json};

/// Told when the next run goes on from the conversation's files.
const NOT_APPLIED: &str = "The changes of the previous run were not applied to the project yet";
/// Told when it starts from the project.
const FRESH: &str = "The work directory is a fresh copy of the project as it is now";
/// Told after a discard.
const DISCARDED: &str = "The changes of the previous run were discarded by the user; the files are as in the project now";

fn ah(host: &Host, mock: &MockServer, args: &[&str]) -> Output {
    host.ah(&mock.url())
        .args(["--backend", "none"])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run ah: {e}"))
}

/// A second run that reads a.txt and is done.
fn reads_a() -> MockServer {
    MockServer::start(script(vec![bash("cat a.txt")]))
}

/// The text of every block of the request's messages.
fn sent(request: &RecordedRequest) -> String {
    request.body["messages"].to_string()
}

/// What the second run's `cat a.txt` returned.
fn a_as_read(mock: &MockServer) -> String {
    let requests = mock.requests();
    let last = requests.last().expect("a request");
    let results = last.last_message()["content"].as_array().unwrap();
    results
        .iter()
        .find(|b| b["type"] == "tool_result")
        .and_then(|b| b["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

fn manifest(run: &std::path::Path) -> Value {
    json_file(&run.join("manifest.json"))
}

#[test]
fn a_saved_run_is_continued_with_its_own_changes() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let first = MockServer::start(script(vec![write("a.txt", "two\n")]));
    let out = ah(&host, &first, &["--review", "never", "change a"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let saved = host.run();
    assert_eq!(host.read("a.txt"), "one\n", "saved, not applied");

    let second = reads_a();
    let out = ah(&host, &second, &["--review", "never", "go on"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&format!(
            "files restored from run {} step 1",
            run_id(&saved)
        )),
        "{}",
        describe(&out)
    );
    assert!(
        a_as_read(&second).starts_with("two"),
        "{}",
        a_as_read(&second)
    );
    assert!(sent(&second.requests()[0]).contains(NOT_APPLIED));
    let run = host.runs()[1].clone();
    let from = &manifest(&run)["restored_from"];
    assert_eq!(from["because"], json!("not_applied"));
    assert_eq!(from["run_id"], json!(run_id(&saved)));
    // The new patch holds both runs' work and applies to the project.
    let out = host
        .ah(&second.url())
        .args(["apply", &run_id(&run)])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(host.read("a.txt"), "two\n");
}

#[test]
fn an_applied_run_is_continued_from_the_project() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let first = MockServer::start(script(vec![write("a.txt", "two\n")]));
    let out = ah(&host, &first, &["--review", "auto", "change a"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(host.read("a.txt"), "two\n", "applied");
    // The user's own edit after the apply is what the next run sees.
    host.write("a.txt", "three\n");

    let second = reads_a();
    let out = ah(&host, &second, &["--review", "never", "go on"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("files restored"),
        "{}",
        describe(&out)
    );
    assert!(
        a_as_read(&second).starts_with("three"),
        "{}",
        a_as_read(&second)
    );
    assert!(sent(&second.requests()[0]).contains(FRESH));
    assert_eq!(manifest(&host.runs()[1])["restored_from"], Value::Null);
}

#[test]
fn an_aborted_run_sent_again_keeps_its_finished_steps() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let first = MockServer::start(script(vec![
        write("a.txt", "two\n"),
        bash("touch started && sleep 600"),
    ]));
    let mut child = host
        .ah(&first.url())
        .args(["--backend", "none", "--review", "auto", "change a"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_work_file(&host, "started");
    crate::support::send_signal(child.id(), rustix::process::Signal::INT);
    assert_eq!(wait_exit(&mut child), 130);
    assert_eq!(host.read("a.txt"), "one\n", "aborted, not applied");
    let aborted = host.run();
    assert_eq!(manifest(&aborted)["review"]["decision"], json!("aborted"));

    // No prompt: the cut-off turn is sent again, on the files it left.
    let second = reads_a();
    let out = ah(&host, &second, &["--review", "never"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(
        a_as_read(&second).starts_with("two"),
        "{}",
        a_as_read(&second)
    );
    let run = host.runs()[1].clone();
    let from = &manifest(&run)["restored_from"];
    assert_eq!(from["because"], json!("not_applied"));
    assert_eq!(from["step"], json!(1), "the step that finished");
}

#[test]
fn after_a_discard_the_model_is_told_and_the_files_are_the_projects() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let first = MockServer::start(script(vec![write("a.txt", "two\n")]));
    let session = ah_script(&host, &first.url(), "'change a'");
    let Some(tmux) = Tmux::start(&session.path) else {
        return;
    };
    tmux.wait_for("What should happen to this patch?");
    tmux.keys(&["Down", "Down", "Down", "Down", "Enter"]);
    assert_eq!(session.exit_code(), 3, "{}", tmux.screen());
    assert_eq!(
        manifest(&host.run())["review"]["decision"],
        json!("discarded")
    );

    let second = reads_a();
    let out = ah(&host, &second, &["--review", "never", "try another way"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("were discarded"),
        "{}",
        describe(&out)
    );
    assert!(
        a_as_read(&second).starts_with("one"),
        "{}",
        a_as_read(&second)
    );
    let told = sent(&second.requests()[0]);
    assert!(told.contains(DISCARDED), "{told}");
    assert!(told.contains("try another way"), "{told}");
    assert_eq!(manifest(&host.runs()[1])["restored_from"], Value::Null);
}

/// Polls until a run's work copy holds `name` (the tool started).
fn wait_for_work_file(host: &Host, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !host.runs().iter().any(|run| {
        ["work", "upper"]
            .iter()
            .any(|w| run.join(w).join(name).exists())
    }) {
        assert!(Instant::now() < deadline, "the tool never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_exit(child: &mut Child) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code().unwrap_or(-1);
        }
        assert!(Instant::now() < deadline, "ah did not exit after SIGINT");
        std::thread::sleep(Duration::from_millis(20));
    }
}
