//! What the model gets of a tool's output is capped (head and tail, with a
//! marker naming what was cut and where the whole output is), while the
//! session and the step files keep it whole; a command past its timeout is
//! killed and the model told.

mod support;

use serde_json::{Value, json};
use support::host::{Host, describe, query};
use support::mock::{MockServer, Reply, Turn};

fn last_result(mock: &MockServer) -> Value {
    let requests = mock.requests();
    let messages = requests.last().unwrap().body["messages"]
        .as_array()
        .unwrap()
        .clone();
    messages.last().unwrap()["content"][0].clone()
}

fn run_bash(host: &Host, input: Value, extra: &[&str]) -> MockServer {
    let mock = MockServer::start(vec![
        Turn::reply(Reply::new().tool_use("toolu_1", "bash", input)),
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
        told.contains(&format!("[the whole output is in {}]", step_out.display())),
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
