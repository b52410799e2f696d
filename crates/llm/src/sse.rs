//! Assembles an Anthropic Messages stream into a [`Response`].
//!
//! [`Accumulator`] is pure and synchronous: feed it the `data` of each
//! server-sent event in order, it reports live [`StreamEvent`]s and, once
//! `message_stop` has arrived, yields the complete response. Transport, timeouts
//! and retries live in `anthropic.rs` and `retry.rs`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{Block, Response, StreamEvent, Usage};
use wire::{WireBlock, WireDelta, WireEvent};

mod wire;

/// Why a stream could not be assembled.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StreamError {
    /// The API sent an `error` event mid-stream (e.g. `overloaded_error`).
    #[error("the API reported {kind} mid-stream: {message}")]
    Api { kind: String, message: String },
    /// The stream ended before `message_stop`.
    #[error("the response stream ended before message_stop")]
    Incomplete,
    /// The stream broke the protocol (bad JSON, deltas for unknown blocks, …).
    #[error("{0}")]
    Protocol(String),
}

/// Builds one [`Response`] from stream events.
#[derive(Debug, Default)]
pub struct Accumulator {
    id: String,
    model: String,
    blocks: BTreeMap<u64, Partial>,
    stop_reason: Option<String>,
    usage: Usage,
    complete: bool,
}

/// A content block while it streams in.
#[derive(Debug)]
enum Partial {
    Text(String),
    Thinking {
        thinking: String,
        signature: String,
    },
    RedactedThinking(String),
    ToolUse {
        id: String,
        name: String,
        json: String,
        input: Option<Value>,
    },
    /// A block type ah does not know (e.g. server tools); its deltas are dropped.
    Skipped,
}

impl super::transport::StreamAssembler for Accumulator {
    fn handle(
        &mut self,
        data: &str,
        on_event: &mut dyn FnMut(StreamEvent),
    ) -> Result<(), StreamError> {
        Accumulator::handle(self, data, on_event)
    }

    fn is_complete(&self) -> bool {
        self.complete
    }

    fn finish(self) -> Result<Response, StreamError> {
        Accumulator::finish(self)
    }
}

impl Accumulator {
    pub fn new() -> Accumulator {
        Accumulator::default()
    }

    /// Whether `message_stop` has arrived.
    pub fn is_complete(&self) -> bool {
        self.complete
    }

    /// Handles the JSON `data` of one event. The SSE event name repeats the
    /// data's `type` field, so only the data is needed.
    pub fn handle(
        &mut self,
        data: &str,
        on_event: &mut dyn FnMut(StreamEvent),
    ) -> Result<(), StreamError> {
        let event: WireEvent = serde_json::from_str(data).map_err(|e| {
            StreamError::Protocol(format!("unexpected event data ({e}): {}", excerpt(data)))
        })?;
        if self.complete {
            return Ok(());
        }
        match event {
            WireEvent::MessageStart { message } => {
                self.id = message.id;
                self.model = message.model;
                message.usage.apply_to(&mut self.usage);
            }
            WireEvent::ContentBlockStart {
                index,
                content_block,
            } => {
                let partial = start_block(content_block, on_event);
                if self.blocks.insert(index, partial).is_some() {
                    return Err(StreamError::Protocol(format!(
                        "content block {index} started twice"
                    )));
                }
            }
            WireEvent::ContentBlockDelta { index, delta } => {
                let block = self.block_mut(index)?;
                apply_delta(index, block, delta, on_event)?;
            }
            WireEvent::ContentBlockStop { index } => {
                // A call cut off by the output limit has incomplete JSON;
                // whether that is an error is known only at the end, from
                // the stop reason.
                let _ = finish_tool_input(self.block_mut(index)?);
            }
            WireEvent::MessageDelta { delta, usage } => {
                if delta.stop_reason.is_some() {
                    self.stop_reason = delta.stop_reason;
                }
                usage.apply_to(&mut self.usage);
            }
            WireEvent::MessageStop => self.complete = true,
            WireEvent::Ping | WireEvent::Unknown => {}
            WireEvent::Error { error } => {
                return Err(StreamError::Api {
                    kind: error.kind,
                    message: error.message,
                });
            }
        }
        Ok(())
    }

    /// The assembled response, or [`StreamError::Incomplete`] when the stream
    /// ended before `message_stop`.
    pub fn finish(self) -> Result<Response, StreamError> {
        if !self.complete {
            return Err(StreamError::Incomplete);
        }
        let cut_off = self.stop_reason.as_deref() == Some("max_tokens");
        let mut content = Vec::with_capacity(self.blocks.len());
        let mut truncated_tool_calls = Vec::new();
        for (_, mut partial) in self.blocks {
            if let Err(err) = finish_tool_input(&mut partial) {
                match &mut partial {
                    Partial::ToolUse { id, input, .. } if cut_off => {
                        truncated_tool_calls.push(id.clone());
                        *input = Some(empty_object());
                    }
                    _ => return Err(err),
                }
            }
            let block = match partial {
                Partial::Text(text) => Block::Text { text },
                Partial::Thinking {
                    thinking,
                    signature,
                } => Block::Thinking {
                    thinking,
                    signature,
                },
                Partial::RedactedThinking(data) => Block::RedactedThinking { data },
                Partial::ToolUse {
                    id, name, input, ..
                } => Block::ToolUse {
                    id,
                    name,
                    input: input.unwrap_or_else(empty_object),
                },
                Partial::Skipped => continue,
            };
            content.push(block);
        }
        Ok(Response {
            id: self.id,
            model: self.model,
            content,
            stop_reason: self.stop_reason,
            usage: self.usage,
            truncated_tool_calls,
        })
    }

    fn block_mut(&mut self, index: u64) -> Result<&mut Partial, StreamError> {
        self.blocks.get_mut(&index).ok_or_else(|| {
            StreamError::Protocol(format!(
                "event for content block {index}, which never started"
            ))
        })
    }
}

fn start_block(block: WireBlock, on_event: &mut dyn FnMut(StreamEvent)) -> Partial {
    match block {
        WireBlock::Text { text } => {
            if !text.is_empty() {
                on_event(StreamEvent::TextDelta(text.clone()));
            }
            Partial::Text(text)
        }
        WireBlock::Thinking {
            thinking,
            signature,
        } => {
            if !thinking.is_empty() {
                on_event(StreamEvent::ThinkingDelta(thinking.clone()));
            }
            Partial::Thinking {
                thinking,
                signature,
            }
        }
        WireBlock::RedactedThinking { data } => Partial::RedactedThinking(data),
        WireBlock::ToolUse { id, name, input } => {
            on_event(StreamEvent::ToolUseStart {
                id: id.clone(),
                name: name.clone(),
            });
            Partial::ToolUse {
                id,
                name,
                json: String::new(),
                input: Some(input),
            }
        }
        WireBlock::Unknown => Partial::Skipped,
    }
}

fn apply_delta(
    index: u64,
    block: &mut Partial,
    delta: WireDelta,
    on_event: &mut dyn FnMut(StreamEvent),
) -> Result<(), StreamError> {
    match (block, delta) {
        (Partial::Text(text), WireDelta::TextDelta { text: piece }) => {
            text.push_str(&piece);
            on_event(StreamEvent::TextDelta(piece));
        }
        (Partial::Thinking { thinking, .. }, WireDelta::ThinkingDelta { thinking: piece }) => {
            thinking.push_str(&piece);
            on_event(StreamEvent::ThinkingDelta(piece));
        }
        (Partial::Thinking { signature, .. }, WireDelta::SignatureDelta { signature: piece }) => {
            signature.push_str(&piece);
        }
        (Partial::ToolUse { json, input, .. }, WireDelta::InputJsonDelta { partial_json }) => {
            json.push_str(&partial_json);
            // The streamed JSON replaces the placeholder input of content_block_start.
            *input = None;
        }
        (Partial::Skipped, _) | (_, WireDelta::Unknown) => {}
        (block, delta) => {
            return Err(StreamError::Protocol(format!(
                "{} delta for content block {index}, which is a {} block",
                delta.name(),
                block.name()
            )));
        }
    }
    Ok(())
}

/// Parses the collected input JSON of a tool-use block; other blocks are left
/// alone. Empty input means `{}`.
fn finish_tool_input(block: &mut Partial) -> Result<(), StreamError> {
    if let Partial::ToolUse {
        id,
        name,
        json,
        input,
    } = block
        && input.is_none()
    {
        let parsed = if json.trim().is_empty() {
            empty_object()
        } else {
            serde_json::from_str(json).map_err(|e| {
                StreamError::Protocol(format!(
                    "input of tool call {name} ({id}) is not valid JSON: {e}"
                ))
            })?
        };
        *input = Some(parsed);
    }
    Ok(())
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// The start of `data`, for error messages.
fn excerpt(data: &str) -> &str {
    match data.char_indices().nth(200) {
        Some((end, _)) => &data[..end],
        None => data,
    }
}

impl Partial {
    fn name(&self) -> &'static str {
        match self {
            Partial::Text(_) => "text",
            Partial::Thinking { .. } => "thinking",
            Partial::RedactedThinking(_) => "redacted_thinking",
            Partial::ToolUse { .. } => "tool_use",
            Partial::Skipped => "unknown",
        }
    }
}

#[cfg(test)]
mod tests;
