//! `--json`: every event of a run is one JSON object per line on stdout, and
//! nothing else is on stdout. The sequence is golden-tested (volatile values
//! such as ids, hashes and timings are masked); set `AH_UPDATE_GOLDEN=1` to
//! rewrite the golden file after an intended change.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

use crate::support::host::{Host, describe, query};
use crate::support::mock::{MockServer, Reply, Turn};
use serde_json::{Value, json};

const GOLDEN: &str = "tests/golden/json_run.jsonl";

/// Replaces values that differ between runs with a placeholder.
fn mask(mut event: Value) -> Value {
    if let Some(map) = event.as_object_mut() {
        for key in [
            "run",
            "session",
            "run_id",
            "commit",
            "patch",
            "latency_ms",
            "duration_ms",
        ] {
            if map.contains_key(key) {
                map.insert(key.to_string(), json!("<masked>"));
            }
        }
        if let Some(details) = map.get_mut("details").and_then(Value::as_object_mut)
            && details.contains_key("duration_ms")
        {
            details.insert("duration_ms".into(), json!("<masked>"));
        }
    }
    event
}

#[test]
fn json_mode_prints_every_event_as_one_line_and_nothing_else() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(vec![
        Turn::reply(Reply::new().text("Writing.").tool_use(
            "toolu_1",
            "write",
            json!({"path": "b.txt", "content": "two\n"}),
        )),
        Turn::reply(Reply::new().tool_use("toolu_2", "bash", json!({"command": "cat b.txt"}))),
        Turn::reply(Reply::new().text("Done.")),
    ]);
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--json", "add b"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stdout = String::from_utf8(out.stdout.clone()).unwrap();
    let events: Vec<Value> = stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
        .collect();
    assert!(
        events.iter().all(|e| e["type"].is_string()),
        "every line is a typed event"
    );
    let run = crate::support::host::run_id(&host.run());
    assert!(
        events.iter().all(|e| e["run"] == json!(run)),
        "every event carries its run's id: {stdout}"
    );

    let review = events.iter().find(|e| e["type"] == "review_done").unwrap();
    assert_eq!(
        review["decision"],
        json!("saved"),
        "--json reviews as never"
    );
    assert_eq!(review["applied"], json!(false));

    let masked: Vec<String> = events.into_iter().map(|e| mask(e).to_string()).collect();
    let actual = masked.join("\n") + "\n";
    if std::env::var_os("AH_UPDATE_GOLDEN").is_some() {
        std::fs::write(GOLDEN, &actual).unwrap();
    }
    let golden = std::fs::read_to_string(GOLDEN).unwrap_or_default();
    assert_eq!(
        actual, golden,
        "the event stream changed; if intended, rerun with AH_UPDATE_GOLDEN=1"
    );

    // The persisted events match what was printed (deltas are not stored).
    let stored = query(
        &host.sessions()[0],
        "SELECT event_type FROM events ORDER BY id",
    );
    let printed: Vec<String> = masked
        .iter()
        .map(|line| {
            serde_json::from_str::<Value>(line).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .filter(|t| t != "text_delta" && t != "thinking_delta")
        .collect();
    let stored: Vec<String> = stored
        .iter()
        .map(|r| r[0].as_str().unwrap().to_string())
        .collect();
    assert_eq!(stored, printed);
}

#[test]
fn json_mode_refuses_to_ask() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let out = host
        .ah("http://127.0.0.1:9")
        .args(["--backend", "none", "--json", "--review", "ask", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(out.stdout.is_empty());
}

#[test]
fn sigint_mid_stream_keeps_the_partial_text() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let reply = Reply::new().text("The first half of my answer, and the second half");
    let mock = MockServer::start(vec![
        Turn::stall(reply, 6, Duration::from_secs(60)).piece_size(4),
    ]);
    let mut child = host
        .ah(&mock.url())
        .args(["--backend", "none", "--json", "explain"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = String::new();
    // Wait until some text has streamed, then interrupt.
    while seen.len() < 8 {
        let line = lines.next().expect("ah ended before streaming").unwrap();
        let event: Value = serde_json::from_str(&line).unwrap();
        if event["type"] == "text_delta" {
            seen.push_str(event["text"].as_str().unwrap());
        }
    }
    crate::support::send_signal(child.id(), rustix::process::Signal::INT);
    let rest: Vec<Value> = lines
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(
        rest.iter()
            .any(|e| e["type"] == "review_done" && e["decision"] == "aborted")
    );
    assert_eq!(rest.last().unwrap()["type"], json!("state_change"));
    assert_eq!(rest.last().unwrap()["state"], json!("closed"));

    let db = &host.sessions()[0];
    let rows = query(
        db,
        "SELECT m.role, m.stop_reason, b.content FROM messages m JOIN content_blocks b ON b.message_id = m.id ORDER BY m.seq",
    );
    let last = rows.last().unwrap();
    assert_eq!(last[0], json!("assistant"));
    assert_eq!(last[1], json!("aborted"));
    let kept = last[2].as_str().unwrap();
    assert!(
        kept.starts_with(&seen) || seen.starts_with(kept),
        "kept {kept:?}, streamed {seen:?}"
    );
    assert!(!kept.is_empty());
    let state = query(db, "SELECT value FROM context WHERE key = 'state'");
    assert_eq!(state[0][0], json!("closed"));
}
