//! What a conversation recorded with one provider needs before another
//! provider's API takes it. Stored messages are provider-neutral (the
//! Anthropic block shapes); each client converts them for its own wire
//! format, and the rules for content that came from elsewhere live here:
//!
//! - Reasoning goes back as reasoning only where the target can verify it:
//!   the Anthropic API takes a `thinking` block only with the signature it
//!   issued, so reasoning without one (what an OpenAI-compatible server
//!   streamed) and all reasoning for Chat Completions (which has no field
//!   for it) becomes text wrapped in `<thinking>…</thinking>`, at its place
//!   in the message. Redacted thinking is opaque: only Anthropic can use it,
//!   and for anyone else it is left out.
//! - Tool-call ids are kept, so each call and its result stay paired; an id
//!   the Anthropic API would refuse (it takes only `[a-zA-Z0-9_-]`) is
//!   rewritten by [`anthropic_tool_id`], the same way on the call and on
//!   its result.

use std::borrow::Cow;

use super::{Block, Message};

/// Reasoning shown as text to a model that cannot take it as reasoning.
pub fn thinking_as_text(thinking: &str) -> String {
    format!("<thinking>\n{}\n</thinking>", thinking.trim())
}

/// `id` as the Anthropic API accepts a `tool_use` id: unchanged when it is
/// made of ASCII letters, digits, `_` and `-` only; else those characters
/// kept, every other one as `_`, and a hash of the whole original appended,
/// so two ids that differ only in refused characters stay apart. The same
/// input always gives the same output, so a call and its result still match.
pub fn anthropic_tool_id(id: &str) -> Cow<'_, str> {
    let valid = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if !id.is_empty() && id.chars().all(valid) {
        return Cow::Borrowed(id);
    }
    let kept: String = id.chars().map(|c| if valid(c) { c } else { '_' }).collect();
    Cow::Owned(format!("{kept}-{:016x}", fnv1a(id.as_bytes())))
}

/// 64-bit FNV-1a: stable across builds and platforms, unlike std's hasher.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// `messages` as the Anthropic API takes them: unsigned thinking as text,
/// tool ids it would refuse rewritten (see the module doc). Borrowed when
/// nothing needs changing, as in a conversation held with Claude alone.
pub fn for_anthropic(messages: &[Message]) -> Cow<'_, [Message]> {
    let foreign = |block: &Block| match block {
        Block::Thinking { signature, .. } => signature.is_empty(),
        Block::ToolUse { id, .. } => matches!(anthropic_tool_id(id), Cow::Owned(_)),
        Block::ToolResult { tool_use_id, .. } => {
            matches!(anthropic_tool_id(tool_use_id), Cow::Owned(_))
        }
        Block::Text { .. } | Block::RedactedThinking { .. } | Block::Image { .. } => false,
    };
    if !messages.iter().flat_map(|m| &m.content).any(foreign) {
        return Cow::Borrowed(messages);
    }
    let converted = messages
        .iter()
        .map(|message| Message {
            role: message.role,
            content: message.content.iter().map(anthropic_block).collect(),
        })
        .collect();
    Cow::Owned(converted)
}

fn anthropic_block(block: &Block) -> Block {
    match block {
        Block::Thinking {
            thinking,
            signature,
        } if signature.is_empty() => Block::Text {
            text: thinking_as_text(thinking),
        },
        Block::ToolUse { id, name, input } => Block::ToolUse {
            id: anthropic_tool_id(id).into_owned(),
            name: name.clone(),
            input: input.clone(),
        },
        Block::ToolResult {
            tool_use_id,
            content,
            is_error,
        } => Block::ToolResult {
            tool_use_id: anthropic_tool_id(tool_use_id).into_owned(),
            content: content.clone(),
            is_error: *is_error,
        },
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests;
