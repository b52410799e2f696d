//! Rendering a scripted [`Reply`] into the exact server-sent events of the
//! Anthropic Messages streaming API, text and tool input split into pieces.

use serde_json::{Value, json};

use super::script::{Block, Reply, Turn};

/// Sizes (in characters) that text, thinking and tool-input pieces cycle
/// through when a turn sets no fixed [`Turn::piece_size`].
const DEFAULT_PIECE_SIZES: [usize; 5] = [3, 4, 5, 6, 7];

/// The SSE frames of `reply` as `turn` delivers it, in order, each
/// `event: <type>\ndata: <json>\n\n`.
pub(super) fn render(turn: &Turn, reply: &Reply, message_id: &str, model: &str) -> Vec<String> {
    let mut pieces = Pieces::new(turn.piece_size);
    let mut frames = vec![
        frame(&json!({
            "type": "message_start",
            "message": {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": null,
                "stop_sequence": null,
                "usage": {
                    "input_tokens": reply.input_tokens,
                    "output_tokens": 1,
                    "cache_creation_input_tokens": reply.cache_creation_input_tokens,
                    "cache_read_input_tokens": reply.cache_read_input_tokens,
                },
            },
        })),
        frame(&json!({"type": "ping"})),
    ];
    for (index, block) in reply.blocks.iter().enumerate() {
        let (start, deltas) = block_events(block, &mut pieces);
        frames.push(frame(
            &json!({"type": "content_block_start", "index": index, "content_block": start}),
        ));
        frames.push(frame(&json!({"type": "ping"})));
        for delta in deltas {
            frames.push(frame(
                &json!({"type": "content_block_delta", "index": index, "delta": delta}),
            ));
        }
        frames.push(frame(
            &json!({"type": "content_block_stop", "index": index}),
        ));
    }
    frames.push(frame(&json!({
        "type": "message_delta",
        "delta": {"stop_reason": reply.effective_stop_reason(), "stop_sequence": null},
        "usage": {"output_tokens": reply.output_tokens},
    })));
    frames.push(frame(&json!({"type": "message_stop"})));
    frames
}

/// The `content_block_start` payload and the deltas of one block.
fn block_events(block: &Block, pieces: &mut Pieces) -> (Value, Vec<Value>) {
    match block {
        Block::Text(text) => (
            json!({"type": "text", "text": ""}),
            pieces
                .split(text)
                .into_iter()
                .map(|piece| json!({"type": "text_delta", "text": piece}))
                .collect(),
        ),
        Block::Thinking {
            thinking,
            signature,
        } => {
            let mut deltas: Vec<Value> = pieces
                .split(thinking)
                .into_iter()
                .map(|piece| json!({"type": "thinking_delta", "thinking": piece}))
                .collect();
            deltas.push(json!({"type": "signature_delta", "signature": signature}));
            (json!({"type": "thinking", "thinking": ""}), deltas)
        }
        Block::RedactedThinking(data) => (
            json!({"type": "redacted_thinking", "data": data}),
            Vec::new(),
        ),
        Block::ToolUse {
            id,
            name,
            input,
            cut_at,
        } => {
            let is_empty_object = input.as_object().is_some_and(|map| map.is_empty());
            let json = input.to_string();
            let json: String = match cut_at {
                Some(chars) => json.chars().take(*chars).collect(),
                None => json,
            };
            let partials = if is_empty_object {
                vec![String::new()]
            } else {
                pieces.split(&json)
            };
            (
                json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
                partials
                    .into_iter()
                    .map(|piece| json!({"type": "input_json_delta", "partial_json": piece}))
                    .collect(),
            )
        }
    }
}

/// Splits strings into delta pieces on character boundaries.
pub(super) struct Pieces {
    fixed: Option<usize>,
    next: usize,
}

impl Pieces {
    pub(super) fn new(fixed: Option<usize>) -> Pieces {
        Pieces { fixed, next: 0 }
    }

    fn size(&mut self) -> usize {
        self.fixed.unwrap_or_else(|| {
            let size = DEFAULT_PIECE_SIZES[self.next % DEFAULT_PIECE_SIZES.len()];
            self.next += 1;
            size
        })
    }

    pub(super) fn split(&mut self, text: &str) -> Vec<String> {
        let chars: Vec<char> = text.chars().collect();
        let mut out = Vec::new();
        let mut start = 0;
        while start < chars.len() {
            let end = (start + self.size()).min(chars.len());
            out.push(chars[start..end].iter().collect());
            start = end;
        }
        out
    }
}

/// One server-sent event whose name is the payload's `type`.
pub(super) fn frame(payload: &Value) -> String {
    let name = payload["type"].as_str().unwrap_or("message");
    format!("event: {name}\ndata: {payload}\n\n")
}
