//! Loop detection through the real binary (`--backend none`) and a scripted
//! mock model: a model that repeats its tool calls and gets the same results
//! is told so in the conversation, the detection is recorded in the session,
//! and a model that goes on repeating is stopped with its patch saved, not
//! applied; the same call whose result changes every time (polling) is not
//! a loop.

use crate::support::host::{Host, describe, events, json_file, query};
use crate::support::mock::{MockServer, RecordedRequest, Reply, Turn};
use serde_json::{Value, json};

/// `count` turns that each make the same call, then a closing answer.
fn same_call_turns(count: usize, tool: &str, input: Value) -> Vec<Turn> {
    let mut turns: Vec<Turn> = (1..=count)
        .map(|i| Turn::reply(Reply::new().tool_use(format!("toolu_{i}"), tool, input.clone())))
        .collect();
    turns.push(Turn::reply(Reply::new().text("I will try something else.")));
    turns
}

/// `count` turns that each read a.txt, then a closing answer.
fn same_read_turns(count: usize) -> Vec<Turn> {
    same_call_turns(count, "read", json!({"path": "a.txt"}))
}

/// What the model was told of each tool call, in the order of the requests.
fn results_told(requests: &[RecordedRequest]) -> Vec<String> {
    requests[1..].iter().map(RecordedRequest::told).collect()
}

#[test]
fn ten_identical_calls_get_a_steering_message_after_their_result() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(same_read_turns(10));
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "never", "look at a.txt"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("the model repeated the same call (read) 10 times"),
        "{stderr}"
    );

    let requests = mock.requests();
    assert_eq!(requests.len(), 11);
    for request in &requests[1..10] {
        let last = request.last_message();
        assert_eq!(
            last["content"].as_array().map(Vec::len),
            Some(1),
            "no steering before the window is full: {last}"
        );
    }
    let last = requests[10].last_message();
    assert_eq!(last["role"], json!("user"));
    assert_eq!(last["content"][0]["type"], json!("tool_result"));
    assert_eq!(last["content"][0]["tool_use_id"], json!("toolu_10"));
    assert_eq!(last["content"][1]["type"], json!("text"));
    let steering = last["content"][1]["text"].as_str().unwrap();
    assert!(
        steering.contains(
            "Your last 10 tool calls repeat the same call 10 times, with the same results"
        ),
        "{steering}"
    );
    assert!(steering.contains(r#"read {"path":"a.txt"}"#), "{steering}");
    assert!(steering.contains("Change approach"), "{steering}");

    let db = &host.sessions()[0];
    let detected = events(db, "loop_detected");
    assert_eq!(detected.len(), 1);
    assert_eq!(
        detected[0],
        json!({"type": "loop_detected", "pattern_len": 1, "repeats": 10, "tools": ["read"]})
    );
    let stored = query(
        db,
        "SELECT b.content FROM content_blocks b JOIN messages m ON m.id = b.message_id
         WHERE m.role = 'user' AND b.block_type = 'text' AND b.content LIKE '%loop detected%'",
    );
    assert_eq!(
        stored.len(),
        1,
        "the steering text is stored like any block"
    );
}

#[test]
fn the_same_command_with_changing_output_is_not_a_loop() {
    let host = Host::git(&[("a.txt", "one\n")]);
    // A poll: each call appends a line to a counter file and prints the count.
    let poll = json!({"command": "echo tick >> ticks; wc -l < ticks"});
    let mock = MockServer::start(same_call_turns(10, "bash", poll));
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "never", "wait for it"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("repeated"), "{stderr}");

    let requests = mock.requests();
    assert_eq!(requests.len(), 11);
    let told = results_told(&requests);
    let expected: Vec<String> = (1..=10).map(|n| format!("{n}\nexit code: 0")).collect();
    assert_eq!(told, expected, "each call gave the model a new result");
    for request in &requests[1..] {
        let last = request.last_message();
        assert_eq!(last["content"].as_array().map(Vec::len), Some(1), "{last}");
    }
    let events = query(
        &host.sessions()[0],
        "SELECT id FROM events WHERE event_type = 'loop_detected'",
    );
    assert!(events.is_empty());
}

#[test]
fn the_same_cut_output_repeated_is_a_loop_though_each_names_its_own_step_file() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(same_call_turns(10, "bash", json!({"command": "seq 1 100"})));
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "never"])
        .args(["--output-limit", "bash=200", "list them"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));

    let requests = mock.requests();
    assert_eq!(requests.len(), 11);
    let told = results_told(&requests);
    assert!(told[0].contains("/steps/step-1.out); "), "{}", told[0]);
    assert!(told[9].contains("/steps/step-10.out); "), "{}", told[9]);
    assert_ne!(told[0], told[9], "what the model was told differs");
    let last = requests[10].last_message();
    let steering = last["content"][1]["text"].as_str().unwrap_or_default();
    assert!(
        steering.contains("Your last 10 tool calls repeat the same call 10 times"),
        "{last}"
    );
    let events = query(
        &host.sessions()[0],
        "SELECT id FROM events WHERE event_type = 'loop_detected'",
    );
    assert_eq!(events.len(), 1);
}

#[test]
fn loop_window_zero_turns_detection_off() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(same_read_turns(10));
    let out = host
        .ah(&mock.url())
        .args([
            "--backend",
            "none",
            "--review",
            "never",
            "--loop-window",
            "0",
            "look at a.txt",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let requests = mock.requests();
    assert_eq!(requests.len(), 11);
    let last = requests[10].last_message();
    assert_eq!(last["content"].as_array().map(Vec::len), Some(1), "{last}");
    let events = query(
        &host.sessions()[0],
        "SELECT id FROM events WHERE event_type = 'loop_detected'",
    );
    assert!(events.is_empty());
}

#[test]
fn a_model_that_keeps_repeating_is_stopped_after_three_detections() {
    let host = Host::git(&[("a.txt", "one\n")]);
    // Each turn: write, read, bash — a pattern of three calls. With a window
    // of 10, detections fall on calls 10, 20 and 30: turns 4, 7 and 10.
    let mut turns: Vec<Turn> = (1..=10)
        .map(|turn| {
            Turn::reply(
                Reply::new()
                    .tool_use(
                        format!("toolu_{turn}_w"),
                        "write",
                        json!({"path": "a.txt", "content": "two\n"}),
                    )
                    .tool_use(format!("toolu_{turn}_r"), "read", json!({"path": "a.txt"}))
                    .tool_use(
                        format!("toolu_{turn}_b"),
                        "bash",
                        json!({"command": "cat a.txt"}),
                    ),
            )
        })
        .collect();
    turns.push(Turn::reply(Reply::new().text("never asked for")));
    let mock = MockServer::start(turns);
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "auto", "change a"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("stopped: the model repeated itself 3 times"),
        "{stderr}"
    );

    // No request after the third detection.
    let requests = mock.requests();
    assert_eq!(requests.len(), 10);
    assert_eq!(mock.pending_turns(), 1);

    // The first detection came mid-turn (turn 4, first call): the steering
    // text follows all three results of that turn.
    let last = requests[4].last_message();
    let kinds: Vec<&str> = last["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["tool_result", "tool_result", "tool_result", "text"]);
    let steering = last["content"][3]["text"].as_str().unwrap();
    assert!(
        steering.contains("repeat the same 3 calls 3 times"),
        "{steering}"
    );
    assert!(steering.contains("warning 1 of 3"), "{steering}");

    let db = &host.sessions()[0];
    assert_eq!(events(db, "loop_detected").len(), 3);
    assert_eq!(events(db, "agent_end")[0]["reason"], json!("looping"));

    // The patch is saved, not applied, and the manifest says why.
    assert_eq!(host.read("a.txt"), "one\n", "nothing reaches the host");
    let run = host.run();
    let patch = std::fs::read_to_string(run.join("session.patch")).unwrap();
    assert!(patch.contains("+two"), "{patch}");
    assert!(stderr.contains(&run.join("session.patch").display().to_string()));
    let manifest = json_file(&run.join("manifest.json"));
    assert_eq!(manifest["review"]["decision"], json!("stopped"));
    assert_eq!(manifest["applied"], json!(false));
}
