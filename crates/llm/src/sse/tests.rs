//! Tests for the stream accumulator, driven by event data shaped like the
//! Anthropic API's.

use serde_json::json;

use super::*;
use crate::stream_harness::{assemble, feed};

fn message_start() -> String {
    json!({
        "type": "message_start",
        "message": {
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
            "content": [], "stop_reason": null,
            "usage": {"input_tokens": 120, "output_tokens": 1,
                      "cache_creation_input_tokens": 7, "cache_read_input_tokens": 30}
        }
    })
    .to_string()
}

fn block_start(index: u64, block: serde_json::Value) -> String {
    json!({"type": "content_block_start", "index": index, "content_block": block}).to_string()
}

fn delta(index: u64, delta: serde_json::Value) -> String {
    json!({"type": "content_block_delta", "index": index, "delta": delta}).to_string()
}

fn block_stop(index: u64) -> String {
    json!({"type": "content_block_stop", "index": index}).to_string()
}

fn message_end(stop_reason: &str, output_tokens: u64) -> Vec<String> {
    vec![
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null},
               "usage": {"output_tokens": output_tokens}})
        .to_string(),
        json!({"type": "message_stop"}).to_string(),
    ]
}

#[test]
fn text_response_with_usage() {
    let mut events = vec![
        message_start(),
        json!({"type": "ping"}).to_string(),
        block_start(0, json!({"type": "text", "text": ""})),
        delta(0, json!({"type": "text_delta", "text": "Hel"})),
        delta(0, json!({"type": "text_delta", "text": "lo"})),
        block_stop(0),
    ];
    events.extend(message_end("end_turn", 42));
    let (response, seen) = assemble(Accumulator::new(), &events);
    assert_eq!(response.id, "msg_1");
    assert_eq!(response.model, "claude-x");
    assert_eq!(
        response.content,
        vec![Block::Text {
            text: "Hello".into()
        }]
    );
    assert_eq!(response.stop_reason.as_deref(), Some("end_turn"));
    assert_eq!(
        response.usage,
        Usage {
            input_tokens: 120,
            output_tokens: 42,
            cache_creation_input_tokens: 7,
            cache_read_input_tokens: 30
        }
    );
    assert_eq!(
        seen,
        vec![
            StreamEvent::TextDelta("Hel".into()),
            StreamEvent::TextDelta("lo".into())
        ]
    );
}

#[test]
fn tool_input_arriving_in_tiny_fragments_is_reassembled() {
    let input = json!({"path": "src/main.rs", "content": "fn main() {\n    println!(\"hi \\\"x\\\"\");\n}\n", "n": [1, 2.5, null, true]});
    let text = input.to_string();
    let chars: Vec<char> = text.chars().collect();
    let mut events = vec![
        message_start(),
        block_start(
            0,
            json!({"type": "tool_use", "id": "toolu_1", "name": "write", "input": {}}),
        ),
    ];
    let mut at = 0;
    for (i, size) in [1usize, 2, 3].iter().cycle().enumerate() {
        if at >= chars.len() {
            break;
        }
        let end = (at + size).min(chars.len());
        let piece: String = chars[at..end].iter().collect();
        events.push(delta(
            0,
            json!({"type": "input_json_delta", "partial_json": piece}),
        ));
        at = end;
        assert!(i < 10_000, "fragmenting loop must end");
    }
    events.push(block_stop(0));
    events.extend(message_end("tool_use", 9));
    let (response, seen) = assemble(Accumulator::new(), &events);
    assert_eq!(
        response.content,
        vec![Block::ToolUse {
            id: "toolu_1".into(),
            name: "write".into(),
            input
        }]
    );
    assert_eq!(response.stop_reason.as_deref(), Some("tool_use"));
    assert_eq!(
        seen,
        vec![StreamEvent::ToolUseStart {
            id: "toolu_1".into(),
            name: "write".into()
        }]
    );
}

#[test]
fn empty_tool_input_is_an_empty_object() {
    let mut events = vec![
        message_start(),
        block_start(
            0,
            json!({"type": "tool_use", "id": "toolu_2", "name": "list", "input": {}}),
        ),
        delta(0, json!({"type": "input_json_delta", "partial_json": ""})),
        block_stop(0),
    ];
    events.extend(message_end("tool_use", 3));
    let (response, _) = assemble(Accumulator::new(), &events);
    assert_eq!(
        response.content,
        vec![Block::ToolUse {
            id: "toolu_2".into(),
            name: "list".into(),
            input: json!({})
        }]
    );
}

#[test]
fn malformed_tool_input_is_a_protocol_error() {
    let mut events = cut_tool_call();
    events.extend(message_end("tool_use", 5));
    let (result, _, acc) = feed(Accumulator::new(), &events);
    result.expect("the events themselves are well formed");
    match acc.finish() {
        Err(StreamError::Protocol(msg)) => {
            assert!(msg.contains("bash") && msg.contains("toolu_3"), "{msg}")
        }
        other => panic!("expected a protocol error, got {other:?}"),
    }
}

#[test]
fn a_tool_call_cut_off_by_max_tokens_is_kept_empty_and_flagged() {
    let mut events = cut_tool_call();
    events.extend(message_end("max_tokens", 5));
    let (response, _) = assemble(Accumulator::new(), &events);
    assert_eq!(response.truncated_tool_calls, ["toolu_3"]);
    assert_eq!(
        response.content,
        [Block::ToolUse {
            id: "toolu_3".into(),
            name: "bash".into(),
            input: json!({}),
        }]
    );
}

/// A tool call whose input JSON stops half-way.
fn cut_tool_call() -> Vec<String> {
    vec![
        message_start(),
        block_start(
            0,
            json!({"type": "tool_use", "id": "toolu_3", "name": "bash", "input": {}}),
        ),
        delta(
            0,
            json!({"type": "input_json_delta", "partial_json": "{\"command\": "}),
        ),
        block_stop(0),
    ]
}

#[test]
fn thinking_keeps_its_signature_next_to_text() {
    let mut events = vec![
        message_start(),
        block_start(
            0,
            json!({"type": "thinking", "thinking": "", "signature": ""}),
        ),
        delta(0, json!({"type": "thinking_delta", "thinking": "Let me "})),
        delta(0, json!({"type": "thinking_delta", "thinking": "think."})),
        delta(
            0,
            json!({"type": "signature_delta", "signature": "EqQBCgIYAh"}),
        ),
        delta(0, json!({"type": "signature_delta", "signature": "IkA=="})),
        block_stop(0),
        block_start(1, json!({"type": "redacted_thinking", "data": "opaque"})),
        block_stop(1),
        block_start(2, json!({"type": "text", "text": ""})),
        delta(2, json!({"type": "text_delta", "text": "Done."})),
        block_stop(2),
    ];
    events.extend(message_end("end_turn", 20));
    let (response, seen) = assemble(Accumulator::new(), &events);
    assert_eq!(
        response.content,
        vec![
            Block::Thinking {
                thinking: "Let me think.".into(),
                signature: "EqQBCgIYAhIkA==".into()
            },
            Block::RedactedThinking {
                data: "opaque".into()
            },
            Block::Text {
                text: "Done.".into()
            },
        ]
    );
    assert_eq!(
        seen,
        vec![
            StreamEvent::ThinkingDelta("Let me ".into()),
            StreamEvent::ThinkingDelta("think.".into()),
            StreamEvent::TextDelta("Done.".into()),
        ]
    );
}

#[test]
fn unknown_block_types_and_deltas_are_skipped() {
    let mut events = vec![
        message_start(),
        block_start(
            0,
            json!({"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {}}),
        ),
        delta(
            0,
            json!({"type": "input_json_delta", "partial_json": "{\"q\":"}),
        ),
        block_stop(0),
        block_start(1, json!({"type": "text", "text": "Hi"})),
        delta(
            1,
            json!({"type": "citations_delta", "citation": {"url": "x"}}),
        ),
        block_stop(1),
        json!({"type": "some_future_event", "x": 1}).to_string(),
    ];
    events.extend(message_end("end_turn", 2));
    let (response, seen) = assemble(Accumulator::new(), &events);
    assert_eq!(response.content, vec![Block::Text { text: "Hi".into() }]);
    assert_eq!(seen, vec![StreamEvent::TextDelta("Hi".into())]);
}

#[test]
fn mid_stream_error_event_is_reported_with_its_kind() {
    let events = vec![
        message_start(),
        block_start(0, json!({"type": "text", "text": ""})),
        delta(0, json!({"type": "text_delta", "text": "partial"})),
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
            .to_string(),
    ];
    let (result, _, _) = feed(Accumulator::new(), &events);
    assert_eq!(
        result,
        Err(StreamError::Api {
            kind: "overloaded_error".into(),
            message: "Overloaded".into()
        })
    );
}

#[test]
fn stream_without_message_stop_is_incomplete() {
    let events = vec![
        message_start(),
        block_start(0, json!({"type": "text", "text": ""})),
        delta(0, json!({"type": "text_delta", "text": "cut off"})),
        block_stop(0),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}})
            .to_string(),
    ];
    let (result, _, acc) = feed(Accumulator::new(), &events);
    result.expect("events are valid");
    assert!(!acc.is_complete());
    assert_eq!(acc.finish(), Err(StreamError::Incomplete));
}

#[test]
fn deltas_for_blocks_that_never_started_or_of_the_wrong_kind_are_errors() {
    let orphan = vec![
        message_start(),
        delta(3, json!({"type": "text_delta", "text": "x"})),
    ];
    assert!(matches!(
        feed(Accumulator::new(), &orphan).0,
        Err(StreamError::Protocol(_))
    ));

    let mismatched = vec![
        message_start(),
        block_start(0, json!({"type": "text", "text": ""})),
        delta(0, json!({"type": "input_json_delta", "partial_json": "{}"})),
    ];
    match feed(Accumulator::new(), &mismatched).0 {
        Err(StreamError::Protocol(msg)) => assert!(
            msg.contains("input_json_delta") && msg.contains("text"),
            "{msg}"
        ),
        other => panic!("expected a protocol error, got {other:?}"),
    }

    assert!(matches!(
        feed(Accumulator::new(), &["not json".to_string()]).0,
        Err(StreamError::Protocol(_))
    ));
}
