//! ah's provider-neutral conversation as a Chat Completions request body.
//!
//! - The system prompt is the first message, `role: system`.
//! - An assistant message's text blocks become its `content`, its tool calls
//!   its `tool_calls` (`arguments` is the input as a JSON string).
//! - Each tool result becomes its own `role: tool` message keyed by
//!   `tool_call_id`, placed before the user's text of the same turn (the API
//!   wants the results right after the calls). The API has no error flag:
//!   a failed call's result starts with `Error: `.
//! - The API has no field to send reasoning back, so thinking blocks (from
//!   this server or from Claude earlier in the session) go into the
//!   assistant's `content` as `<thinking>…</thinking>` text, before the text
//!   that followed them, marked so the model reads them as its earlier
//!   reasoning; redacted thinking is opaque and left out (see
//!   [`crate::crossing`]).

use bytes::Bytes;
use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::{Map, Value, json};

use crate::crossing::thinking_as_text;
use crate::providers::OutputLimitField;
use crate::{Block, ImageSource, LlmError, Message, Request, Role, ToolDef};

/// The body: `messages` borrows the pictures' base64 from the request,
/// so the body is the only copy made of them; the other fields are JSON.
#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: Vec<Wire<'a>>,
    #[serde(flatten)]
    rest: Map<String, Value>,
}

/// One message of the body.
#[derive(Serialize)]
#[serde(untagged)]
enum Wire<'a> {
    Json(Value),
    /// A user message with pictures: its text, then each picture.
    Pictures {
        role: &'static str,
        content: Vec<Part<'a>>,
    },
}

/// A part of a user message's `content`.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Part<'a> {
    Text { text: String },
    ImageUrl { image_url: DataUrl<'a> },
}

/// `{"url": "data:TYPE;base64,DATA"}`, written straight from the source.
struct DataUrl<'a>(&'a ImageSource);

impl Serialize for DataUrl<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let ImageSource {
            media_type, data, ..
        } = self.0;
        let mut map = serializer.serialize_map(Some(1))?;
        map.serialize_entry("url", &format_args!("data:{media_type};base64,{data}"))?;
        map.end()
    }
}

/// Encodes `request` as a streaming Chat Completions body that asks for
/// usage in the last chunk.
pub fn body(request: &Request, limit_field: OutputLimitField) -> Result<Bytes, LlmError> {
    let mut rest = Map::new();
    if !request.tools.is_empty() {
        rest.insert(
            "tools".into(),
            Value::Array(request.tools.iter().map(tool).collect()),
        );
    }
    rest.insert(limit_field.as_str().into(), json!(request.max_tokens));
    rest.insert("stream".into(), json!(true));
    rest.insert("stream_options".into(), json!({"include_usage": true}));
    let body = Body {
        model: &request.model,
        messages: messages(request),
        rest,
    };
    serde_json::to_vec(&body)
        .map(Bytes::from)
        .map_err(|e| LlmError::Protocol(format!("cannot encode the request: {e}")))
}

fn tool(def: &ToolDef) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": def.name,
            "description": def.description,
            "parameters": def.input_schema,
        }
    })
}

/// The system message, then every message of the conversation.
fn messages(request: &Request) -> Vec<Wire<'_>> {
    let mut out = Vec::with_capacity(request.messages.len() + 1);
    if !request.system.is_empty() {
        out.push(Wire::Json(
            json!({"role": "system", "content": request.system}),
        ));
    }
    for message in &request.messages {
        match message.role {
            Role::User => user(message, &mut out),
            Role::Assistant => out.extend(assistant(message).map(Wire::Json)),
        }
    }
    out
}

/// Tool results as `role: tool` messages first, then the text as one user
/// message (with the images as `image_url` parts, when there are any).
fn user<'a>(message: &'a Message, out: &mut Vec<Wire<'a>>) {
    let mut texts = Vec::new();
    let mut images = Vec::new();
    for block in &message.content {
        match block {
            Block::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => {
                let content = if *is_error {
                    format!("Error: {content}")
                } else {
                    content.clone()
                };
                out.push(Wire::Json(
                    json!({"role": "tool", "tool_call_id": tool_use_id, "content": content}),
                ));
            }
            Block::Text { text } => texts.push(text.as_str()),
            Block::Image { source } => images.push(Part::ImageUrl {
                image_url: DataUrl(source),
            }),
            Block::Thinking { .. } | Block::RedactedThinking { .. } | Block::ToolUse { .. } => {}
        }
    }
    match (texts.is_empty(), images.is_empty()) {
        (true, true) => {}
        (false, true) => out.push(Wire::Json(
            json!({"role": "user", "content": texts.join("\n\n")}),
        )),
        (_, false) => {
            let mut content = Vec::new();
            if !texts.is_empty() {
                content.push(Part::Text {
                    text: texts.join("\n\n"),
                });
            }
            content.extend(images);
            out.push(Wire::Pictures {
                role: "user",
                content,
            });
        }
    }
}

/// The assistant's text (its reasoning included) and tool calls; `None`
/// when nothing is left.
fn assistant(message: &Message) -> Option<Value> {
    let mut texts = Vec::new();
    let mut calls = Vec::new();
    for block in &message.content {
        match block {
            Block::Text { text } => texts.push(text.clone()),
            Block::Thinking { thinking, .. } => texts.push(thinking_as_text(thinking)),
            Block::ToolUse { id, name, input } => calls.push(json!({
                "id": id,
                "type": "function",
                "function": {"name": name, "arguments": input.to_string()},
            })),
            Block::RedactedThinking { .. } | Block::ToolResult { .. } | Block::Image { .. } => {}
        }
    }
    if texts.is_empty() && calls.is_empty() {
        return None;
    }
    let mut out = Map::new();
    out.insert("role".into(), json!("assistant"));
    out.insert(
        "content".into(),
        if texts.is_empty() {
            Value::Null
        } else {
            json!(texts.join("\n\n"))
        },
    );
    if !calls.is_empty() {
        out.insert("tool_calls".into(), Value::Array(calls));
    }
    Some(Value::Object(out))
}
