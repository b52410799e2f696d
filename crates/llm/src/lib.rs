//! The model layer: provider-neutral wire types, the `Provider` trait, the
//! provider registry, and the Anthropic Messages and OpenAI Chat Completions
//! clients with SSE streaming and retries.
//!
//! This layer imports nothing else of ah. Everything above it speaks in
//! [`Message`]s and [`Block`]s and receives live progress as [`StreamEvent`]s.

#![forbid(unsafe_code)]

pub mod anthropic;
pub mod auth;
pub mod crossing;
pub mod models;
pub mod openai;
pub mod prices;
pub mod providers;

pub mod retry;
pub mod sanitize;
pub mod sse;
#[cfg(test)]
mod stream_harness;
pub mod transport;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// One content block of a message, in the shape the Anthropic API uses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block {
    Text {
        text: String,
    },
    Thinking {
        thinking: String,
        signature: String,
    },
    RedactedThinking {
        data: String,
    },
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    ToolResult {
        tool_use_id: String,
        content: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
    /// An image for the model (a `read` of a picture), after the tool
    /// results of its turn.
    Image {
        source: ImageSource,
    },
}

/// An image's bytes, base64, as the Anthropic API takes them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImageSource {
    /// Always `base64`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`.
    pub media_type: String,
    pub data: String,
}

/// A message as sent to (and received from) the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: Vec<Block>,
}

impl Message {
    pub fn user_text(text: impl Into<String>) -> Message {
        Message {
            role: Role::User,
            content: vec![Block::Text { text: text.into() }],
        }
    }
}

/// A tool the model may call: name, description and JSON schema of its input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDef {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
}

/// One call to the model.
#[derive(Debug, Clone)]
pub struct Request {
    /// Full model id (aliases are resolved before this point).
    pub model: String,
    pub system: String,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolDef>,
    pub max_tokens: u32,
    /// Extended thinking budget in tokens; `None` leaves thinking off.
    pub thinking_budget: Option<u32>,
}

/// Token accounting reported by the API.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_creation_input_tokens: u64,
    pub cache_read_input_tokens: u64,
}

/// A complete assistant response, assembled from the stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    pub id: String,
    pub model: String,
    pub content: Vec<Block>,
    /// `end_turn`, `tool_use`, `max_tokens`, `stop_sequence`, `pause_turn`, `refusal`, …
    pub stop_reason: Option<String>,
    pub usage: Usage,
    /// Tool calls whose input the output limit (`max_tokens`) cut off; their
    /// input is `{}` and they must not run.
    pub truncated_tool_calls: Vec<String>,
}

/// Live progress while a response streams in. Consumers (the agent) forward
/// these as events; the final [`Response`] is authoritative.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    TextDelta(String),
    ThinkingDelta(String),
    ToolUseStart {
        id: String,
        name: String,
    },
    /// A retry is about to happen after `delay_ms`.
    Retry {
        attempt: u32,
        delay_ms: u64,
        reason: String,
    },
}

/// Why a model call failed for good (after retries).
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error("no API credentials: set ANTHROPIC_API_KEY, or put the key in ~/.anthropic/api_key")]
    NoCredentials,
    /// A provider that needs a key has none in its variable.
    #[error("no API key for provider {provider}: set {variable}")]
    MissingKey { provider: String, variable: String },
    /// A credentials file exists but cannot be used; the message names the file
    /// (never the secret) and what to do.
    #[error("unusable credentials: {0}")]
    BadCredentials(String),
    #[error("API error {status} ({kind}): {message}")]
    Api {
        status: u16,
        kind: String,
        message: String,
    },
    #[error("the model's context window is full: {0}")]
    ContextOverflow(String),
    #[error("model call failed after {attempts} attempts: {last}")]
    RetriesExhausted { attempts: u32, last: String },
    #[error("malformed response stream: {0}")]
    Protocol(String),
    #[error("network error: {0}")]
    Network(String),
}

/// A model backend. The agent holds one as `Arc<dyn Provider>`.
#[async_trait::async_trait]
pub trait Provider: Send + Sync {
    /// Streams one response. `on_event` sees deltas and retries as they happen;
    /// retries are handled inside. Dropping the future cancels the call.
    async fn stream(
        &self,
        request: &Request,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<Response, LlmError>;
}
