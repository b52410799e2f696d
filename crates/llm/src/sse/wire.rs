//! The JSON shapes of Anthropic stream events, as far as ah reads them.
//! Unknown event, block and delta types deserialize to `Unknown` so that new
//! API features do not break old clients.

use serde::Deserialize;
use serde_json::Value;

use super::empty_object;
use crate::Usage;

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum WireEvent {
    MessageStart {
        message: WireMessage,
    },
    ContentBlockStart {
        index: u64,
        content_block: WireBlock,
    },
    ContentBlockDelta {
        index: u64,
        delta: WireDelta,
    },
    ContentBlockStop {
        index: u64,
    },
    MessageDelta {
        delta: WireMessageDelta,
        #[serde(default)]
        usage: WireUsage,
    },
    MessageStop,
    Ping,
    Error {
        error: WireError,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize)]
pub(super) struct WireMessage {
    pub(super) id: String,
    pub(super) model: String,
    #[serde(default)]
    pub(super) usage: WireUsage,
}

#[derive(Deserialize)]
pub(super) struct WireMessageDelta {
    #[serde(default)]
    pub(super) stop_reason: Option<String>,
}

/// Usage counters; absent or null fields leave the running total unchanged.
#[derive(Deserialize, Default)]
pub(super) struct WireUsage {
    pub(super) input_tokens: Option<u64>,
    pub(super) output_tokens: Option<u64>,
    pub(super) cache_creation_input_tokens: Option<u64>,
    pub(super) cache_read_input_tokens: Option<u64>,
}

impl WireUsage {
    pub(super) fn apply_to(&self, usage: &mut Usage) {
        let fields = [
            (self.input_tokens, &mut usage.input_tokens),
            (self.output_tokens, &mut usage.output_tokens),
            (
                self.cache_creation_input_tokens,
                &mut usage.cache_creation_input_tokens,
            ),
            (
                self.cache_read_input_tokens,
                &mut usage.cache_read_input_tokens,
            ),
        ];
        for (value, slot) in fields {
            if let Some(value) = value {
                *slot = value;
            }
        }
    }
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum WireBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
        #[serde(default)]
        signature: String,
    },
    RedactedThinking {
        data: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default = "empty_object")]
        input: Value,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum WireDelta {
    TextDelta {
        text: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    ThinkingDelta {
        thinking: String,
    },
    SignatureDelta {
        signature: String,
    },
    #[serde(other)]
    Unknown,
}

impl WireDelta {
    pub(super) fn name(&self) -> &'static str {
        match self {
            WireDelta::TextDelta { .. } => "text_delta",
            WireDelta::InputJsonDelta { .. } => "input_json_delta",
            WireDelta::ThinkingDelta { .. } => "thinking_delta",
            WireDelta::SignatureDelta { .. } => "signature_delta",
            WireDelta::Unknown => "unknown",
        }
    }
}

#[derive(Deserialize)]
pub(super) struct WireError {
    #[serde(rename = "type")]
    pub(super) kind: String,
    #[serde(default)]
    pub(super) message: String,
}
