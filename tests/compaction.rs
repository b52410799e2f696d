//! Compaction through the real binary (`--backend none`) and the mock model:
//! a conversation near the context window, or one the API refuses as too
//! long, is summarised with a request that offers no tools; later requests
//! carry the summary instead of the old turns; the session keeps them all.
//! `ah compact` does the same on demand.

use crate::support::host::{Host, describe, events, query};
use crate::support::mock::{MockServer, RecordedRequest, Reply, Turn};
use serde_json::{Value, json};

const HAIKU: &str = "claude-haiku-4-5-20251001";
const SUMMARY: &str = "## Goal\nFix the build. SUMMARY-MARKER";

/// Three bash calls whose outputs are easy to look for, the last reply
/// reporting `last_input_tokens`.
fn three_steps(last_input_tokens: u64) -> Vec<Turn> {
    let step = |n: usize, word: &str| {
        Reply::new().tool_use(
            format!("toolu_{n}"),
            "bash",
            json!({ "command": format!("echo {word}_OUTPUT") }),
        )
    };
    vec![
        Turn::reply(step(1, "FIRST")),
        Turn::reply(step(2, "SECOND")),
        Turn::reply(step(3, "THIRD").usage(last_input_tokens, 50)),
    ]
}

fn messages_text(request: &RecordedRequest) -> String {
    request.body["messages"].to_string()
}

/// The summary request: the compaction prompt, the old turns as a text
/// transcript, and no tools.
fn assert_is_summary_request(request: &RecordedRequest) {
    assert!(request.body.get("tools").is_none(), "{}", request.body);
    let system = request.body["system"].as_str().unwrap_or_default();
    for section in [
        "## Goal",
        "## Constraints",
        "### Blocked",
        "## Next steps",
        "### Modified",
    ] {
        assert!(system.contains(section), "{section} in {system}");
    }
    let messages = request.messages();
    assert_eq!(messages.len(), 1);
    let transcript = messages[0]["content"][0]["text"].as_str().unwrap();
    assert!(transcript.starts_with("<conversation>"), "{transcript}");
    assert!(transcript.contains("fix the build"), "{transcript}");
    assert!(transcript.contains("FIRST_OUTPUT"), "{transcript}");
    assert!(!transcript.contains("\"tool_use\""), "{transcript}");
}

/// A request after compaction: the summary first, then the kept turns; the
/// summarised ones are gone.
fn assert_carries_summary_not(request: &RecordedRequest, gone: &[&str], kept: &[&str]) {
    assert!(request.body["tools"].is_array(), "tools are offered again");
    let first = &request.body["messages"][0];
    assert_eq!(first["role"], json!("user"));
    let summary = first["content"][0]["text"].as_str().unwrap();
    assert!(summary.contains(SUMMARY), "{summary}");
    assert!(summary.contains("was compacted"), "{summary}");
    let text = messages_text(request);
    for old in gone {
        assert!(
            !text.contains(old),
            "{old} should be summarised away: {text}"
        );
    }
    for recent in kept {
        assert!(text.contains(recent), "{recent} should be kept: {text}");
    }
}

#[test]
fn a_conversation_near_the_window_is_summarised_before_the_next_call() {
    let host = Host::git(&[("a.txt", "a\n")]);
    let mut script = three_steps(190_000);
    script.push(Turn::reply(Reply::new().text(SUMMARY)));
    script.push(Turn::reply(Reply::new().text("All done.")));
    let mock = MockServer::start(script);
    let out = host
        .ah(&mock.url())
        .args([
            "--backend",
            "none",
            "--review",
            "never",
            "-m",
            "haiku",
            "fix the build",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("compacting the conversation"), "{stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("SUMMARY-MARKER"));

    let requests = mock.requests();
    assert_eq!(requests.len(), 5);
    assert!(requests[2].body["tools"].is_array());
    assert_is_summary_request(&requests[3]);
    assert_eq!(requests[3].body["model"], json!(HAIKU));
    assert_carries_summary_not(
        &requests[4],
        &["toolu_1", "FIRST_OUTPUT"],
        &["toolu_2", "SECOND_OUTPUT", "toolu_3", "THIRD_OUTPUT"],
    );
    // The cut fell inside the user's turn: the request is quoted.
    assert!(
        requests[4].body["messages"][0]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("fix the build")
    );

    // The session keeps every message, and the summary says what it kept.
    let db = &host.sessions()[0];
    let roles = query(db, "SELECT role FROM messages ORDER BY seq");
    assert_eq!(roles.len(), 9, "prompt, 3 steps × 2, summary, answer");
    let tool_uses = query(
        db,
        "SELECT tool_id FROM content_blocks WHERE block_type = 'tool_use'",
    );
    assert_eq!(tool_uses.len(), 3);
    let marked = query(
        db,
        "SELECT b.details, m.role FROM content_blocks b JOIN messages m ON m.id = b.message_id \
         WHERE b.details LIKE '%compaction%'",
    );
    assert_eq!(marked.len(), 1);
    assert_eq!(marked[0][1], json!("user"));
    let details: Value = serde_json::from_str(marked[0][0].as_str().unwrap()).unwrap();
    let kept_from = details["compaction"]["kept_from"].as_str().unwrap();
    let kept = query(
        db,
        &format!("SELECT tool_id FROM content_blocks WHERE message_id = '{kept_from}'"),
    );
    assert_eq!(kept[0][0], json!("toolu_2"), "kept from the second call");
    assert!(details["compaction"]["tokens_before"].as_u64().unwrap() >= 190_050);

    let start = events(db, "compaction_start");
    assert_eq!(start.len(), 1);
    assert_eq!(start[0]["reason"], json!("threshold"));
    let end = events(db, "compaction_end");
    assert_eq!(end[0]["kept_messages"], json!(4));
    assert_eq!(end[0]["summary_chars"], json!(SUMMARY.chars().count()));
}

/// The numbers of `ah usage`'s line that starts with `what`: calls, in, out.
fn usage_line(usage: &str, what: &str) -> (u64, u64, u64) {
    let line = usage
        .lines()
        .find(|line| line.starts_with(what))
        .unwrap_or_else(|| panic!("no line for {what} in {usage}"));
    let numbers: Vec<u64> = line[what.len()..]
        .split_whitespace()
        .filter_map(|word| word.parse().ok())
        .collect();
    (numbers[0], numbers[1], numbers[2])
}

/// A run that compacts once (a summary call of 7 000 in, 900 out) on the
/// way, with `extra` arguments before its task.
fn compacting_run(host: &Host, extra: &[&str]) -> (MockServer, std::process::Output) {
    let mut script = three_steps(190_000);
    script.push(Turn::reply(Reply::new().text(SUMMARY).usage(7_000, 900)));
    script.push(Turn::reply(Reply::new().text("All done.").usage(9_000, 40)));
    let mock = MockServer::start(script);
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "never", "-m", "haiku"])
        .args(extra)
        .arg("fix the build")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    (mock, out)
}

#[test]
fn every_report_of_a_session_counts_its_compaction_call() {
    let host = Host::git(&[("a.txt", "a\n")]);
    let (mock, out) = compacting_run(&host, &["--json"]);
    // Answers: 120 + 120 + 190 000 + 9 000 in, 30 + 30 + 50 + 40 out; the
    // summary call: 7 000 in, 900 out.
    let (input, output) = (199_240 + 7_000, 150 + 900);

    // --json: every billed call has its usage on an event, and run_end
    // says the total.
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let billed: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "api_call_end" || e["type"] == "compaction_end")
        .collect();
    assert_eq!(billed.len(), 5);
    let sum = |key: &str| -> u64 {
        billed
            .iter()
            .map(|e| e["usage"][key].as_u64().unwrap())
            .sum()
    };
    assert_eq!((sum("input_tokens"), sum("output_tokens")), (input, output));
    let end = events.iter().find(|e| e["type"] == "run_end").unwrap();
    assert_eq!(
        end["usage"],
        json!({"input_tokens": input, "output_tokens": output})
    );

    // ah usage: the compaction call on a line of its own, in the total.
    let usage = host.ah(&mock.url()).arg("usage").output().unwrap();
    let usage = String::from_utf8_lossy(&usage.stdout).into_owned();
    assert_eq!(usage_line(&usage, HAIKU), (4, 199_240, 150), "{usage}");
    assert_eq!(
        usage_line(&usage, &format!("compaction ({HAIKU})")),
        (1, 7_000, 900),
        "{usage}"
    );
    assert_eq!(usage_line(&usage, "total"), (5, input, output), "{usage}");

    // ah sessions --json: the same totals.
    let listed = host
        .ah(&mock.url())
        .args(["sessions", "--json"])
        .output()
        .unwrap();
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(listed[0]["input_tokens"], json!(input));
    assert_eq!(listed[0]["output_tokens"], json!(output));

    // The end line at a terminal says the same (a run of its own, so only
    // its calls).
    let mock = MockServer::start(vec![Turn::reply(Reply::new().text("ok").usage(11, 2))]);
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "never", "and the docs"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("tokens 11 in, 2 out"), "{stderr}");
}

#[test]
fn the_end_line_counts_the_compaction_call() {
    let host = Host::git(&[("a.txt", "a\n")]);
    let (mock, out) = compacting_run(&host, &[]);
    // 206 240 in, 1 050 out: the answers' and the summary's.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("tokens 206.2k in, 1.1k out"), "{stderr}");
    let usage = host.ah(&mock.url()).arg("usage").output().unwrap();
    let usage = String::from_utf8_lossy(&usage.stdout).into_owned();
    assert_eq!(usage_line(&usage, "total"), (5, 206_240, 1_050), "{usage}");
}

#[test]
fn a_smaller_reserve_lets_the_same_conversation_go_on_uncompacted() {
    let host = Host::git(&[("a.txt", "a\n")]);
    let mut script = three_steps(190_000);
    script.push(Turn::reply(Reply::new().text("All done.")));
    let mock = MockServer::start(script);
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "never", "-m", "haiku"])
        .args(["--compact-reserve", "5000", "fix the build"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let requests = mock.requests();
    assert_eq!(requests.len(), 4);
    assert!(messages_text(&requests[3]).contains("FIRST_OUTPUT"));
    // The answer gets what is left below the window, not more.
    let max_tokens = requests[3].body["max_tokens"].as_u64().unwrap();
    assert!(
        (4_096..=200_000 - 190_050).contains(&max_tokens),
        "{max_tokens}"
    );
}

#[test]
fn a_request_never_asks_for_more_output_than_fits_the_window() {
    // 150 000 tokens: below the compaction threshold, but 150 000 + the
    // model's 64 000 output limit would exceed the 200 000 window.
    let host = Host::git(&[("a.txt", "a\n")]);
    let mut script = three_steps(150_000);
    script.push(Turn::reply(Reply::new().text("All done.")));
    let mock = MockServer::start(script);
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "never", "-m", "haiku"])
        .arg("fix the build")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let requests = mock.requests();
    assert_eq!(requests.len(), 4, "no compaction");
    assert_eq!(requests[0].body["max_tokens"], json!(64_000));
    let max_tokens = requests[3].body["max_tokens"].as_u64().unwrap();
    assert!(
        (40_000..=200_000 - 150_050).contains(&max_tokens),
        "{max_tokens}"
    );
    assert!(events(&host.sessions()[0], "compaction_start").is_empty());
}

#[test]
fn a_second_compaction_in_the_same_turn_still_quotes_the_request() {
    let prompt = "fix the build:\nkeep `make check` green";
    let host = Host::git(&[("a.txt", "a\n")]);
    let mut script = three_steps(190_000);
    script.push(Turn::reply(Reply::new().text(SUMMARY)));
    script.push(Turn::reply(
        Reply::new()
            .tool_use("toolu_4", "bash", json!({"command": "echo FOURTH_OUTPUT"}))
            .usage(190_000, 50),
    ));
    script.push(Turn::reply(Reply::new().text("## Goal\nSECOND-SUMMARY")));
    script.push(Turn::reply(Reply::new().text("All done.")));
    let mock = MockServer::start(script);
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "never", "-m", "haiku"])
        .arg(prompt)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let requests = mock.requests();
    assert_eq!(requests.len(), 7);
    assert!(
        requests[5].body.get("tools").is_none(),
        "the second summary"
    );
    let last = &requests[6];
    let summary = last.body["messages"][0]["content"][0]["text"]
        .as_str()
        .unwrap();
    assert!(summary.contains("SECOND-SUMMARY"), "{summary}");
    assert!(
        summary.ends_with(&format!("as they wrote it:\n\n{prompt}")),
        "{summary}"
    );
    assert!(!messages_text(last).contains("SECOND_OUTPUT"));
    assert!(messages_text(last).contains("FOURTH_OUTPUT"));

    let db = &host.sessions()[0];
    let marked = query(
        db,
        "SELECT details FROM content_blocks WHERE details LIKE '%compaction%'",
    );
    assert_eq!(marked.len(), 2);
    for row in marked {
        let details: Value = serde_json::from_str(row[0].as_str().unwrap()).unwrap();
        assert_eq!(details["compaction"]["request"], json!(prompt), "{details}");
    }
}

fn overflow() -> Turn {
    Turn::error(
        400,
        "invalid_request_error",
        "prompt is too long: 210000 tokens > 200000 maximum",
    )
}

#[test]
fn a_context_overflow_compacts_and_retries_the_call_once() {
    let host = Host::git(&[("a.txt", "a\n")]);
    let mut script = three_steps(120);
    script.push(overflow());
    script.push(Turn::reply(Reply::new().text(SUMMARY)));
    script.push(Turn::reply(Reply::new().text("All done.")));
    let mock = MockServer::start(script);
    let out = host
        .ah(&mock.url())
        .args([
            "--backend",
            "none",
            "--review",
            "never",
            "-m",
            "haiku",
            "fix the build",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("All done."));

    let requests = mock.requests();
    assert_eq!(requests.len(), 6);
    assert!(
        messages_text(&requests[3]).contains("FIRST_OUTPUT"),
        "the refused call"
    );
    assert_is_summary_request(&requests[4]);
    assert_carries_summary_not(
        &requests[5],
        &["toolu_1", "FIRST_OUTPUT"],
        &["toolu_2", "toolu_3", "THIRD_OUTPUT"],
    );
    let db = &host.sessions()[0];
    let start = events(db, "compaction_start");
    assert_eq!(
        start,
        [json!({"type": "compaction_start", "reason": "overflow", "tokens": 210_000})]
    );
}

#[test]
fn an_overflow_without_a_token_count_reports_the_estimated_size() {
    let host = Host::git(&[("a.txt", "a\n")]);
    let mut script = three_steps(120);
    script.push(Turn::error(
        400,
        "invalid_request_error",
        "input length and `max_tokens` exceed context limit",
    ));
    script.push(Turn::reply(Reply::new().text(SUMMARY)));
    script.push(Turn::reply(Reply::new().text("All done.")));
    let mock = MockServer::start(script);
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "never", "-m", "haiku"])
        .arg("fix the build")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(mock.requests().len(), 6);
    let start = events(&host.sessions()[0], "compaction_start");
    assert_eq!(start.len(), 1);
    assert_eq!(start[0]["reason"], json!("overflow"));
    let tokens = start[0]["tokens"].as_u64().unwrap();
    assert!(
        (120..50_000).contains(&tokens),
        "the estimate, not the window: {tokens}"
    );
}

#[test]
fn an_overflow_after_compaction_fails_the_run_without_another_retry() {
    let host = Host::git(&[("a.txt", "a\n")]);
    let mut script = three_steps(120);
    script.push(overflow());
    script.push(Turn::reply(Reply::new().text(SUMMARY)));
    script.push(overflow());
    script.push(Turn::reply(Reply::new().text("never sent")));
    let mock = MockServer::start(script);
    let out = host
        .ah(&mock.url())
        .args([
            "--backend",
            "none",
            "--review",
            "never",
            "-m",
            "haiku",
            "fix the build",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("context window is full"),
        "{}",
        describe(&out)
    );
    assert_eq!(mock.requests().len(), 6);
    assert_eq!(mock.pending_turns(), 1);
}

#[test]
fn ah_compact_summarises_the_latest_session_and_the_next_run_continues_from_it() {
    let host = Host::git(&[("a.txt", "a\n")]);
    let mut script = three_steps(120);
    script.push(Turn::reply(Reply::new().text("Fixed.").usage(60_000, 20)));
    script.push(Turn::reply(Reply::new().text(SUMMARY)));
    script.push(Turn::reply(Reply::new().text("Docs updated.")));
    let mock = MockServer::start(script);
    let out = host
        .ah(&mock.url())
        .args([
            "--backend",
            "none",
            "--review",
            "never",
            "-m",
            "haiku",
            "fix the build",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));

    let out = host.ah(&mock.url()).arg("compact").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    // Both sizes are printed (a summary can outweigh a conversation this
    // short: see the test below for what they measure).
    let (before, after) = sizes(&out);
    assert!(before > 0 && after > 0, "{}", describe(&out));
    let requests = mock.requests();
    assert_eq!(requests.len(), 5);
    assert_is_summary_request(&requests[4]);
    assert_eq!(
        requests[4].body["model"],
        json!(HAIKU),
        "the session's model"
    );

    let out = host
        .ah(&mock.url())
        .args([
            "--backend",
            "none",
            "--review",
            "never",
            "-m",
            "haiku",
            "now the docs",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let requests = mock.requests();
    assert_eq!(requests.len(), 6);
    assert_carries_summary_not(
        &requests[5],
        &["toolu_1", "toolu_2", "SECOND_OUTPUT"],
        &["toolu_3", "THIRD_OUTPUT", "Fixed.", "now the docs"],
    );
    let db = &host.sessions()[0];
    assert_eq!(host.sessions().len(), 1);
    assert_eq!(
        query(db, "SELECT id FROM messages").len(),
        11,
        "nothing was deleted"
    );
    assert_eq!(events(db, "compaction_start")[0]["reason"], json!("manual"));
}

/// The sizes `ah compact` printed: before and after.
fn sizes(out: &std::process::Output) -> (u64, u64) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let number = |after: &str| -> u64 {
        stdout
            .split(after)
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no number after {after:?} in {stdout}"))
    };
    (number("next request ~"), number("tokens before, ~"))
}

#[test]
fn ah_compact_measures_the_request_before_and_after_alike() {
    // The API reported little (120 tokens) for a conversation whose first
    // step returned 20 000 characters: before, the next request would carry
    // them (~5 000 tokens); after, only the summary stands for them.
    let host = Host::git(&[("a.txt", "a\n")]);
    let big = "head -c 20000 /dev/zero | tr '\\0' x";
    let mock = MockServer::start(vec![
        Turn::reply(Reply::new().tool_use("toolu_1", "bash", json!({ "command": big }))),
        Turn::reply(Reply::new().tool_use("toolu_2", "bash", json!({"command": "echo 2"}))),
        Turn::reply(Reply::new().tool_use("toolu_3", "bash", json!({"command": "echo 3"}))),
        Turn::reply(Reply::new().text("Fixed.")),
        Turn::reply(Reply::new().text(SUMMARY)),
    ]);
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "never", "fix the build"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let out = host.ah(&mock.url()).arg("compact").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let (before, after) = sizes(&out);
    assert!(before > 5_000, "{}", describe(&out));
    // What is gone is the big output (the summary is a few lines).
    let saved = before - after;
    assert!((4_800..5_200).contains(&saved), "{}", describe(&out));
}

#[test]
fn ah_compact_on_a_missing_session_says_what_to_do() {
    let host = Host::git(&[("a.txt", "a\n")]);
    let mock = MockServer::start(Vec::new());
    let out = host.ah(&mock.url()).arg("compact").output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("run a task first"));
    let out = host
        .ah(&mock.url())
        .args(["compact", "--db", "nope.db"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not found"));
    assert!(!host.project.join("nope.db").exists());
    assert!(mock.requests().is_empty());
}
