//! Compaction: when a conversation comes within a reserve of the model's
//! context window, or the API refuses a request as too long, the older part
//! is summarised by the model and later requests carry the summary and the
//! most recent messages instead. The session keeps every message; the
//! summary is one more message (see `view` for its shape and for how
//! requests are computed from the stored path). Near the window, requests
//! ask for less output rather than compacting early (see `budget`).

mod budget;
mod transcript;
mod view;

use ah_llm::{Block, LlmError, Message, Provider, Request, Response, Role, StreamEvent};
use ah_session::{BlockRecord, MessageMeta, Session, StoredMessage};

use super::{AgentConfig, AgentError, Emitter, Event, close_interrupted, record_event};
use crate::event::CompactReason;

/// Tokens kept free below the context window by default (`--compact-reserve`).
pub const DEFAULT_RESERVE: u64 = 16_384;

/// The kept part holds at most this many assistant messages (exchanges)…
const KEEP_TURNS: usize = 2;
/// …and at most this many tokens (estimated), but always the last exchange.
const KEEP_TOKENS: u64 = 20_000;
/// Longest summary asked for.
const SUMMARY_MAX_TOKENS: u32 = 8_192;
/// Tokens left unused in the summary request, for what the estimate misses.
const SUMMARY_MARGIN_TOKENS: u64 = 4_096;
/// Characters per token assumed when fitting the transcript: fewer than the
/// usual four, since code and JSON take more tokens per character.
const TRANSCRIPT_CHARS_PER_TOKEN: u64 = 3;

/// Opens the stored summary, so the model knows what it is reading.
const SUMMARY_INTRO: &str = "[ah: the conversation before this point was compacted to fit the \
context window. This summary replaces it; the messages after it are the most recent ones, as they \
were.]";
/// Introduces the user's request when the cut fell inside its turn.
const REQUEST_INTRO: &str = "The user's latest request, as they wrote it:";
/// Ends the summary request, after the transcript.
const ASK: &str = "Write the summary of the conversation above now, in the sections the \
instructions give.";

/// What a compaction did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compaction {
    /// The stored summary message, the new head.
    pub message_id: String,
    /// The size of the next request before the compaction, estimated.
    pub tokens_before: u64,
    /// The size of the next request after it, estimated the same way.
    pub tokens_after: u64,
    pub summary_chars: usize,
    /// Messages sent verbatim after the summary.
    pub kept_messages: usize,
}

/// The messages of the stored path from the root to the head that requests
/// carry: after a compaction, its summary and what it kept.
pub(super) fn request_view(path: &[StoredMessage]) -> Vec<&StoredMessage> {
    view::view(path).messages
}

/// The `max_tokens` for the next request along `path` (see `budget`).
pub(super) fn max_tokens_for(config: &AgentConfig, path: &[StoredMessage]) -> u32 {
    budget::max_tokens(config, size(config, path))
}

/// One model call with compaction around it: first when the conversation
/// up to `head` is within the reserve of the window (or too close to it for
/// the least output a request asks for), then once more, with
/// one retry of the call, when the API says it overflowed. `head` moves to
/// the summary when one is stored. The stored path is read once per call.
pub(super) async fn call_model(
    config: &AgentConfig,
    provider: &dyn Provider,
    session: &mut Session,
    head: &mut String,
    turn: u32,
    out: &mut Emitter<'_>,
) -> Result<(Response, u64), AgentError> {
    let mut path = session.path_to(head)?;
    let tokens = size(config, &path);
    if tokens > budget::compact_above(config)
        && let Some(done) = compact(
            config,
            provider,
            session,
            &mut path,
            CompactReason::Threshold,
            tokens,
            out,
        )
        .await?
    {
        *head = done.message_id;
    }
    match super::stream_call(config, provider, session, &path, turn, out).await {
        Err(AgentError::Llm(LlmError::ContextOverflow(message))) => {
            // Without a count in the error, the estimate is the best size known.
            let tokens = overflow_tokens(&message).unwrap_or_else(|| size(config, &path));
            let reason = CompactReason::Overflow;
            match compact(config, provider, session, &mut path, reason, tokens, out).await? {
                Some(done) => {
                    *head = done.message_id;
                    super::stream_call(config, provider, session, &path, turn, out).await
                }
                None => Err(LlmError::ContextOverflow(message).into()),
            }
        }
        result => result,
    }
}

/// `ah compact`: summarises the session's conversation up to its head now.
/// `None` when it is too short to compact.
pub async fn compact_session(
    config: &AgentConfig,
    provider: &dyn Provider,
    session: &mut Session,
    on_event: &mut (dyn FnMut(&Event) + Send),
) -> Result<Option<Compaction>, AgentError> {
    // A summary placed after an unanswered tool call would split the call
    // from its result.
    close_interrupted(session)?;
    let Some(head) = session.head()? else {
        return Ok(None);
    };
    let mut path = session.path_to(&head)?;
    let tokens = size(config, &path);
    let mut out = Emitter::new(on_event);
    compact(
        config,
        provider,
        session,
        &mut path,
        CompactReason::Manual,
        tokens,
        &mut out,
    )
    .await
}

/// Summarises the conversation along `path` (root to head) before its cut
/// point, stores the summary under the head and appends it to `path`.
/// `None` (and no events) when nothing would be summarised.
async fn compact(
    config: &AgentConfig,
    provider: &dyn Provider,
    session: &mut Session,
    path: &mut Vec<StoredMessage>,
    reason: CompactReason,
    tokens: u64,
    out: &mut Emitter<'_>,
) -> Result<Option<Compaction>, AgentError> {
    let view = view::view(path);
    let estimate_before = estimate(config, path);
    let (Some(cut), Some(head)) = (
        view::cut_point(&view.messages, KEEP_TURNS, KEEP_TOKENS),
        path.last().map(|message| message.id.clone()),
    ) else {
        return Ok(None);
    };
    let head = head.as_str();
    out.emit(
        session,
        Some(head),
        Event::CompactionStart { reason, tokens },
    );
    let request = summary_request(config, &view.messages[..cut]);
    let started = std::time::Instant::now();
    let mut retries = Vec::new();
    let result = provider
        .stream(&request, &mut |event| {
            // The summary's text is not shown as if the model said it.
            if let StreamEvent::Retry {
                attempt,
                delay_ms,
                reason,
            } = event
            {
                let event = Event::Retry {
                    attempt,
                    delay_ms,
                    reason,
                };
                out.live(&event);
                retries.push(event);
            }
        })
        .await;
    for event in retries {
        record_event(session, Some(head), &event);
    }
    let response = result?;
    let summary = response_text(&response);
    if summary.is_empty() {
        return Err(AgentError::Compaction(format!(
            "the model answered the summary request with no text (stop reason {}); \
             try `ah compact` again, or start a new session with -n",
            response.stop_reason.as_deref().unwrap_or("none")
        )));
    }
    let mut text = format!("{SUMMARY_INTRO}\n\n{summary}");
    let request = view::split_request(&view.messages, cut);
    if let Some(request) = &request {
        text.push_str(&format!("\n\n{REQUEST_INTRO}\n\n{request}"));
    }
    let kept_from = view.messages[cut].id.clone();
    let kept_messages = view.messages.len() - cut;
    let record = BlockRecord {
        details: Some(view::marker_details(&kept_from, tokens, request.as_deref())),
        ..BlockRecord::from(Block::Text { text })
    };
    // The usage is what producing the summary cost; the conversation's size
    // is only read from assistant messages.
    let meta = MessageMeta {
        usage: Some(response.usage),
        stop_reason: response.stop_reason.clone(),
        model: Some(response.model.clone()),
        api_latency_ms: Some(started.elapsed().as_millis() as u64),
    };
    let stored = session.append(Some(head), Role::User, &[record], &meta)?;
    let summary_chars = summary.chars().count();
    out.emit(
        session,
        Some(&stored.id),
        Event::CompactionEnd {
            summary_chars,
            kept_messages,
            usage: response.usage,
        },
    );
    let message_id = stored.id.clone();
    path.push(stored);
    Ok(Some(Compaction {
        message_id,
        tokens_before: estimate_before,
        tokens_after: estimate(config, path),
        summary_chars,
        kept_messages,
    }))
}

/// The request for a summary of `messages`: the compaction prompt as the
/// system prompt, the transcript as the one user message, no tools.
fn summary_request(config: &AgentConfig, messages: &[&StoredMessage]) -> Request {
    let max_tokens = SUMMARY_MAX_TOKENS.min(config.model.max_output_tokens);
    let fixed = (config.compact_prompt.len() + ASK.len()).div_ceil(4) as u64;
    let room = config
        .model
        .context_window
        .saturating_sub(u64::from(max_tokens) + fixed + SUMMARY_MARGIN_TOKENS);
    let budget =
        usize::try_from(room.saturating_mul(TRANSCRIPT_CHARS_PER_TOKEN)).unwrap_or(usize::MAX);
    let transcript = transcript::transcript(messages, budget);
    Request {
        model: config.model.id.clone(),
        system: config.compact_prompt.clone(),
        messages: vec![Message::user_text(format!("{transcript}\n\n{ASK}"))],
        tools: Vec::new(),
        max_tokens,
        thinking_budget: None,
    }
}

/// The size of the next request for this path, in tokens: from what the
/// API last reported when it can, else estimated.
fn size(config: &AgentConfig, path: &[StoredMessage]) -> u64 {
    view::context_tokens(&view::view(path), overhead_chars(config))
}

/// The size of the next request for this path, always estimated, so that
/// two paths are measured alike (before and after a compaction).
fn estimate(config: &AgentConfig, path: &[StoredMessage]) -> u64 {
    view::request_estimate(&view::view(path), overhead_chars(config))
}

/// The characters every request carries besides the messages: the system
/// prompt and the tools.
fn overhead_chars(config: &AgentConfig) -> usize {
    let tools: usize = config
        .tools
        .iter()
        .map(|tool| tool.name.len() + tool.description.len() + tool.input_schema.to_string().len())
        .sum();
    config.system.len() + tools
}

/// The response's text blocks, joined and trimmed.
fn response_text(response: &Response) -> String {
    let parts: Vec<&str> = response
        .content
        .iter()
        .filter_map(|block| match block {
            Block::Text { text } => Some(text.trim()),
            _ => None,
        })
        .filter(|text| !text.is_empty())
        .collect();
    parts.join("\n\n")
}

/// The prompt size an overflow error names: "prompt is too long: 210000
/// tokens > 200000 maximum" gives 210000, "input length and `max_tokens`
/// exceed context limit: 178959 + 64000 > 200000, …" gives 178959.
fn overflow_tokens(message: &str) -> Option<u64> {
    let (_, rest) = message
        .split_once("too long:")
        .or_else(|| message.split_once("context limit:"))?;
    rest.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_overflowing_size_is_read_from_the_error() {
        assert_eq!(
            overflow_tokens("prompt is too long: 210000 tokens > 200000 maximum"),
            Some(210_000)
        );
        assert_eq!(
            overflow_tokens(
                "input length and `max_tokens` exceed context limit: 178959 + 64000 > 200000, \
                 decrease input length or `max_tokens` and try again"
            ),
            Some(178_959)
        );
        assert_eq!(
            overflow_tokens("input length and max_tokens exceed context limit"),
            None
        );
    }
}
