//! When to retry a model call and how long to wait.
//!
//! Every failure of one attempt is classified as [`Failure::Retryable`]
//! (overload, rate limit, server error, broken or idle connection, stream cut
//! short) or [`Failure::Fatal`] (bad request, auth, context overflow). The
//! backoff is exponential with jitter; a server's `retry-after` wins over it.

use std::time::Duration;

use reqwest::header::HeaderMap;
use serde::Deserialize;

use super::LlmError;
use super::sse::StreamError;

/// How hard to try before giving up on a model call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in total, the first one included.
    pub max_attempts: u32,
    /// Delay before the first retry; doubled for each further retry.
    pub base_delay: Duration,
    /// Upper bound of the computed delay (a server's `retry-after` may exceed it).
    pub max_delay: Duration,
    /// An attempt fails when no bytes arrive for this long.
    pub idle_timeout: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 5,
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// The wait before retry number `retry` (1 for the first retry): the
    /// server's `retry_after` if it sent one, else the jittered backoff.
    pub fn delay(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        retry_after.unwrap_or_else(|| self.backoff(retry, rand::random::<f64>()))
    }

    /// Exponential backoff with "equal jitter": with `cap = min(max_delay,
    /// base_delay * 2^(retry-1))` the result lies in `[cap/2, cap]`, placed by
    /// `jitter` in `[0, 1)`.
    pub fn backoff(&self, retry: u32, jitter: f64) -> Duration {
        let exponent = retry.saturating_sub(1).min(31);
        let cap = self
            .base_delay
            .saturating_mul(1u32 << exponent)
            .min(self.max_delay);
        let half = cap / 2;
        half + half.mul_f64(jitter.clamp(0.0, 1.0))
    }
}

/// The outcome of one failed attempt.
#[derive(Debug)]
pub enum Failure {
    /// Worth another attempt; `reason` is shown to the user and kept as the
    /// last error if attempts run out.
    Retryable {
        reason: String,
        retry_after: Option<Duration>,
    },
    /// Retrying cannot help.
    Fatal(LlmError),
}

impl Failure {
    fn retryable(reason: impl Into<String>) -> Failure {
        Failure::Retryable {
            reason: reason.into(),
            retry_after: None,
        }
    }
}

/// HTTP statuses that mean "try again later".
const RETRYABLE_STATUSES: [u16; 6] = [429, 500, 502, 503, 504, 529];

/// Error kinds that, sent mid-stream, mean "try again later".
const RETRYABLE_KINDS: [&str; 6] = [
    "overloaded_error",
    "api_error",
    "rate_limit_error",
    "timeout_error",
    // OpenAI's names.
    "server_error",
    "rate_limit_exceeded",
];

/// Classifies a non-success HTTP response from its status, body and `retry-after`.
pub fn classify_status(status: u16, body: &str, retry_after: Option<Duration>) -> Failure {
    let (kind, message) = api_error_detail(status, body);
    if RETRYABLE_STATUSES.contains(&status) {
        return Failure::Retryable {
            reason: format!("HTTP {status} {kind}: {message}"),
            retry_after,
        };
    }
    Failure::Fatal(fatal_api_error(status, kind, message))
}

/// Classifies a failure of the event stream after a successful response head.
pub fn classify_stream(err: StreamError) -> Failure {
    match err {
        StreamError::Api { kind, message } if RETRYABLE_KINDS.contains(&kind.as_str()) => {
            Failure::retryable(format!("{kind} mid-stream: {message}"))
        }
        StreamError::Api { kind, message } => {
            Failure::Fatal(fatal_api_error(status_of_kind(&kind), kind, message))
        }
        StreamError::Incomplete => Failure::retryable(StreamError::Incomplete.to_string()),
        StreamError::Protocol(msg) => Failure::Fatal(LlmError::Protocol(msg)),
    }
}

/// Classifies a transport error from sending the request or reading the body.
pub fn classify_transport(err: &reqwest::Error) -> Failure {
    if err.is_builder() {
        return Failure::Fatal(LlmError::Network(format!(
            "cannot build the request ({err}); check the provider's base URL \
             (ANTHROPIC_BASE_URL, OPENAI_BASE_URL or AH_<PROVIDER>_BASE_URL)"
        )));
    }
    Failure::retryable(format!("connection error: {}", error_chain(err)))
}

/// The failure for an attempt during which no bytes arrived for `idle`.
pub fn idle_failure(idle: Duration) -> Failure {
    Failure::retryable(format!("no data from the API for {} s", idle.as_secs_f64()))
}

/// The server's requested wait: `retry-after-ms` (milliseconds) if present,
/// else `retry-after` (seconds). HTTP dates and garbage are ignored.
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    parse_retry_after(get("retry-after-ms"), get("retry-after"))
}

fn parse_retry_after(millis: Option<&str>, secs: Option<&str>) -> Option<Duration> {
    let parse = |text: Option<&str>, scale: f64| {
        let value: f64 = text?.trim().parse().ok()?;
        Duration::try_from_secs_f64(value * scale).ok()
    };
    parse(millis, 0.001).or_else(|| parse(secs, 1.0))
}

/// What a request too long for the model's window says: Anthropic's
/// messages, OpenAI's (and vLLM's) "maximum context length", and the
/// `context_length_exceeded` code OpenAI puts in its error body.
const OVERFLOW_SIGNS: [&str; 4] = [
    "prompt is too long",
    "exceed context limit",
    "maximum context length",
    "context_length_exceeded",
];

fn fatal_api_error(status: u16, kind: String, message: String) -> LlmError {
    let lower = format!("{kind} {message}").to_lowercase();
    if matches!(status, 400 | 413) && OVERFLOW_SIGNS.iter().any(|sign| lower.contains(sign)) {
        return LlmError::ContextOverflow(message);
    }
    LlmError::Api {
        status,
        kind,
        message,
    }
}

/// Error type and message from an API error body: Anthropic's
/// `{"type":"error","error":{"type":…,"message":…}}`, OpenAI's
/// `{"error":{"message":…,"type":…,"code":…}}` (a `context_length_exceeded`
/// code wins over the type), or vLLM's flat `{"message":…,"type":…}`. A body
/// in another shape is quoted as the message.
fn api_error_detail(status: u16, body: &str) -> (String, String) {
    #[derive(Deserialize)]
    struct Body {
        error: Option<Detail>,
        #[serde(flatten)]
        flat: Detail,
    }
    #[derive(Deserialize)]
    struct Detail {
        #[serde(rename = "type")]
        kind: Option<String>,
        message: Option<String>,
        code: Option<serde_json::Value>,
    }
    if let Ok(body) = serde_json::from_str::<Body>(body) {
        let detail = body.error.unwrap_or(body.flat);
        if let Some(message) = detail.message {
            let code = detail.code.as_ref().and_then(|c| c.as_str());
            let kind = match (code, detail.kind) {
                (Some(code @ "context_length_exceeded"), _) => code.to_string(),
                (_, Some(kind)) if !kind.is_empty() => kind,
                (Some(code), _) => code.to_string(),
                _ => "error".to_string(),
            };
            return (kind, message);
        }
    }
    let text = body.trim();
    let message = if text.is_empty() {
        reqwest::StatusCode::from_u16(status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("no error message")
            .to_string()
    } else {
        text.chars().take(500).collect()
    };
    ("http_error".to_string(), message)
}

/// The HTTP status the API documents for an error kind, for errors that arrive
/// inside a 200 stream.
fn status_of_kind(kind: &str) -> u16 {
    match kind {
        "invalid_request_error" => 400,
        "authentication_error" => 401,
        "permission_error" => 403,
        "not_found_error" => 404,
        "request_too_large" => 413,
        _ => 500,
    }
}

/// An error with its sources, e.g. "error sending request: connection refused".
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests;
