//! The Chat Completions assembler, fed chunks shaped like OpenAI's (and
//! like the variations of compatible servers).

use serde_json::{Value, json};

use super::*;
use crate::stream_harness::{assemble, feed};

fn chunk(delta: Value, finish: Option<&str>) -> String {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
        "model": "gpt-test",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
    })
    .to_string()
}

fn usage(prompt: u64, cached: u64, completion: u64) -> String {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "gpt-test",
        "choices": [],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                  "total_tokens": prompt + completion,
                  "prompt_tokens_details": {"cached_tokens": cached}}
    })
    .to_string()
}

fn call_piece(index: u64, id: Option<&str>, name: Option<&str>, arguments: &str) -> Value {
    let mut function = json!({"arguments": arguments});
    if let Some(name) = name {
        function["name"] = json!(name);
    }
    let mut piece = json!({"index": index, "function": function});
    if let Some(id) = id {
        piece["id"] = json!(id);
        piece["type"] = json!("function");
    }
    json!({"tool_calls": [piece]})
}

#[test]
fn text_reply_with_usage_and_done() {
    let data = vec![
        chunk(json!({"role": "assistant", "content": ""}), None),
        chunk(json!({"content": "Hel"}), None),
        chunk(json!({"content": "lo"}), None),
        chunk(json!({}), Some("stop")),
        usage(100, 40, 7),
        "[DONE]".to_string(),
    ];
    let (response, seen) = assemble(Assembler::new(), &data);
    assert_eq!(response.id, "chatcmpl-1");
    assert_eq!(response.model, "gpt-test");
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
            input_tokens: 60,
            output_tokens: 7,
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: 40,
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

/// Two calls whose arguments arrive cut at `cut` bytes (the first call) and
/// in one piece (the second).
fn two_calls(args: &str, cut: usize) -> Vec<String> {
    let (head, tail) = args.split_at(cut);
    vec![
        chunk(json!({"role": "assistant", "content": null}), None),
        chunk(call_piece(0, Some("call_a"), Some("write"), ""), None),
        chunk(call_piece(0, None, None, head), None),
        chunk(call_piece(0, None, None, tail), None),
        chunk(
            call_piece(1, Some("call_b"), Some("bash"), r#"{"command":"ls"}"#),
            None,
        ),
        chunk(json!({}), Some("tool_calls")),
        "[DONE]".to_string(),
    ]
}

#[test]
fn tool_call_arguments_cut_at_every_byte_position_assemble_the_same() {
    let input = json!({"path": "dir/ünï.txt", "content": "line \"1\"\n\ttab \\ end"});
    let args = input.to_string();
    for cut in 0..=args.len() {
        if !args.is_char_boundary(cut) {
            // Pieces are strings: a server cuts between characters.
            continue;
        }
        let (response, seen) = assemble(Assembler::new(), &two_calls(&args, cut));
        assert_eq!(
            response.content,
            vec![
                Block::ToolUse {
                    id: "call_a".into(),
                    name: "write".into(),
                    input: input.clone()
                },
                Block::ToolUse {
                    id: "call_b".into(),
                    name: "bash".into(),
                    input: json!({"command": "ls"})
                },
            ],
            "cut at {cut}"
        );
        assert_eq!(response.stop_reason.as_deref(), Some("tool_use"));
        assert!(response.truncated_tool_calls.is_empty());
        assert_eq!(
            seen,
            vec![
                StreamEvent::ToolUseStart {
                    id: "call_a".into(),
                    name: "write".into()
                },
                StreamEvent::ToolUseStart {
                    id: "call_b".into(),
                    name: "bash".into()
                },
            ]
        );
    }
}

#[test]
fn finish_reasons_map_to_ah_stop_reasons() {
    for (finish, expected) in [
        ("stop", "end_turn"),
        ("length", "max_tokens"),
        ("tool_calls", "tool_use"),
        ("content_filter", "refusal"),
        ("something_new", "something_new"),
    ] {
        let data = vec![chunk(json!({"content": "x"}), Some(finish))];
        let (response, _) = assemble(Assembler::new(), &data);
        assert_eq!(response.stop_reason.as_deref(), Some(expected), "{finish}");
    }
    // Some servers say `stop` after tool calls.
    let data = vec![
        chunk(call_piece(0, Some("c"), Some("bash"), "{}"), None),
        chunk(json!({}), Some("stop")),
        "[DONE]".to_string(),
    ];
    assert_eq!(
        assemble(Assembler::new(), &data).0.stop_reason.as_deref(),
        Some("tool_use")
    );
}

#[test]
fn a_call_cut_by_the_output_limit_is_marked_and_bad_json_is_passed_as_text() {
    let data = vec![
        chunk(
            call_piece(0, Some("call_cut"), Some("write"), r#"{"path": "a"#),
            None,
        ),
        chunk(json!({}), Some("length")),
        "[DONE]".to_string(),
    ];
    let (response, _) = assemble(Assembler::new(), &data);
    assert_eq!(response.truncated_tool_calls, vec!["call_cut".to_string()]);
    assert_eq!(response.stop_reason.as_deref(), Some("max_tokens"));

    let data = vec![
        chunk(
            call_piece(0, Some("call_x"), Some("read"), "{path: a}"),
            None,
        ),
        chunk(json!({}), Some("tool_calls")),
        "[DONE]".to_string(),
    ];
    let (response, _) = assemble(Assembler::new(), &data);
    assert_eq!(
        response.content,
        vec![Block::ToolUse {
            id: "call_x".into(),
            name: "read".into(),
            input: json!("{path: a}")
        }]
    );
}

#[test]
fn servers_without_index_or_id_and_with_reasoning_are_understood() {
    let data = vec![
        chunk(json!({"reasoning_content": "think"}), None),
        chunk(json!({"reasoning": "ing"}), None),
        chunk(
            json!({"tool_calls": [{"id": "", "function": {"name": "bash", "arguments": "{\"command\""}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [{"function": {"arguments": ": \"pwd\"}"}}]}),
            None,
        ),
        chunk(json!({}), Some("tool_calls")),
    ];
    // No [DONE]: the body ended after the finish reason.
    let (response, seen) = assemble(Assembler::new(), &data);
    assert_eq!(
        response.content[0],
        Block::Thinking {
            thinking: "thinking".into(),
            signature: String::new()
        }
    );
    let Block::ToolUse { id, name, input } = &response.content[1] else {
        panic!("expected a tool call: {:?}", response.content);
    };
    assert!(id.starts_with("call_") && id.len() > 10, "{id}");
    assert_eq!((name.as_str(), input), ("bash", &json!({"command": "pwd"})));
    assert_eq!(seen[0], StreamEvent::ThinkingDelta("think".into()));
    assert_eq!(
        seen[2],
        StreamEvent::ToolUseStart {
            id: id.clone(),
            name: "bash".into()
        },
        "announced with the id the call keeps"
    );
}

#[test]
fn cut_streams_errors_and_garbage_are_reported() {
    let (result, _, assembler) = feed(Assembler::new(), &[chunk(json!({"content": "par"}), None)]);
    result.expect("accepted");
    assert_eq!(assembler.finish(), Err(StreamError::Incomplete));

    let error = json!({"error": {"message": "The server had an error", "type": "server_error"}});
    let (result, _, _) = feed(Assembler::new(), &[error.to_string()]);
    assert_eq!(
        result,
        Err(StreamError::Api {
            kind: "server_error".into(),
            message: "The server had an error".into()
        })
    );
    let (result, _, _) = feed(Assembler::new(), &["{not json".to_string()]);
    assert!(matches!(result, Err(StreamError::Protocol(_))));
    // Nothing after [DONE] counts.
    let (result, _, assembler) = feed(
        Assembler::new(),
        &[
            chunk(json!({"content": "a"}), Some("stop")),
            "[DONE]".to_string(),
            "{not json".to_string(),
        ],
    );
    result.expect("ignored after done");
    assert!(assembler.is_complete());
}

#[test]
fn a_sanitized_stream_drops_leaked_tokens_and_makes_their_call_a_tool_call() {
    let leaked = "Listing.<|start|>assistant<|channel|>commentary to=functions.bash \
                  <|constrain|>json<|message|>{\"command\":\"ls -la\"}<|call|>";
    // Cut into 5-char deltas, as a local server streams tokens.
    let chars: Vec<char> = leaked.chars().collect();
    let mut data: Vec<String> = chars
        .chunks(5)
        .map(|piece| chunk(json!({"content": piece.iter().collect::<String>()}), None))
        .collect();
    data.push(chunk(json!({}), Some("stop")));
    data.push("[DONE]".to_string());

    let (response, seen) = assemble(Assembler::sanitized(), &data);
    let streamed: String = seen
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta(piece) => Some(piece.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(streamed, "Listing.");
    let Some(Block::ToolUse { id, name, input }) = response.content.get(1) else {
        panic!("no tool call in {:?}", response.content);
    };
    assert_eq!(
        response.content[0],
        Block::Text {
            text: "Listing.".into()
        }
    );
    assert!(id.starts_with("call_"), "{id}");
    assert_eq!(name, "bash");
    assert_eq!(input, &json!({"command": "ls -la"}));
    assert!(seen.contains(&StreamEvent::ToolUseStart {
        id: id.clone(),
        name: "bash".into()
    }));
    // "stop" with a call in the reply is a tool-use stop.
    assert_eq!(response.stop_reason.as_deref(), Some("tool_use"));

    // Without the sanitizer the same stream is kept as it came.
    let (plain, _) = assemble(Assembler::new(), &data);
    assert_eq!(
        plain.content,
        vec![Block::Text {
            text: leaked.into()
        }]
    );
}
