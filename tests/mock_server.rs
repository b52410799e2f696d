//! Tests of the mock model server itself (`tests/support/mock.rs`): what it
//! puts on the wire must be the Anthropic Messages streaming format, delivered
//! the way each scripted turn says, since every other integration test trusts it.
//! This file checks the event stream's shape; `delivery` checks how it travels;
//! `agents` checks that each agent of an org gets its own script.

mod agents;
mod client;
mod delivery;

use crate::support::mock::{MockServer, Reply, Turn};
use serde_json::{Value, json};

use client::{deltas, post};

#[test]
fn text_reply_streams_events_in_api_order() {
    let mock = MockServer::start(vec![
        Turn::reply(Reply::new().text("Hello there").usage(1234, 56)).piece_size(6),
    ]);
    let seen = post(&mock);

    assert_eq!(seen.status, 200);
    assert_eq!(seen.header("content-type"), Some("text/event-stream"));
    assert_eq!(seen.error, None);
    let names = seen.event_names();
    let expected = [
        "message_start",
        "ping",
        "content_block_start",
        "ping",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ];
    assert_eq!(names, expected);

    let events = seen.events();
    let message = &events[0].1["message"];
    assert_eq!(message["id"], "msg_mock_1");
    assert_eq!(message["model"], "claude-test-model");
    assert_eq!(message["role"], "assistant");
    assert_eq!(message["usage"]["input_tokens"], 1234);
    assert_eq!(
        events[2].1["content_block"],
        json!({"type": "text", "text": ""})
    );
    let text: Vec<Value> = deltas(&events, 0)
        .iter()
        .map(|d| d["text"].clone())
        .collect();
    assert_eq!(text, ["Hello ", "there"]);
    assert_eq!(events[7].1["delta"]["stop_reason"], "end_turn");
    assert_eq!(events[7].1["usage"]["output_tokens"], 56);
}

#[test]
fn tool_input_pieces_rejoin_into_the_original_json() {
    let input =
        json!({"path": "src/ünïcode.rs", "content": "fn main() {\n    println!(\"hi\");\n}\n"});
    let mock = MockServer::start(vec![Turn::reply(
        Reply::new()
            .text("I'll write it.")
            .tool_use("toolu_1", "write", input.clone()),
    )]);
    let events = post(&mock).events();

    let start = events
        .iter()
        .find(|(name, data)| name == "content_block_start" && data["index"] == 1)
        .expect("tool_use block starts");
    assert_eq!(
        start.1["content_block"],
        json!({"type": "tool_use", "id": "toolu_1", "name": "write", "input": {}})
    );
    let pieces: Vec<String> = deltas(&events, 1)
        .iter()
        .map(|delta| {
            assert_eq!(delta["type"], "input_json_delta");
            delta["partial_json"].as_str().unwrap().to_string()
        })
        .collect();
    assert!(pieces.len() > 5, "input arrives in many pieces: {pieces:?}");
    let (last, full) = pieces.split_last().unwrap();
    assert!(
        full.iter().all(|p| (3..=7).contains(&p.chars().count())),
        "{pieces:?}"
    );
    assert!((1..=7).contains(&last.chars().count()));
    let joined: Value = serde_json::from_str(&pieces.concat()).expect("pieces rejoin into JSON");
    assert_eq!(joined, input);
    let message_delta = events
        .iter()
        .find(|(name, _)| name == "message_delta")
        .unwrap();
    assert_eq!(message_delta.1["delta"]["stop_reason"], "tool_use");
}

#[test]
fn empty_tool_input_is_one_empty_piece() {
    let mock = MockServer::start(vec![Turn::reply(Reply::new().tool_use(
        "toolu_9",
        "list",
        json!({}),
    ))]);
    let events = post(&mock).events();
    assert_eq!(
        deltas(&events, 0),
        [json!({"type": "input_json_delta", "partial_json": ""})]
    );
}

#[test]
fn thinking_streams_text_then_signature_and_blocks_are_indexed() {
    let mock = MockServer::start(vec![Turn::reply(
        Reply::new()
            .thinking("Let me think about this.", "sig123")
            .redacted_thinking("opaque")
            .text("done")
            .stop_reason("max_tokens")
            .cache_usage(7, 9),
    )]);
    let events = post(&mock).events();

    let thinking = deltas(&events, 0);
    let (signature, text) = thinking.split_last().unwrap();
    assert_eq!(
        signature,
        &json!({"type": "signature_delta", "signature": "sig123"})
    );
    let joined: String = text
        .iter()
        .map(|delta| {
            assert_eq!(delta["type"], "thinking_delta");
            delta["thinking"].as_str().unwrap()
        })
        .collect();
    assert_eq!(joined, "Let me think about this.");
    let starts: Vec<&Value> = events
        .iter()
        .filter(|(name, _)| name == "content_block_start")
        .map(|(_, data)| data)
        .collect();
    assert_eq!(
        starts[0]["content_block"],
        json!({"type": "thinking", "thinking": ""})
    );
    assert_eq!(
        starts[1]["content_block"],
        json!({"type": "redacted_thinking", "data": "opaque"})
    );
    assert_eq!(starts[2]["index"], 2);
    assert!(deltas(&events, 1).is_empty());
    let text: String = deltas(&events, 2)
        .iter()
        .map(|d| d["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "done");
    let usage = &events[0].1["message"]["usage"];
    assert_eq!(
        (
            usage["cache_creation_input_tokens"].as_u64(),
            usage["cache_read_input_tokens"].as_u64()
        ),
        (Some(7), Some(9))
    );
    assert_eq!(
        events[events.len() - 2].1["delta"]["stop_reason"],
        "max_tokens"
    );
}

#[test]
fn stream_error_sends_an_error_event_then_ends_cleanly() {
    let mock = MockServer::start(vec![Turn::stream_error(
        Reply::new().text("partial"),
        3,
        "overloaded_error",
        "Overloaded",
    )]);
    let seen = post(&mock);
    assert_eq!(seen.error, None);
    assert_eq!(
        seen.event_names(),
        ["message_start", "ping", "content_block_start", "error"]
    );
    assert_eq!(
        seen.events()[3].1,
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    );
}
