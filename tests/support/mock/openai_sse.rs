//! Rendering a scripted [`Reply`] into the server-sent events of the OpenAI
//! Chat Completions streaming API: `data: {chunk}` frames (no event names),
//! text and tool-call arguments split into pieces, usage in a last chunk
//! with no choices, then `data: [DONE]`.

use serde_json::{Value, json};

use super::script::{Block, Reply, Turn};
use super::sse::Pieces;

/// The frames of `reply` as `turn` delivers it: a role chunk, the content
/// chunks, the finish chunk, the usage chunk and `[DONE]`.
pub(super) fn render(turn: &Turn, reply: &Reply, id: &str, model: &str) -> Vec<String> {
    let mut pieces = Pieces::new(turn.piece_size);
    let chunk = |delta: Value, finish: Value| {
        frame(&json!({
            "id": id, "object": "chat.completion.chunk", "created": 1_700_000_000,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }))
    };
    let mut frames = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    let mut calls = 0;
    for block in &reply.blocks {
        match block {
            Block::Text(text) => {
                for piece in pieces.split(text) {
                    frames.push(chunk(json!({"content": piece}), Value::Null));
                }
            }
            Block::Thinking { thinking, .. } => {
                for piece in pieces.split(thinking) {
                    frames.push(chunk(json!({"reasoning_content": piece}), Value::Null));
                }
            }
            // Chat Completions has no opaque reasoning.
            Block::RedactedThinking(_) => {}
            Block::ToolUse {
                id: call_id,
                name,
                input,
                cut_at,
            } => {
                let index = calls;
                calls += 1;
                // id and name come first, with no arguments, as OpenAI sends them.
                frames.push(chunk(
                    json!({"tool_calls": [{"index": index, "id": call_id, "type": "function",
                                           "function": {"name": name, "arguments": ""}}]}),
                    Value::Null,
                ));
                let arguments = input.to_string();
                let arguments: String = match cut_at {
                    Some(chars) => arguments.chars().take(*chars).collect(),
                    None => arguments,
                };
                for piece in pieces.split(&arguments) {
                    frames.push(chunk(
                        json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                        Value::Null,
                    ));
                }
            }
        }
    }
    frames.push(chunk(
        json!({}),
        json!(finish_reason(&reply.effective_stop_reason())),
    ));
    frames.push(frame(&json!({
        "id": id, "object": "chat.completion.chunk", "created": 1_700_000_000,
        "model": model, "choices": [],
        "usage": {
            "prompt_tokens": reply.input_tokens + reply.cache_read_input_tokens,
            "completion_tokens": reply.output_tokens,
            "total_tokens": reply.input_tokens + reply.cache_read_input_tokens + reply.output_tokens,
            "prompt_tokens_details": {"cached_tokens": reply.cache_read_input_tokens},
        },
    })));
    frames.push("data: [DONE]\n\n".to_string());
    frames
}

/// The OpenAI finish reason for an Anthropic-style stop reason.
fn finish_reason(stop_reason: &str) -> &str {
    match stop_reason {
        "tool_use" => "tool_calls",
        "max_tokens" => "length",
        "refusal" => "content_filter",
        "end_turn" | "stop_sequence" => "stop",
        other => other,
    }
}

/// One server-sent event carrying `payload` as its data.
pub(super) fn frame(payload: &Value) -> String {
    format!("data: {payload}\n\n")
}
