//! The Anthropic Messages API client: builds the request, streams the reply
//! over SSE into an [`Accumulator`], and retries transient failures under a
//! [`RetryPolicy`].

use std::pin::pin;
use std::time::Duration;

use bytes::Bytes;
use eventsource_stream::{EventStreamError, Eventsource};
use futures_util::{Stream, StreamExt};
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde::Serialize;
use tokio::time::timeout;

use super::auth::Credentials;
use super::redact;
use super::retry::{self, Failure, RetryPolicy};
use super::sse::Accumulator;
use super::{LlmError, Message, Provider, Request, Response, StreamEvent, ToolDef};

/// Where requests go unless `ANTHROPIC_BASE_URL` says otherwise.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";

/// The API version ah speaks.
const API_VERSION: &str = "2023-06-01";

/// A [`Provider`] backed by the Anthropic Messages API.
#[derive(Debug, Clone)]
pub struct AnthropicClient {
    http: reqwest::Client,
    /// `{base}/v1/messages`.
    url: String,
    /// Authentication, version and content type, sent with every request.
    headers: HeaderMap,
    retry: RetryPolicy,
}

impl AnthropicClient {
    /// A client for the API at `base_url` (a trailing `/` is ignored).
    pub fn new(
        base_url: &str,
        credentials: &Credentials,
        retry: RetryPolicy,
    ) -> Result<AnthropicClient, LlmError> {
        let mut headers = credentials.headers()?;
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(API_VERSION),
        );
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let http = reqwest::Client::builder()
            .build()
            .map_err(|e| LlmError::Network(format!("cannot set up the HTTP client: {e}")))?;
        Ok(AnthropicClient {
            http,
            url: format!("{}/v1/messages", base_url.trim_end_matches('/')),
            headers,
            retry,
        })
    }

    /// A client configured from the environment: `ANTHROPIC_BASE_URL` (default
    /// [`DEFAULT_BASE_URL`]) and the credentials of [`Credentials::from_env`].
    pub fn from_env(retry: RetryPolicy) -> Result<AnthropicClient, LlmError> {
        let base_url = std::env::var("ANTHROPIC_BASE_URL")
            .ok()
            .filter(|url| !url.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_BASE_URL.to_string());
        AnthropicClient::new(base_url.trim(), &Credentials::from_env()?, retry)
    }

    /// One attempt: send, check the status, stream the reply to the end.
    async fn attempt(
        &self,
        body: Bytes,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<Response, Failure> {
        let idle = self.retry.idle_timeout;
        let send = self
            .http
            .post(&self.url)
            .headers(self.headers.clone())
            .body(body)
            .send();
        let response = match timeout(idle, send).await {
            Err(_) => return Err(retry::idle_failure(idle)),
            Ok(Err(e)) => return Err(retry::classify_transport(&e)),
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if !status.is_success() {
            let retry_after = retry::retry_after(response.headers());
            let text = match timeout(idle, response.text()).await {
                Ok(Ok(text)) => text,
                Ok(Err(_)) | Err(_) => String::new(),
            };
            return Err(retry::classify_status(status.as_u16(), &text, retry_after));
        }

        let mut events = pin!(idle_guarded(response.bytes_stream(), idle).eventsource());
        let mut accumulator = Accumulator::new();
        while let Some(event) = events.next().await {
            match event {
                Ok(event) => accumulator
                    .handle(&event.data, on_event)
                    .map_err(retry::classify_stream)?,
                Err(EventStreamError::Transport(ChunkError::Idle)) => {
                    return Err(retry::idle_failure(idle));
                }
                Err(EventStreamError::Transport(ChunkError::Network(e))) => {
                    return Err(retry::classify_transport(&e));
                }
                Err(EventStreamError::Utf8(e)) => {
                    return Err(Failure::Fatal(LlmError::Protocol(format!(
                        "stream is not UTF-8: {e}"
                    ))));
                }
                Err(EventStreamError::Parser(e)) => {
                    return Err(Failure::Fatal(LlmError::Protocol(format!(
                        "stream is not SSE: {e}"
                    ))));
                }
            }
            if accumulator.is_complete() {
                break;
            }
        }
        accumulator.finish().map_err(retry::classify_stream)
    }
}

/// Retries follow the client's [`RetryPolicy`]. Before each wait,
/// `StreamEvent::Retry { attempt, .. }` names the attempt that just failed
/// (1 for the first); the next attempt streams its deltas from the start.
#[async_trait::async_trait]
impl Provider for AnthropicClient {
    async fn stream(
        &self,
        request: &Request,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<Response, LlmError> {
        let body = request_body(request)?;
        let attempts = self.retry.max_attempts.max(1);
        let mut last = String::new();
        for attempt in 1..=attempts {
            // What the model says leaves here with every secret redacted:
            // the deltas as they stream, the response as a whole.
            let mut text = redact::Stream::default();
            let mut thinking = redact::Stream::default();
            let mut clean = |event: StreamEvent| {
                let event = match event {
                    StreamEvent::TextDelta(piece) => StreamEvent::TextDelta(text.push(&piece)),
                    StreamEvent::ThinkingDelta(piece) => {
                        StreamEvent::ThinkingDelta(thinking.push(&piece))
                    }
                    other => other,
                };
                match &event {
                    StreamEvent::TextDelta(piece) | StreamEvent::ThinkingDelta(piece)
                        if piece.is_empty() => {}
                    _ => on_event(event),
                }
            };
            let attempted = self.attempt(body.clone(), &mut clean).await;
            for (held, event) in [
                (
                    thinking.finish(),
                    StreamEvent::ThinkingDelta as fn(String) -> StreamEvent,
                ),
                (text.finish(), StreamEvent::TextDelta),
            ] {
                if !held.is_empty() {
                    on_event(event(held));
                }
            }
            match attempted {
                Ok(mut response) => {
                    redact_blocks(&mut response.content);
                    return Ok(response);
                }
                Err(Failure::Fatal(err)) => return Err(err),
                Err(Failure::Retryable {
                    reason,
                    retry_after,
                }) => {
                    if attempt < attempts {
                        let delay = self.retry.delay(attempt, retry_after);
                        on_event(StreamEvent::Retry {
                            attempt,
                            delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                            reason: reason.clone(),
                        });
                        tokio::time::sleep(delay).await;
                    }
                    last = reason;
                }
            }
        }
        Err(LlmError::RetriesExhausted { attempts, last })
    }
}

/// Replaces every registered secret in the model's text, thinking and tool
/// inputs.
fn redact_blocks(blocks: &mut [super::Block]) {
    use super::Block;
    for block in blocks {
        match block {
            Block::Text { text } => *text = redact::text(text).into_owned(),
            Block::Thinking { thinking, .. } => *thinking = redact::text(thinking).into_owned(),
            Block::ToolUse { input, .. } => redact::json(input),
            Block::ToolResult { content, .. } => *content = redact::text(content).into_owned(),
            Block::RedactedThinking { .. } => {}
        }
    }
}

/// The JSON body of a streaming Messages request.
#[derive(Serialize)]
struct WireRequest<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "str::is_empty")]
    system: &'a str,
    messages: &'a [Message],
    #[serde(skip_serializing_if = "<[ToolDef]>::is_empty")]
    tools: &'a [ToolDef],
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<Thinking>,
}

#[derive(Serialize)]
struct Thinking {
    #[serde(rename = "type")]
    kind: &'static str,
    budget_tokens: u32,
}

/// Encodes `request` as the API's JSON body: empty `system` and `tools` are
/// left out, `thinking` is present only with a budget.
pub fn request_body(request: &Request) -> Result<Bytes, LlmError> {
    let wire = WireRequest {
        model: &request.model,
        max_tokens: request.max_tokens,
        system: &request.system,
        messages: &request.messages,
        tools: &request.tools,
        stream: true,
        thinking: request.thinking_budget.map(|budget_tokens| Thinking {
            kind: "enabled",
            budget_tokens,
        }),
    };
    serde_json::to_vec(&wire)
        .map(Bytes::from)
        .map_err(|e| LlmError::Protocol(format!("cannot encode the request: {e}")))
}

/// A failure while waiting for the next chunk of the body.
#[derive(Debug, thiserror::Error)]
enum ChunkError {
    #[error("no data before the idle timeout")]
    Idle,
    #[error(transparent)]
    Network(reqwest::Error),
}

/// The body's chunks, failing with [`ChunkError::Idle`] when none arrives for
/// `idle`. Ends after the first error.
fn idle_guarded(
    chunks: impl Stream<Item = reqwest::Result<Bytes>> + Send + 'static,
    idle: Duration,
) -> impl Stream<Item = Result<Bytes, ChunkError>> + Send {
    futures_util::stream::unfold(Some(Box::pin(chunks)), move |state| async move {
        let mut chunks = state?;
        match timeout(idle, chunks.next()).await {
            Ok(Some(Ok(bytes))) => Some((Ok(bytes), Some(chunks))),
            Ok(Some(Err(e))) => Some((Err(ChunkError::Network(e)), None)),
            Ok(None) => None,
            Err(_) => Some((Err(ChunkError::Idle), None)),
        }
    })
}

#[cfg(test)]
mod tests;
