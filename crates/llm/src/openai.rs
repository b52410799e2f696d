//! The OpenAI Chat Completions client, for OpenAI itself and the servers
//! that speak its API (Ollama, LM Studio, vLLM, OpenRouter): converts ah's
//! messages ([`request`]), streams the reply into a [`stream::Assembler`];
//! transport and retries are [`Endpoint`]'s, as for Anthropic.

pub mod request;
pub mod stream;

use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};

use super::providers::OutputLimitField;
use super::retry::RetryPolicy;
use super::transport::Endpoint;
use super::{LlmError, Provider, Request, Response, StreamEvent};

/// A [`Provider`] backed by an OpenAI-compatible Chat Completions API.
#[derive(Debug, Clone)]
pub struct OpenAiClient {
    /// `{base}/chat/completions` with the key (if any) and content type.
    endpoint: Endpoint,
    output_limit_field: OutputLimitField,
    retry: RetryPolicy,
    /// Whether replies go through the stream sanitizer.
    sanitize: bool,
}

impl OpenAiClient {
    /// A client for the API at `base_url` (up to `/chat/completions`; a
    /// trailing `/` is ignored), sending `key` as a bearer token when given.
    pub fn new(
        base_url: &str,
        key: Option<&str>,
        output_limit_field: OutputLimitField,
        retry: RetryPolicy,
    ) -> Result<OpenAiClient, LlmError> {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Some(key) = key {
            let mut value = HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| {
                LlmError::BadCredentials(
                    "the API key contains characters not allowed in an HTTP header; check the \
                     provider's key variable"
                        .to_string(),
                )
            })?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        let url = format!("{}/chat/completions", base_url.trim_end_matches('/'));
        Ok(OpenAiClient {
            endpoint: Endpoint::new(url, headers)?,
            output_limit_field,
            retry,
            sanitize: false,
        })
    }

    /// Passes the replies' text through the stream sanitizer
    /// ([`super::sanitize`]) when `sanitize` is set.
    pub fn sanitized(mut self, sanitize: bool) -> OpenAiClient {
        self.sanitize = sanitize;
        self
    }
}

#[async_trait::async_trait]
impl Provider for OpenAiClient {
    async fn stream(
        &self,
        request: &Request,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<Response, LlmError> {
        let body = request::body(request, self.output_limit_field)?;
        let new_assembler = if self.sanitize {
            stream::Assembler::sanitized
        } else {
            stream::Assembler::new
        };
        self.endpoint
            .stream(body, &self.retry, new_assembler, on_event)
            .await
    }
}

#[cfg(test)]
mod tests;
