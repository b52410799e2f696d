//! What the model gets of a tool's output is capped (head and tail, with a
//! marker naming what was cut, how to see the rest, and where the whole
//! output is), while the session and the step files keep it whole; output
//! dropped in memory is reported; a command past its timeout is killed and
//! the model told.

use crate::support::host::{Host, describe, query};
use crate::support::mock::{MockServer, Reply, Turn};
use serde_json::{Value, json};

fn last_result(mock: &MockServer) -> Value {
    let requests = mock.requests();
    requests.last().unwrap().tool_result().clone()
}

fn run_bash(host: &Host, input: Value, extra: &[&str]) -> MockServer {
    run_tool(host, "bash", input, extra)
}

fn run_tool(host: &Host, tool: &str, input: Value, extra: &[&str]) -> MockServer {
    let mock = MockServer::start(vec![
        Turn::reply(Reply::new().tool_use("toolu_1", tool, input)),
        Turn::reply(Reply::new().text("ok")),
    ]);
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "never"])
        .args(extra)
        .arg("run it")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    mock
}

#[test]
fn a_huge_output_is_cut_for_the_model_and_kept_whole_on_disk() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = run_bash(&host, json!({"command": "seq 1 200000"}), &[]);
    let result = last_result(&mock);
    let told = result["content"].as_str().unwrap();
    assert!(
        told.chars().count() <= 30_000 + 200,
        "{} chars",
        told.chars().count()
    );
    assert!(
        told.lines().count() <= 256 + 2,
        "{} lines",
        told.lines().count()
    );
    assert!(told.starts_with("1\n2\n3\n"), "the head is kept");
    assert!(told.contains("200000\n"), "the tail is kept");
    assert!(told.contains("lines omitted"), "{told}");
    let run = host.run();
    let step_out = run.join("steps/step-1.out");
    assert!(
        told.contains(&format!(
            "\n[output cut; the whole output is kept in the run's step file ({}); narrow the \
             command to see the rest (grep, head, tail, sed -n)]\nexit code: 0",
            step_out.display()
        )),
        "{told}"
    );
    assert!(told.trim_end().ends_with("exit code: 0"));

    let whole: String = (1..=200_000).map(|n| format!("{n}\n")).collect();
    assert_eq!(std::fs::read_to_string(&step_out).unwrap(), whole);
    let stored = query(
        &host.sessions()[0],
        "SELECT tool_output, content FROM content_blocks WHERE block_type = 'tool_result'",
    );
    assert_eq!(
        stored[0][0].as_str().unwrap(),
        whole,
        "the DB keeps it whole"
    );
    assert_eq!(
        stored[0][1].as_str().unwrap(),
        told,
        "and what the model was told"
    );
}

#[test]
fn output_limits_are_configurable() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = run_bash(
        &host,
        json!({"command": "seq 1 5000"}),
        &[
            "--output-limit",
            "bash=2000",
            "--output-limit",
            "bash-lines=40",
        ],
    );
    let told = last_result(&mock)["content"].as_str().unwrap().to_string();
    assert!(told.lines().count() <= 40 + 2, "{told}");
    assert!(told.chars().count() <= 2000 + 200, "{told}");

    let out = host
        .ah("http://127.0.0.1:9")
        .args(["--output-limit", "grep=5", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
}

#[test]
fn limits_too_small_to_show_output_are_refused() {
    let host = Host::git(&[("a.txt", "one\n")]);
    for (flag, message) in [
        (
            "bash=50",
            "bash=50 is too small: the marker that says what was cut needs room, \
             so bash must be at least 200 characters",
        ),
        (
            "read=199",
            "read=199 is too small: the marker that says what was cut needs room, \
             so read must be at least 200 characters",
        ),
        (
            "bash-lines=9",
            "bash-lines=9 is too small: the marker that says what was cut needs room, \
             so bash-lines must be at least 10 lines",
        ),
    ] {
        let out = host
            .ah("http://127.0.0.1:9")
            .args(["--output-limit", flag, "x"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(message), "{stderr}");
    }
    // The smallest limits allowed still show the output's head and tail.
    let mock = run_bash(
        &host,
        json!({"command": "seq 1 5000"}),
        &[
            "--output-limit",
            "bash=200",
            "--output-limit",
            "bash-lines=10",
        ],
    );
    let told = last_result(&mock)["content"].as_str().unwrap().to_string();
    assert!(told.starts_with("1\n2\n"), "{told}");
    assert!(told.contains("\n5000\n"), "{told}");
}

#[test]
fn a_read_stops_before_its_cap_and_keeps_what_it_showed() {
    let text: String = (1..=300).map(|n| format!("line {n}\n")).collect();
    let host = Host::git(&[("big.txt", &text)]);
    let mock = run_tool(
        &host,
        "read",
        json!({"path": "big.txt"}),
        &["--output-limit", "read=1000"],
    );
    let told = last_result(&mock)["content"].as_str().unwrap().to_string();
    // 9 lines of 14 characters and 58 of 15 make 996; one more would pass 1000.
    let page: String = (1..=67).map(|n| format!("{n:>6}\tline {n}\n")).collect();
    assert_eq!(
        told,
        format!("{page}\n(file has 300 lines; showing 1-67; use offset=68 to continue)")
    );
    let step_out = host.run().join("steps/step-1.out");
    assert_eq!(std::fs::read_to_string(&step_out).unwrap(), page);
    let stored = query(
        &host.sessions()[0],
        "SELECT tool_output FROM content_blocks WHERE block_type = 'tool_result'",
    );
    assert_eq!(stored[0][0].as_str().unwrap(), page);
}

#[test]
fn the_stored_output_marks_where_stderr_starts() {
    let host = Host::git(&[("a.txt", "one\n")]);
    run_bash(&host, json!({"command": "echo out; echo err >&2"}), &[]);
    let stored = query(
        &host.sessions()[0],
        "SELECT tool_output FROM content_blocks WHERE block_type = 'tool_result'",
    );
    assert_eq!(stored[0][0].as_str().unwrap(), "out\n--- stderr ---\nerr\n");
}

#[test]
fn output_dropped_in_memory_is_reported_to_the_model_and_in_the_details() {
    let host = Host::git(&[("a.txt", "one\n")]);
    // 9 000 000 bytes on stdout: more than the 8 MiB a backend keeps.
    let mock = run_bash(
        &host,
        json!({"command": "yes 0123456789 | head -c 9000000"}),
        &[],
    );
    let dropped = 9_000_000 - 8 * 1024 * 1024;
    let told = last_result(&mock)["content"].as_str().unwrap().to_string();
    assert!(
        told.contains(&format!(
            "\n[{dropped} bytes from the middle of the output were dropped as it ran"
        )),
        "{told}"
    );
    let stored = query(
        &host.sessions()[0],
        "SELECT details FROM content_blocks WHERE block_type = 'tool_result'",
    );
    let details: Value = serde_json::from_str(stored[0][0].as_str().unwrap()).unwrap();
    assert_eq!(details["tool"]["dropped_bytes"], json!(dropped));
}

#[test]
fn a_command_past_its_timeout_is_killed_and_the_model_told() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = run_bash(
        &host,
        json!({"command": "echo started; sleep 100; echo never", "timeout": 1}),
        &[],
    );
    let result = last_result(&mock);
    assert_eq!(result["is_error"], json!(true));
    let told = result["content"].as_str().unwrap();
    assert!(
        told.contains("started") && !told.contains("never"),
        "{told}"
    );
    assert!(told.contains("timed out after 1 s"), "{told}");
    let meta: Value = serde_json::from_str(
        &std::fs::read_to_string(host.run().join("steps/step-1.meta.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(meta["exit_code"], Value::Null);
}
