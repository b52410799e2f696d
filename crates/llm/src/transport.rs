//! The HTTP side shared by every provider: POST a JSON body, check the
//! status, read the reply as server-sent events into a [`StreamAssembler`],
//! fail an attempt that goes idle, and retry transient failures under a
//! [`RetryPolicy`]. The providers only differ in their body and their stream
//! format.

use std::pin::pin;
use std::time::Duration;

use bytes::Bytes;
use eventsource_stream::{EventStreamError, Eventsource};
use futures_util::{Stream, StreamExt};
use reqwest::header::HeaderMap;
use tokio::time::timeout;

use super::retry::{self, Failure, RetryPolicy};
use super::sse::StreamError;
use super::{LlmError, Response, StreamEvent};
use ah_base::redact;

/// Builds one [`Response`] from the `data` of a provider's stream events.
pub trait StreamAssembler {
    /// Handles the `data` of one event, reporting live progress.
    fn handle(
        &mut self,
        data: &str,
        on_event: &mut dyn FnMut(StreamEvent),
    ) -> Result<(), StreamError>;
    /// Whether the stream said it is over (nothing more needs reading).
    fn is_complete(&self) -> bool;
    /// The assembled response once the body has ended.
    fn finish(self) -> Result<Response, StreamError>;
}

/// Where one provider's requests go: URL and the headers of every request.
#[derive(Debug, Clone)]
pub struct Endpoint {
    http: reqwest::Client,
    url: String,
    headers: HeaderMap,
}

impl Endpoint {
    /// An endpoint posting to `url` with `headers` (authentication, content
    /// type, versions).
    pub fn new(url: String, headers: HeaderMap) -> Result<Endpoint, LlmError> {
        let http = reqwest::Client::builder()
            .build()
            .map_err(|e| LlmError::Network(format!("cannot set up the HTTP client: {e}")))?;
        Ok(Endpoint { http, url, headers })
    }

    /// Sends `body` until one attempt streams a whole response or the policy
    /// gives up. Before each wait, `StreamEvent::Retry { attempt, .. }` names
    /// the attempt that just failed (1 for the first); the next attempt
    /// streams its deltas from the start.
    pub async fn stream<A: StreamAssembler>(
        &self,
        body: Bytes,
        policy: &RetryPolicy,
        new_assembler: impl Fn() -> A,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<Response, LlmError> {
        let attempts = policy.max_attempts.max(1);
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
            let attempted = self
                .attempt(
                    body.clone(),
                    policy.idle_timeout,
                    new_assembler(),
                    &mut clean,
                )
                .await;
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
                        let delay = policy.delay(attempt, retry_after);
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

    /// One attempt: send, check the status, stream the reply to the end.
    async fn attempt<A: StreamAssembler>(
        &self,
        body: Bytes,
        idle: Duration,
        mut assembler: A,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<Response, Failure> {
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
        while let Some(event) = events.next().await {
            match event {
                Ok(event) => assembler
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
            if assembler.is_complete() {
                break;
            }
        }
        assembler.finish().map_err(retry::classify_stream)
    }
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

/// Replaces every registered secret in the model's text, thinking, tool
/// inputs and tool results.
fn redact_blocks(blocks: &mut [crate::Block]) {
    use crate::Block;
    for block in blocks {
        match block {
            Block::Text { text } => *text = redact::text(text).into_owned(),
            Block::Thinking { thinking, .. } => *thinking = redact::text(thinking).into_owned(),
            Block::ToolUse { input, .. } => redact::json(input),
            Block::ToolResult { content, .. } => *content = redact::text(content).into_owned(),
            Block::RedactedThinking { .. } | Block::Image { .. } => {}
        }
    }
}
