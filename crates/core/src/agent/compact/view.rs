//! What a request carries once a conversation was compacted, computed from
//! the stored path alone: the latest compaction message on the path stands
//! in for everything before its kept point. Also where the next compaction
//! may cut, and how big a conversation is.
//!
//! A compaction message is a user message whose text block carries
//! `{"compaction": {"kept_from": <message id>, "tokens_before": N}}` in its
//! details, plus `"request": <text>` when it quotes the user's request (the
//! cut fell inside the request's turn). It is appended at the end of the
//! path (the tree keeps every message), and requests send it first, then the
//! messages from `kept_from` on, leaving out older compaction messages.

use serde_json::{Value, json};

use ah_llm::{Block, Role};
use ah_session::StoredMessage;

/// The key in a block's details that marks a compaction message.
const MARKER_KEY: &str = "compaction";

/// The details of a compaction message's summary block; `request` is the
/// user's request when the summary quotes it.
pub(super) fn marker_details(kept_from: &str, tokens_before: u64, request: Option<&str>) -> Value {
    let mut marker = json!({ "kept_from": kept_from, "tokens_before": tokens_before });
    if let Some(request) = request {
        marker["request"] = json!(request);
    }
    json!({ MARKER_KEY: marker })
}

/// For a compaction message: the value of `field` in its marker.
fn marker_field<'a>(message: &'a StoredMessage, field: &str) -> Option<&'a str> {
    if message.role != Role::User {
        return None;
    }
    message.blocks.iter().find_map(|block| {
        block
            .details
            .as_ref()?
            .get(MARKER_KEY)?
            .get(field)?
            .as_str()
    })
}

/// For a compaction message: the id of the first message it keeps.
pub(super) fn kept_from(message: &StoredMessage) -> Option<&str> {
    marker_field(message, "kept_from")
}

/// The conversation as requests see it.
#[derive(Debug)]
pub(super) struct View<'a> {
    /// The latest summary (if any) first, then the kept and newer messages,
    /// in order.
    pub messages: Vec<&'a StoredMessage>,
    /// Messages from this position on came after the latest compaction, so
    /// their reported usage measures the compacted conversation.
    pub fresh_from: usize,
}

/// The view of a root-to-head path.
pub(super) fn view(path: &[StoredMessage]) -> View<'_> {
    let latest = path
        .iter()
        .enumerate()
        .rev()
        .find_map(|(at, message)| kept_from(message).map(|kept| (at, kept)));
    let Some((at, kept)) = latest else {
        return View {
            messages: path.iter().collect(),
            fresh_from: 0,
        };
    };
    // A kept point that is not an ancestor (a damaged file) keeps nothing
    // from before the summary rather than everything.
    let start = path[..at]
        .iter()
        .position(|message| message.id == kept)
        .unwrap_or(at);
    let ordinary = |message: &&StoredMessage| kept_from(message).is_none();
    let kept: Vec<&StoredMessage> = path[start..at].iter().filter(ordinary).collect();
    let mut messages = vec![&path[at]];
    let fresh_from = 1 + kept.len();
    messages.extend(kept);
    messages.extend(path[at + 1..].iter().filter(ordinary));
    View {
        messages,
        fresh_from,
    }
}

/// The size of the request for this view, in tokens: the input and output
/// the API last reported after the latest compaction, plus an estimate of
/// what came after that message; without such a report, an estimate of the
/// whole request (`overhead_chars` counts the system prompt and tools).
pub(super) fn context_tokens(view: &View<'_>, overhead_chars: usize) -> u64 {
    let fresh = &view.messages[view.fresh_from.min(view.messages.len())..];
    let reported = fresh.iter().enumerate().rev().find_map(|(at, message)| {
        let usage = message
            .meta
            .usage
            .filter(|_| message.role == Role::Assistant)?;
        Some((at, usage))
    });
    match reported {
        Some((at, usage)) => {
            usage.input_tokens
                + usage.cache_creation_input_tokens
                + usage.cache_read_input_tokens
                + usage.output_tokens
                + estimate_tokens(&fresh[at + 1..])
        }
        None => request_estimate(view, overhead_chars),
    }
}

/// An estimate of the whole request for this view, whatever the API
/// reported: the same measure for any two views, so they can be compared.
pub(super) fn request_estimate(view: &View<'_>, overhead_chars: usize) -> u64 {
    estimate_tokens(&view.messages) + chars_to_tokens(overhead_chars)
}

/// About four characters per token: a rough size for text the API has not
/// counted yet.
pub(super) fn estimate_tokens(messages: &[&StoredMessage]) -> u64 {
    chars_to_tokens(messages.iter().map(|m| message_chars(m)).sum())
}

fn chars_to_tokens(chars: usize) -> u64 {
    u64::try_from(chars.div_ceil(4)).unwrap_or(u64::MAX)
}

/// What an image weighs in the estimate, in characters (4 to a token).
const IMAGE_CHARS: usize = 6_400;

fn message_chars(message: &StoredMessage) -> usize {
    message
        .blocks
        .iter()
        .map(|record| match &record.block {
            Block::Text { text } => text.len(),
            Block::Thinking {
                thinking,
                signature,
            } => thinking.len() + signature.len(),
            Block::RedactedThinking { data } => data.len(),
            Block::ToolUse { name, input, .. } => name.len() + input.to_string().len(),
            Block::ToolResult { content, .. } => content.len(),
            // An API counts an image by its size in pixels, at most about
            // 1 600 tokens for the sizes ah sends.
            Block::Image { .. } => IMAGE_CHARS,
        })
        .sum()
}

/// A message a kept part may start with: an assistant message (its tool
/// calls are answered after it) or a user message that answers no tool call.
fn is_cut_point(message: &StoredMessage) -> bool {
    match message.role {
        Role::Assistant => true,
        Role::User => !message
            .blocks
            .iter()
            .any(|b| matches!(b.block, Block::ToolResult { .. })),
    }
}

/// Where to split the view into a summarised part (`..cut`) and a kept part
/// (`cut..`): the earliest point that keeps at most `keep_turns` assistant
/// messages and at most `keep_tokens` (estimated), but always at least the
/// last exchange. Never between a tool call and its result. `None` when
/// nothing but an earlier summary could be summarised.
pub(super) fn cut_point(
    messages: &[&StoredMessage],
    keep_turns: usize,
    keep_tokens: u64,
) -> Option<usize> {
    let summarised = usize::from(messages.first().is_some_and(|m| kept_from(m).is_some()));
    let mut best = None;
    let mut turns = 0;
    let mut tokens = 0;
    let mut counted = messages.len();
    for at in (summarised + 1..messages.len()).rev() {
        // Grow the kept part down to `at`, counting what it holds.
        for message in &messages[at..counted] {
            turns += usize::from(message.role == Role::Assistant);
            tokens += estimate_tokens(&[message]);
        }
        counted = at;
        if !is_cut_point(messages[at]) {
            continue;
        }
        if best.is_some() && (turns > keep_turns || tokens > keep_tokens) {
            break;
        }
        best = Some(at);
    }
    best
}

/// The text of the user's latest request when the kept part does not
/// contain it (the cut falls inside the current turn), so it can be quoted
/// beside the summary. When the request is not in the view at all, an
/// earlier compaction in the same turn summarised it away, and the summary
/// heading the view quoted it: that quote is carried over.
pub(super) fn split_request(messages: &[&StoredMessage], cut: usize) -> Option<String> {
    let is_request = |message: &&&StoredMessage| {
        message.role == Role::User && is_cut_point(message) && kept_from(message).is_none()
    };
    if messages[cut..].iter().any(|m| is_request(&m)) {
        return None;
    }
    let Some(request) = messages[..cut].iter().rev().find(is_request) else {
        let earlier = messages.first()?;
        return marker_field(earlier, "request").map(str::to_string);
    };
    let text: Vec<&str> = request
        .blocks
        .iter()
        .filter_map(|b| match &b.block {
            Block::Text { text } if !text.is_empty() => Some(text.as_str()),
            _ => None,
        })
        .collect();
    (!text.is_empty()).then(|| text.join("\n\n"))
}

#[cfg(test)]
mod tests;
