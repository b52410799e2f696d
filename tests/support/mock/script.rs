//! The mock's script: what a test says the model answers ([`Reply`]) and how
//! each answer is delivered ([`Turn`]).

use std::time::Duration;

use serde_json::{Value, json};

/// The content of one assistant message, built block by block.
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    pub(super) blocks: Vec<Block>,
    stop_reason: Option<String>,
    pub(super) input_tokens: u64,
    pub(super) output_tokens: u64,
    pub(super) cache_creation_input_tokens: u64,
    pub(super) cache_read_input_tokens: u64,
}

#[derive(Debug, Clone)]
pub(super) enum Block {
    Text(String),
    Thinking {
        thinking: String,
        signature: String,
    },
    RedactedThinking(String),
    ToolUse {
        id: String,
        name: String,
        input: Value,
        /// Send only this many characters of the input JSON, as when the
        /// output limit cuts a call off.
        cut_at: Option<usize>,
    },
}

impl Default for Reply {
    fn default() -> Self {
        Reply::new()
    }
}

impl Reply {
    /// An empty reply with plausible usage (120 input, 30 output tokens).
    pub(crate) fn new() -> Reply {
        Reply {
            blocks: Vec::new(),
            stop_reason: None,
            input_tokens: 120,
            output_tokens: 30,
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: 0,
        }
    }

    /// Appends a `text` block.
    pub(crate) fn text(mut self, text: impl Into<String>) -> Reply {
        self.blocks.push(Block::Text(text.into()));
        self
    }

    /// Appends a `thinking` block: its text, then its signature.
    pub(crate) fn thinking(
        mut self,
        thinking: impl Into<String>,
        signature: impl Into<String>,
    ) -> Reply {
        self.blocks.push(Block::Thinking {
            thinking: thinking.into(),
            signature: signature.into(),
        });
        self
    }

    /// Appends a `redacted_thinking` block carrying opaque `data`.
    pub(crate) fn redacted_thinking(mut self, data: impl Into<String>) -> Reply {
        self.blocks.push(Block::RedactedThinking(data.into()));
        self
    }

    /// Appends a `tool_use` block. Unless [`Reply::stop_reason`] says
    /// otherwise, a reply with a tool use stops with `tool_use`.
    pub(crate) fn tool_use(
        mut self,
        id: impl Into<String>,
        name: impl Into<String>,
        input: Value,
    ) -> Reply {
        self.blocks.push(Block::ToolUse {
            id: id.into(),
            name: name.into(),
            input,
            cut_at: None,
        });
        self
    }

    /// Appends a `tool_use` block whose input JSON stops after `chars`
    /// characters and ends the reply with `max_tokens`, as the API does when
    /// the output limit is reached mid-call.
    pub(crate) fn tool_use_cut_off(
        mut self,
        id: impl Into<String>,
        name: impl Into<String>,
        input: Value,
        chars: usize,
    ) -> Reply {
        self.blocks.push(Block::ToolUse {
            id: id.into(),
            name: name.into(),
            input,
            cut_at: Some(chars),
        });
        self.stop_reason = Some("max_tokens".into());
        self
    }

    /// Overrides the stop reason (`max_tokens`, `refusal`, `pause_turn`, …).
    pub(crate) fn stop_reason(mut self, reason: impl Into<String>) -> Reply {
        self.stop_reason = Some(reason.into());
        self
    }

    /// Sets the token usage the reply reports.
    pub(crate) fn usage(mut self, input_tokens: u64, output_tokens: u64) -> Reply {
        self.input_tokens = input_tokens;
        self.output_tokens = output_tokens;
        self
    }

    /// Sets the prompt-cache token counts reported in `message_start`.
    pub(crate) fn cache_usage(mut self, creation_tokens: u64, read_tokens: u64) -> Reply {
        self.cache_creation_input_tokens = creation_tokens;
        self.cache_read_input_tokens = read_tokens;
        self
    }

    /// The given stop reason, else `tool_use` if a tool is used, else `end_turn`.
    pub(super) fn effective_stop_reason(&self) -> String {
        match &self.stop_reason {
            Some(reason) => reason.clone(),
            None if self
                .blocks
                .iter()
                .any(|b| matches!(b, Block::ToolUse { .. })) =>
            {
                "tool_use".to_string()
            }
            None => "end_turn".to_string(),
        }
    }
}

/// How one request is answered.
///
/// A streamed reply is these events, in order (count them for `cut`, `stall`
/// and `stream_error`): `message_start`, `ping`; per block
/// `content_block_start`, `ping`, its deltas (none for redacted thinking),
/// `content_block_stop`; then `message_delta`, `message_stop`. On the OpenAI
/// route: a role chunk; a chunk per text or reasoning piece; per tool call a
/// chunk with its id and name, then one per arguments piece; the finish
/// chunk, the usage chunk, `[DONE]`.
#[derive(Debug, Clone)]
pub(crate) struct Turn {
    pub(super) kind: TurnKind,
    /// Bytes of SSE body per HTTP chunk; `None` writes one chunk per event.
    pub(super) chunk_size: Option<usize>,
    /// Pause between consecutive body chunks.
    pub(super) delay: Duration,
    /// Fixed delta piece length in characters; `None` cycles 3 to 7.
    pub(super) piece_size: Option<usize>,
}

#[derive(Debug, Clone)]
pub(super) enum TurnKind {
    Stream {
        reply: Reply,
        end: StreamEnd,
    },
    HttpError {
        status: u16,
        error: ApiError,
        retry_after: Option<u64>,
    },
}

/// How a streamed reply ends.
#[derive(Debug, Clone)]
pub(super) enum StreamEnd {
    /// Every event through `message_stop`, then the body ends cleanly.
    Complete,
    /// `after` events, then the connection is closed mid-body.
    Cut { after: usize },
    /// `after` events, silence for `pause`, then the rest of the stream.
    Stall { after: usize, pause: Duration },
    /// `after` events, then an `error` event, then the body ends cleanly.
    Error { after: usize, error: ApiError },
}

/// The `error` object of an API error body.
#[derive(Debug, Clone)]
pub(super) struct ApiError {
    pub(super) kind: String,
    pub(super) message: String,
}

/// Which API a request came in on, and so how it is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Wire {
    /// `POST /v1/messages`.
    Anthropic,
    /// `POST /v1/chat/completions`.
    OpenAi,
}

impl ApiError {
    /// Anthropic: `{"type":"error","error":{"type":…,"message":…}}`;
    /// OpenAI: `{"error":{"message":…,"type":…,"param":null,"code":null}}`.
    pub(super) fn body(&self, wire: Wire) -> Value {
        match wire {
            Wire::Anthropic => {
                json!({"type": "error", "error": {"type": self.kind, "message": self.message}})
            }
            Wire::OpenAi => json!({"error": {
                "message": self.message, "type": self.kind, "param": null, "code": null
            }}),
        }
    }
}

impl Turn {
    fn new(kind: TurnKind) -> Turn {
        Turn {
            kind,
            chunk_size: None,
            delay: Duration::ZERO,
            piece_size: None,
        }
    }

    fn stream(reply: Reply, end: StreamEnd) -> Turn {
        Turn::new(TurnKind::Stream { reply, end })
    }

    /// Streams `reply` completely.
    pub(crate) fn reply(reply: Reply) -> Turn {
        Turn::stream(reply, StreamEnd::Complete)
    }

    /// Answers with HTTP `status` and the API error body of type `kind`.
    pub(crate) fn error(status: u16, kind: &str, message: &str) -> Turn {
        Turn::new(TurnKind::HttpError {
            status,
            error: ApiError {
                kind: kind.to_string(),
                message: message.to_string(),
            },
            retry_after: None,
        })
    }

    /// Streams the first `after_events` events of `reply` (pings count), then
    /// closes the connection without finishing the HTTP body.
    pub(crate) fn cut(reply: Reply, after_events: usize) -> Turn {
        Turn::stream(
            reply,
            StreamEnd::Cut {
                after: after_events,
            },
        )
    }

    /// Streams the first `after_events` events of `reply`, sends nothing for
    /// `pause`, then streams the rest (if the client is still listening).
    pub(crate) fn stall(reply: Reply, after_events: usize, pause: Duration) -> Turn {
        Turn::stream(
            reply,
            StreamEnd::Stall {
                after: after_events,
                pause,
            },
        )
    }

    /// Streams the first `after_events` events of `reply`, then an
    /// `event: error` of type `kind`, then ends the body.
    pub(crate) fn stream_error(
        reply: Reply,
        after_events: usize,
        kind: &str,
        message: &str,
    ) -> Turn {
        let error = ApiError {
            kind: kind.to_string(),
            message: message.to_string(),
        };
        Turn::stream(
            reply,
            StreamEnd::Error {
                after: after_events,
                error,
            },
        )
    }

    /// Adds a `retry-after: <seconds>` header to a [`Turn::error`].
    ///
    /// # Panics
    /// On a streaming turn, where the header would mean nothing.
    pub(crate) fn retry_after(mut self, seconds: u64) -> Turn {
        match &mut self.kind {
            TurnKind::HttpError { retry_after, .. } => *retry_after = Some(seconds),
            TurnKind::Stream { .. } => panic!("retry_after only applies to Turn::error"),
        }
        self
    }

    /// Writes the body in HTTP chunks of at most `bytes` bytes.
    ///
    /// # Panics
    /// If `bytes` is 0.
    pub(crate) fn chunk_size(mut self, bytes: usize) -> Turn {
        assert!(bytes > 0, "chunk_size must be at least 1 byte");
        self.chunk_size = Some(bytes);
        self
    }

    /// Waits `ms` milliseconds between body chunks.
    pub(crate) fn delay_ms(mut self, ms: u64) -> Turn {
        self.delay = Duration::from_millis(ms);
        self
    }

    /// Splits every text, thinking and tool-input delta into pieces of
    /// exactly `chars` characters (the last may be shorter) instead of the
    /// default 3, 4, 5, 6, 7 cycle.
    ///
    /// # Panics
    /// If `chars` is 0.
    pub(crate) fn piece_size(mut self, chars: usize) -> Turn {
        assert!(chars > 0, "piece_size must be at least 1 character");
        self.piece_size = Some(chars);
        self
    }
}
