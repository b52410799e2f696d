//! Snapshots of how a run ends when its output is piped (`NO_COLOR=1`,
//! `--backend none`): the lines that say what became of the patch and the
//! end line (`■ … · review: DECISION`) for each way a run ends — applied,
//! saved, aborted by a signal, failed on a model error, stopped at the tool
//! call limit — with the exit code each one gives. Scripts can read the
//! exit code; people read these lines to know whether their repository
//! changed, so a change to them must be seen (`tests/snapshots/`).

use std::process::{Output, Stdio};
use std::time::Duration;

use serde_json::json;

use crate::support::host::{Host, describe, wait_until};
use crate::support::mock::{MockServer, Reply, Turn};
use crate::support::snap;
use crate::support::steps::{script, write};

/// `ah --backend none ARGS "change the notes"` on a one-file project,
/// answered by `turns`, to its end.
fn run(turns: Vec<Turn>, args: &[&str]) -> (Host, Output) {
    let host = Host::git(&[("notes.txt", "old\n")]);
    let mock = MockServer::start(turns);
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none"])
        .args(args)
        .arg("change the notes")
        .output()
        .unwrap();
    (host, out)
}

/// One write, then "done".
fn one_write() -> Vec<Turn> {
    script(vec![write("notes.txt", "new\n")])
}

#[test]
fn applied() {
    let (host, out) = run(one_write(), &["--review", "auto"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let _filters = snap::settings(&host).bind_to_scope();
    insta::assert_snapshot!(snap::output(&out));
}

#[test]
fn saved() {
    let (host, out) = run(one_write(), &["--review", "never"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let _filters = snap::settings(&host).bind_to_scope();
    insta::assert_snapshot!(snap::output(&out));
}

#[test]
fn failed_on_a_model_error() {
    let turns = vec![
        Turn::reply(Reply::new().tool_use(
            "toolu_1",
            "write",
            json!({"path": "notes.txt", "content": "new\n"}),
        )),
        Turn::error(
            400,
            "invalid_request_error",
            "messages: too many tool results",
        ),
    ];
    let (host, out) = run(turns, &["--review", "auto"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let _filters = snap::settings(&host).bind_to_scope();
    insta::assert_snapshot!(snap::output(&out));
}

#[test]
fn stopped_at_the_tool_call_limit() {
    let turns = script(vec![
        write("notes.txt", "new\n"),
        write("more.txt", "more\n"),
    ]);
    let (host, out) = run(turns, &["--review", "auto", "--max-tools", "1"]);
    assert_eq!(out.status.code(), Some(4), "{}", describe(&out));
    let _filters = snap::settings(&host).bind_to_scope();
    insta::assert_snapshot!(snap::output(&out));
}

#[test]
fn aborted_by_sigint() {
    let host = Host::git(&[("notes.txt", "old\n")]);
    let started = host.root.path().join("started");
    // Waits for a file nobody makes: only the signal ends it.
    let forever = format!(
        "touch '{}'; while [ ! -e never ]; do sleep 0.05; done",
        started.display()
    );
    let mock = MockServer::start(vec![
        Turn::reply(Reply::new().tool_use(
            "toolu_1",
            "write",
            json!({"path": "notes.txt", "content": "new\n"}),
        )),
        Turn::reply(Reply::new().tool_use("toolu_2", "bash", json!({ "command": forever }))),
    ]);
    let child = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "auto", "change the notes"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("the command to start", Duration::from_secs(60), || {
        started.exists()
    });
    assert!(crate::support::send_signal(
        child.id(),
        rustix::process::Signal::INT
    ));
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", describe(&out));
    // The signal's notice races the killed command's line (the stop goes
    // out first, then the notice, after a blank line when the display is
    // writing just then): it is pinned on its own.
    let text = snap::output(&out);
    let at = text
        .find("aborting:")
        .unwrap_or_else(|| panic!("no notice of the signal:\n{text}"));
    let end = text[at..].find('\n').map_or(text.len(), |n| at + n + 1);
    let start = if text[..at].ends_with("\n\n") {
        at - 1
    } else {
        at
    };
    let shown = format!(
        "{}{}--- said on the signal, before or after the command's line\n{}",
        &text[..start],
        &text[end..],
        &text[at..end]
    );
    let _filters = snap::settings(&host).bind_to_scope();
    insta::assert_snapshot!(shown);
}
