//! The Anthropic Messages API client: builds the request and streams the
//! reply over SSE into an [`Accumulator`]; transport and retries are
//! [`Endpoint`]'s.

use bytes::Bytes;
use reqwest::header::{CONTENT_TYPE, HeaderName, HeaderValue};
use serde::Serialize;

use super::auth::Credentials;
use super::crossing;
use super::retry::RetryPolicy;
use super::sse::Accumulator;
use super::transport::Endpoint;
use super::{LlmError, Message, Provider, Request, Response, StreamEvent, ToolDef};

/// Where requests go unless the environment says otherwise.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";

/// The API version ah speaks.
const API_VERSION: &str = "2023-06-01";

/// A [`Provider`] backed by the Anthropic Messages API.
#[derive(Debug, Clone)]
pub struct AnthropicClient {
    /// `{base}/v1/messages` with authentication, version and content type.
    endpoint: Endpoint,
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
        let url = format!("{}/v1/messages", base_url.trim_end_matches('/'));
        Ok(AnthropicClient {
            endpoint: Endpoint::new(url, headers)?,
            retry,
        })
    }
}

/// Retries follow the client's [`RetryPolicy`] (see [`Endpoint::stream`]).
#[async_trait::async_trait]
impl Provider for AnthropicClient {
    async fn stream(
        &self,
        request: &Request,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<Response, LlmError> {
        let body = request_body(request)?;
        self.endpoint
            .stream(body, &self.retry, Accumulator::new, on_event)
            .await
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
/// left out, `thinking` is present only with a budget; what came from
/// another provider is converted by [`crossing::for_anthropic`].
pub fn request_body(request: &Request) -> Result<Bytes, LlmError> {
    let messages = crossing::for_anthropic(&request.messages);
    let wire = WireRequest {
        model: &request.model,
        max_tokens: request.max_tokens,
        system: &request.system,
        messages: &messages,
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

#[cfg(test)]
mod tests;
