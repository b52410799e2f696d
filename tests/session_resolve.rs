//! Which session a command uses (`--name`, `-S`, `-n`, `--db`, the most
//! recent one) and `ah` without a prompt, which sends a cut-off turn again.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

use crate::support::host::{Host, describe, query};
use crate::support::mock::{MockServer, Reply, Turn};
use serde_json::{Value, json};

fn run(host: &Host, mock: &MockServer, args: &[&str]) -> Output {
    host.ah(&mock.url())
        .args(["--backend", "none", "--review", "never"])
        .args(args)
        .output()
        .unwrap()
}

/// A session command (no run flags: session commands refuse them).
fn command(host: &Host, args: &[&str]) -> Output {
    host.ah("http://127.0.0.1:9").args(args).output().unwrap()
}

fn ok(out: Output) -> String {
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    String::from_utf8(out.stdout).unwrap()
}

fn id(db: &Path) -> String {
    db.file_stem().unwrap().to_string_lossy().into_owned()
}

/// The prompts (first text of each user message) on the session's branch.
fn prompts(host: &Host, which: &[&str]) -> Vec<String> {
    let mut args = vec!["scan", "--json"];
    args.extend_from_slice(which);
    let scan: Value = serde_json::from_str(&ok(command(host, &args))).unwrap();
    scan.as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| {
            m["summary"][0]
                .as_str()
                .unwrap()
                .trim_matches('"')
                .to_string()
        })
        .collect()
}

#[test]
fn sessions_are_found_by_name_prefix_new_db_and_recency() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(
        (0..5)
            .map(|i| Turn::reply(Reply::new().text(format!("answer {i}"))))
            .collect(),
    );
    ok(run(&host, &mock, &["--name", "alpha", "p1"]));
    ok(run(&host, &mock, &["-n", "p2"]));
    // The name finds alpha again, though p2's session is newer.
    ok(run(&host, &mock, &["--name", "alpha", "p3"]));
    let dbs = host.sessions();
    assert_eq!(dbs.len(), 2);
    let (alpha, other) = (&dbs[0], &dbs[1]);
    assert_eq!(
        query(alpha, "SELECT value FROM context WHERE key = 'name'"),
        [[json!("alpha")]]
    );
    assert_eq!(prompts(&host, &["--name", "alpha"]), ["p1", "p3"]);
    // The default is the most recent session.
    assert_eq!(prompts(&host, &[]), ["p2"]);

    // -S: a unique prefix, in any case.
    let prefix = id(alpha)[..20].to_ascii_lowercase();
    assert_eq!(prompts(&host, &["-S", &prefix]), ["p1", "p3"]);
    // Ambiguous: both sessions are listed with their first prompt.
    let common: String = id(alpha)
        .chars()
        .zip(id(other).chars())
        .take_while(|(a, b)| a == b)
        .map(|(a, _)| a)
        .collect();
    let out = command(&host, &["scan", "-S", &common]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("matches 2 sessions"), "{err}");
    assert!(err.contains(&format!("{}  p1", id(alpha))), "{err}");
    assert!(err.contains(&format!("{}  p2", id(other))), "{err}");
    // None.
    let out = command(&host, &["scan", "-S", "zzz"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no session"));

    // One flag at a time; -n --name only for a name not taken.
    let out = run(&host, &mock, &["-n", "--name", "alpha", "p"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("exists already"));
    let out = run(&host, &mock, &["-n", "-S", &id(alpha), "p"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));

    // --db: a new file is created by a run; commands need an existing one.
    let db = host.project.join("elsewhere.db");
    let db_arg = db.to_str().unwrap();
    let out = command(&host, &["scan", "--db", db_arg]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(!db.exists());
    ok(run(&host, &mock, &["--db", db_arg, "p4"]));
    assert_eq!(prompts(&host, &["--db", db_arg]), ["p4"]);

    // Two sessions with one name: an error that lists them.
    rusqlite::Connection::open(other)
        .unwrap()
        .execute(
            "INSERT INTO context (key, value) VALUES ('name', 'alpha')",
            [],
        )
        .unwrap();
    let out = run(&host, &mock, &["--name", "alpha", "p5"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("2 sessions are named \"alpha\"")
            && err.contains(&id(alpha))
            && err.contains(&id(other)),
        "{err}"
    );
    // No model call was made for any refused command.
    assert_eq!(mock.requests().len(), 4);
}

#[test]
fn no_prompt_sends_a_failed_turn_again_and_refuses_a_finished_one() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(vec![
        Turn::reply(Reply::new().text("first answer")),
        Turn::error(400, "invalid_request_error", "try later"),
        Turn::reply(Reply::new().text("second answer")),
    ]);
    ok(run(&host, &mock, &["first"]));
    let out = run(&host, &mock, &["second"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    // The head is the unanswered prompt: `ah` alone asks again.
    ok(run(&host, &mock, &[]));
    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[2].body["messages"], requests[1].body["messages"]);
    assert_eq!(prompts(&host, &[]), ["first", "second"]);

    // Now the head is a finished answer: nothing to continue.
    let out = run(&host, &mock, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("nothing to continue") && err.contains("give a prompt"),
        "{err}"
    );
    // A new session has nothing to continue either.
    let out = run(&host, &mock, &["-n"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no prompt given"));
    assert_eq!(mock.requests().len(), 3);
    assert_eq!(
        host.sessions().len(),
        1,
        "-n without a prompt creates nothing"
    );
}

#[test]
fn no_prompt_after_an_abort_mid_stream_sends_the_same_conversation() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let reply = Reply::new().text("The first half of my answer, and the second half");
    let mock = MockServer::start(vec![
        Turn::stall(reply, 6, Duration::from_secs(60)).piece_size(4),
        Turn::reply(Reply::new().text("a whole answer")),
    ]);
    let mut child = host
        .ah(&mock.url())
        .args([
            "--backend",
            "none",
            "--review",
            "never",
            "--json",
            "explain",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // Wait until some text has streamed, then interrupt.
    loop {
        let line = lines.next().expect("ah ended before streaming").unwrap();
        let event: Value = serde_json::from_str(&line).unwrap();
        if event["type"] == "text_delta" {
            break;
        }
    }
    crate::support::send_signal(child.id(), rustix::process::Signal::INT);
    lines.for_each(drop);
    assert_eq!(child.wait().unwrap().code(), Some(130));
    let db = &host.sessions()[0];
    let last = query(
        db,
        "SELECT role, stop_reason FROM messages ORDER BY seq DESC LIMIT 1",
    );
    assert_eq!(last, [[json!("assistant"), json!("aborted")]]);

    ok(run(&host, &mock, &[]));
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].body["messages"], requests[0].body["messages"]);
    // The new answer is a sibling of the cut one; the head is the new one.
    let tree = ok(command(&host, &["tree"]));
    assert!(tree.contains("[2 branches]"), "{tree}");
    assert!(
        tree.contains("> ") && tree.contains("\"a whole answer\"  [tip]"),
        "{tree}"
    );
}
