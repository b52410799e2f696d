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
use serde_json::{Map, Value, json};

use crate::crossing::thinking_as_text;
use crate::providers::OutputLimitField;
use crate::{Block, LlmError, Message, Request, Role, ToolDef};

/// Encodes `request` as a streaming Chat Completions body that asks for
/// usage in the last chunk.
pub fn body(request: &Request, limit_field: OutputLimitField) -> Result<Bytes, LlmError> {
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    body.insert("messages".into(), Value::Array(messages(request)));
    if !request.tools.is_empty() {
        body.insert(
            "tools".into(),
            Value::Array(request.tools.iter().map(tool).collect()),
        );
    }
    body.insert(limit_field.as_str().into(), json!(request.max_tokens));
    body.insert("stream".into(), json!(true));
    body.insert("stream_options".into(), json!({"include_usage": true}));
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
fn messages(request: &Request) -> Vec<Value> {
    let mut out = Vec::with_capacity(request.messages.len() + 1);
    if !request.system.is_empty() {
        out.push(json!({"role": "system", "content": request.system}));
    }
    for message in &request.messages {
        match message.role {
            Role::User => user(message, &mut out),
            Role::Assistant => out.extend(assistant(message)),
        }
    }
    out
}

/// Tool results as `role: tool` messages first, then the text as one user
/// message (with the images as `image_url` parts, when there are any).
fn user(message: &Message, out: &mut Vec<Value>) {
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
                out.push(json!({"role": "tool", "tool_call_id": tool_use_id, "content": content}));
            }
            Block::Text { text } => texts.push(text.as_str()),
            Block::Image { source } => images.push(json!({
                "type": "image_url",
                "image_url": {"url": format!("data:{};base64,{}", source.media_type, source.data)},
            })),
            Block::Thinking { .. } | Block::RedactedThinking { .. } | Block::ToolUse { .. } => {}
        }
    }
    match (texts.is_empty(), images.is_empty()) {
        (true, true) => {}
        (false, true) => out.push(json!({"role": "user", "content": texts.join("\n\n")})),
        (_, false) => {
            let mut parts = Vec::new();
            if !texts.is_empty() {
                parts.push(json!({"type": "text", "text": texts.join("\n\n")}));
            }
            parts.extend(images);
            out.push(json!({"role": "user", "content": parts}));
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
