//! Assembles a Chat Completions stream into a [`Response`].
//!
//! Each event's `data` is a `chat.completion.chunk`: text arrives as
//! `delta.content`, reasoning (from servers that stream it) as
//! `delta.reasoning_content` or `delta.reasoning`, tool calls as
//! `delta.tool_calls` pieces keyed by `index` (id and name in the first
//! piece, `arguments` in any number of pieces), the stop as `finish_reason`,
//! token counts in a last chunk with empty `choices`; `[DONE]` ends the
//! stream. Finish reasons become ah's stop reasons: `tool_calls` →
//! `tool_use`, `length` → `max_tokens`, `stop` → `end_turn` (or `tool_use`
//! when the reply holds tool calls, as some servers say `stop` then),
//! `content_filter` → `refusal`.
//!
//! For providers whose models leak chat-template tokens, the text goes
//! through a [`Sanitizer`] first: what it removes is neither streamed nor
//! kept, and a call it finds framed by those tokens becomes a tool call
//! after the native ones.

use serde::Deserialize;
use serde_json::Value;

use crate::sanitize::Sanitizer;
use crate::sse::StreamError;
use crate::transport::StreamAssembler;
use crate::{Block, Response, StreamEvent, Usage};

/// Builds one [`Response`] from Chat Completions chunks.
#[derive(Debug, Default)]
pub struct Assembler {
    id: String,
    model: String,
    reasoning: String,
    text: String,
    calls: Vec<Call>,
    finish_reason: Option<String>,
    usage: Usage,
    done: bool,
    /// Filters the text when the provider needs it.
    sanitizer: Option<Sanitizer>,
}

/// A tool call while its pieces stream in.
#[derive(Debug)]
struct Call {
    index: u64,
    id: String,
    name: String,
    arguments: String,
    announced: bool,
}

impl Assembler {
    pub fn new() -> Assembler {
        Assembler::default()
    }

    /// An assembler whose text goes through a [`Sanitizer`].
    pub fn sanitized() -> Assembler {
        Assembler {
            sanitizer: Some(Sanitizer::default()),
            ..Assembler::default()
        }
    }

    /// Shows and keeps `piece` of text (as far as the sanitizer lets it).
    fn text(&mut self, piece: &str, on_event: &mut dyn FnMut(StreamEvent)) {
        let piece = match &mut self.sanitizer {
            Some(sanitizer) => sanitizer.push(piece),
            None => piece.to_string(),
        };
        if !piece.is_empty() {
            self.text.push_str(&piece);
            on_event(StreamEvent::TextDelta(piece));
        }
    }

    fn handle_chunk(&mut self, chunk: Chunk, on_event: &mut dyn FnMut(StreamEvent)) {
        if self.id.is_empty()
            && let Some(id) = chunk.id
        {
            self.id = id;
        }
        if self.model.is_empty()
            && let Some(model) = chunk.model
        {
            self.model = model;
        }
        if let Some(usage) = chunk.usage {
            let cached = usage
                .prompt_tokens_details
                .and_then(|d| d.cached_tokens)
                .unwrap_or(0);
            // ah counts cached input apart, as Anthropic does.
            self.usage.input_tokens = usage.prompt_tokens.unwrap_or(0).saturating_sub(cached);
            self.usage.cache_read_input_tokens = cached;
            self.usage.output_tokens = usage.completion_tokens.unwrap_or(0);
        }
        // ah asks for one choice; others (if a server sends them) are ignored.
        let Some(choice) = chunk
            .choices
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.index.unwrap_or(0) == 0)
        else {
            return;
        };
        if let Some(delta) = choice.delta {
            self.apply(delta, on_event);
        }
        if choice.finish_reason.is_some() {
            // The choice is over: what the sanitizer holds is decided now,
            // while it can still be streamed.
            self.flush(on_event);
            self.finish_reason = choice.finish_reason;
        }
    }

    fn apply(&mut self, delta: Delta, on_event: &mut dyn FnMut(StreamEvent)) {
        for piece in [delta.reasoning_content, delta.reasoning]
            .into_iter()
            .flatten()
        {
            if !piece.is_empty() {
                self.reasoning.push_str(&piece);
                on_event(StreamEvent::ThinkingDelta(piece));
            }
        }
        if let Some(piece) = delta.content {
            self.text(&piece, on_event);
        }
        for piece in delta.tool_calls.unwrap_or_default() {
            let at = self.call_for(&piece);
            let call = &mut self.calls[at];
            if call.id.is_empty()
                && let Some(id) = piece.id
            {
                call.id = id;
            }
            if let Some(function) = piece.function {
                if call.name.is_empty()
                    && let Some(name) = function.name
                {
                    call.name = name;
                }
                if let Some(arguments) = function.arguments {
                    call.arguments.push_str(&arguments);
                }
            }
            if !call.announced && !call.name.is_empty() {
                call.announced = true;
                if call.id.is_empty() {
                    // Some local servers send no id; results need one.
                    call.id = new_call_id();
                }
                on_event(StreamEvent::ToolUseStart {
                    id: call.id.clone(),
                    name: call.name.clone(),
                });
            }
        }
    }

    /// The position of the call a piece belongs to, made if new: by `index`;
    /// without one (some servers), a piece with a new id starts a call and
    /// any other continues the last one.
    fn call_for(&mut self, piece: &CallDelta) -> usize {
        let index = match piece.index {
            Some(index) => index,
            None => match (&piece.id, self.calls.last()) {
                (Some(id), Some(last)) if !id.is_empty() && *id != last.id => {
                    self.calls.len() as u64
                }
                (_, Some(last)) => last.index,
                (_, None) => 0,
            },
        };
        if let Some(at) = self.calls.iter().position(|c| c.index == index) {
            return at;
        }
        self.calls.push(Call {
            index,
            id: String::new(),
            name: String::new(),
            arguments: String::new(),
            announced: false,
        });
        self.calls.len() - 1
    }
}

impl StreamAssembler for Assembler {
    fn handle(
        &mut self,
        data: &str,
        on_event: &mut dyn FnMut(StreamEvent),
    ) -> Result<(), StreamError> {
        if data.trim() == "[DONE]" {
            self.done = true;
            self.flush(on_event);
            return Ok(());
        }
        if self.done {
            return Ok(());
        }
        let chunk: Chunk = serde_json::from_str(data).map_err(|e| {
            StreamError::Protocol(format!("unexpected chunk ({e}): {}", excerpt(data)))
        })?;
        if let Some(error) = chunk.error {
            return Err(StreamError::Api {
                kind: error.kind(),
                message: error.message,
            });
        }
        self.handle_chunk(chunk, on_event);
        Ok(())
    }

    fn is_complete(&self) -> bool {
        self.done
    }

    /// A body that ended after a finish reason but without `[DONE]` counts
    /// as complete (some servers leave it out); one without a finish reason
    /// was cut short.
    fn finish(mut self) -> Result<Response, StreamError> {
        if !self.done && self.finish_reason.is_none() {
            return Err(StreamError::Incomplete);
        }
        // Without `[DONE]` nobody saw the held text yet; it is kept all the
        // same (the transport's stream of deltas has ended).
        self.flush(&mut |_| {});
        let stop_reason = stop_reason(self.finish_reason.as_deref(), !self.calls.is_empty());
        let cut_off = stop_reason.as_deref() == Some("max_tokens");
        let mut content = Vec::new();
        if !self.reasoning.is_empty() {
            content.push(Block::Thinking {
                thinking: self.reasoning,
                signature: String::new(),
            });
        }
        if !self.text.is_empty() {
            content.push(Block::Text { text: self.text });
        }
        let mut truncated_tool_calls = Vec::new();
        let mut calls = self.calls;
        calls.sort_by_key(|c| c.index);
        for call in calls {
            let id = if call.id.is_empty() {
                new_call_id()
            } else {
                call.id
            };
            let input = match parse_arguments(&call.arguments) {
                Some(input) => input,
                None if cut_off => {
                    truncated_tool_calls.push(id.clone());
                    Value::Object(serde_json::Map::new())
                }
                // Left as text, the schema check tells the model its input
                // was not an object, and it can try again.
                None => Value::String(call.arguments),
            };
            content.push(Block::ToolUse {
                id,
                name: call.name,
                input,
            });
        }
        Ok(Response {
            id: self.id,
            model: self.model,
            content,
            stop_reason,
            usage: self.usage,
            truncated_tool_calls,
        })
    }
}

impl Assembler {
    /// Ends the sanitizer: its held text is shown and its calls join the
    /// native ones, numbered after them.
    fn flush(&mut self, on_event: &mut dyn FnMut(StreamEvent)) {
        let Some(mut sanitizer) = self.sanitizer.take() else {
            return;
        };
        let rest = sanitizer.finish();
        if !rest.is_empty() {
            self.text.push_str(&rest);
            on_event(StreamEvent::TextDelta(rest));
        }
        let first = self.calls.iter().map(|c| c.index + 1).max().unwrap_or(0);
        for (index, found) in (first..).zip(sanitizer.take_calls()) {
            let id = new_call_id();
            on_event(StreamEvent::ToolUseStart {
                id: id.clone(),
                name: found.name.clone(),
            });
            self.calls.push(Call {
                index,
                id,
                name: found.name,
                arguments: found.input.to_string(),
                announced: true,
            });
        }
    }
}

/// An id for a call the server sent without one, unique across sessions.
fn new_call_id() -> String {
    format!("call_{}", ulid::Ulid::generate())
}

/// The arguments as JSON; empty arguments are `{}`.
fn parse_arguments(arguments: &str) -> Option<Value> {
    if arguments.trim().is_empty() {
        return Some(Value::Object(serde_json::Map::new()));
    }
    serde_json::from_str(arguments).ok()
}

/// ah's stop reason for a finish reason; unknown ones pass through.
fn stop_reason(finish_reason: Option<&str>, has_calls: bool) -> Option<String> {
    let reason = match finish_reason? {
        "tool_calls" | "function_call" => "tool_use",
        "stop" if has_calls => "tool_use",
        "stop" => "end_turn",
        "length" => "max_tokens",
        "content_filter" => "refusal",
        other => other,
    };
    Some(reason.to_string())
}

/// The start of `data`, for error messages.
fn excerpt(data: &str) -> &str {
    match data.char_indices().nth(200) {
        Some((end, _)) => &data[..end],
        None => data,
    }
}

#[derive(Deserialize)]
struct Chunk {
    id: Option<String>,
    model: Option<String>,
    choices: Option<Vec<Choice>>,
    usage: Option<WireUsage>,
    error: Option<WireError>,
}

#[derive(Deserialize)]
struct Choice {
    index: Option<u64>,
    delta: Option<Delta>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    content: Option<String>,
    reasoning_content: Option<String>,
    reasoning: Option<String>,
    tool_calls: Option<Vec<CallDelta>>,
}

#[derive(Deserialize)]
struct CallDelta {
    index: Option<u64>,
    id: Option<String>,
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    name: Option<String>,
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    prompt_tokens_details: Option<PromptDetails>,
}

#[derive(Deserialize)]
struct PromptDetails {
    cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct WireError {
    #[serde(default)]
    message: String,
    #[serde(rename = "type")]
    kind: Option<String>,
    code: Option<Value>,
}

impl WireError {
    /// `type`, else `code`, else `error`.
    fn kind(&self) -> String {
        self.kind
            .clone()
            .filter(|k| !k.is_empty())
            .or_else(|| match &self.code {
                Some(Value::String(code)) => Some(code.clone()),
                _ => None,
            })
            .unwrap_or_else(|| "error".to_string())
    }
}

#[cfg(test)]
mod tests;
