//! Model-call failures through the real binary: what is retried (overload,
//! rate limits with `retry-after`, cut streams), what fails at once (other
//! 4xx, with the API's own message), and that each retry is recorded.

use std::time::{Duration, Instant};

use crate::support::host::{Host, describe, query};
use crate::support::mock::{MockServer, Reply, Turn};
use serde_json::json;

fn run(host: &Host, mock: &MockServer) -> std::process::Output {
    host.ah(&mock.url())
        .args(["--backend", "none", "--review", "never", "say hi"])
        .output()
        .unwrap()
}

#[test]
fn overload_is_retried_and_recorded() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(vec![
        Turn::error(529, "overloaded_error", "Overloaded").retry_after(0),
        Turn::error(503, "api_error", "try later"),
        Turn::reply(Reply::new().text("hi")),
    ]);
    let out = run(&host, &mock);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(mock.requests().len(), 3);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("retry 1") && stderr.contains("retry 2"),
        "{stderr}"
    );
    let db = &host.sessions()[0];
    let retries = query(
        db,
        "SELECT details FROM events WHERE event_type = 'retry' ORDER BY id",
    );
    assert_eq!(retries.len(), 2);
    let texts = query(
        db,
        "SELECT content FROM content_blocks WHERE block_type = 'text' ORDER BY rowid",
    );
    assert_eq!(texts.last().unwrap()[0], json!("hi"));
}

#[test]
fn rate_limits_honour_retry_after() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(vec![
        Turn::error(429, "rate_limit_error", "slow down").retry_after(1),
        Turn::reply(Reply::new().text("hi")),
    ]);
    let started = Instant::now();
    let out = run(&host, &mock);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "retry-after: 1 must be waited out"
    );
    assert_eq!(mock.requests().len(), 2);
}

#[test]
fn a_cut_stream_is_retried_and_stored_once() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(vec![
        Turn::cut(Reply::new().text("partial answer that never ends"), 4),
        Turn::reply(Reply::new().text("complete answer")),
    ]);
    let out = run(&host, &mock);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(mock.requests().len(), 2);
    let db = &host.sessions()[0];
    let assistant = query(db, "SELECT id FROM messages WHERE role = 'assistant'");
    assert_eq!(assistant.len(), 1, "the cut attempt is not stored");
    let texts = query(
        db,
        "SELECT content FROM content_blocks WHERE block_type = 'text' ORDER BY rowid",
    );
    assert_eq!(texts.last().unwrap()[0], json!("complete answer"));
}

#[test]
fn other_client_errors_fail_at_once_with_the_api_message() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(vec![Turn::error(
        400,
        "invalid_request_error",
        "messages.0.content: field required",
    )]);
    let out = run(&host, &mock);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert_eq!(mock.requests().len(), 1, "a 400 is not retried");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("messages.0.content: field required"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("test-key"),
        "the key never appears in errors"
    );
}

#[test]
fn retries_give_up_after_the_attempt_limit_and_keep_the_run() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(
        (0..5)
            .map(|_| Turn::error(529, "overloaded_error", "Overloaded").retry_after(0))
            .collect(),
    );
    let out = run(&host, &mock);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert_eq!(mock.requests().len(), 5);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("5 attempts"), "{stderr}");
    let run = host.run();
    assert!(
        run.join("session.patch").exists(),
        "the run's record is kept"
    );
    assert!(run.join("manifest.json").exists());
}
