//! The part of a conversation being summarised, written out as plain text.
//!
//! The summary request offers the model no tools, and the API refuses
//! `tool_use` and `tool_result` blocks in a request without tools; a text
//! transcript also keeps the model from carrying on with the work instead of
//! summarising it. Long tool inputs and outputs are shortened, and the
//! oldest messages are left out when the whole would not fit the window.

use ah_llm::{Block, Role};
use ah_session::StoredMessage;

use super::view::kept_from;

/// Tool inputs and results longer than this many characters are shortened.
const TOOL_TEXT_CHARS: usize = 2_000;

/// The transcript of `messages`, at most about `budget_chars` long: when
/// it would be longer, the oldest messages are left out (an earlier summary
/// first in line is always kept) and a note says how many.
pub(super) fn transcript(messages: &[&StoredMessage], budget_chars: usize) -> String {
    let sections: Vec<String> = messages.iter().map(|m| section(m)).collect();
    let pinned = usize::from(messages.first().is_some_and(|m| kept_from(m).is_some()));
    let mut total: usize = sections.iter().map(String::len).sum();
    let mut first = pinned;
    while total > budget_chars && first < sections.len() {
        total -= sections[first].len();
        first += 1;
    }
    let mut out = String::from("<conversation>\n");
    for part in &sections[..pinned] {
        out.push_str(part);
    }
    if first > pinned {
        out.push_str(&format!(
            "[{} earlier messages left out to fit the context window]\n\n",
            first - pinned
        ));
    }
    for part in &sections[first..] {
        out.push_str(part);
    }
    out.push_str("</conversation>");
    out
}

/// One message: a heading per block, then its text.
fn section(message: &StoredMessage) -> String {
    if kept_from(message).is_some() {
        let text: Vec<&str> = message
            .blocks
            .iter()
            .filter_map(|b| match &b.block {
                Block::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        return format!(
            "### Summary of the earlier conversation\n{}\n\n",
            text.join("\n\n")
        );
    }
    let mut out = String::new();
    for record in &message.blocks {
        let (heading, body) = match &record.block {
            Block::Text { text } if text.is_empty() => continue,
            Block::Text { text } => {
                let who = match message.role {
                    Role::User => "User",
                    Role::Assistant => "Assistant",
                };
                (who.to_string(), text.clone())
            }
            // Reasoning is not part of what was said or done.
            Block::Thinking { .. } | Block::RedactedThinking { .. } => continue,
            // The path comes without the image's base64: named, not sized.
            Block::Image { source } => {
                let from = record.details.as_ref().and_then(|d| d["path"].as_str());
                let from = from.map(|path| format!(", {path}")).unwrap_or_default();
                (
                    "An image was shown".to_string(),
                    format!("({}{from})", source.media_type),
                )
            }
            Block::ToolUse { name, input, .. } => (
                format!("Assistant called {name}"),
                shorten(&input.to_string()),
            ),
            Block::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => {
                let tool = record.tool_name.as_deref().unwrap_or(tool_use_id);
                let failed = if *is_error { " (error)" } else { "" };
                (format!("Result of {tool}{failed}"), shorten(content))
            }
        };
        out.push_str(&format!("### {heading}\n{body}\n\n"));
    }
    out
}

/// The text, or its start and a note of how much was left out.
fn shorten(text: &str) -> String {
    let count = text.chars().count();
    if count <= TOOL_TEXT_CHARS {
        return text.to_string();
    }
    let head: String = text.chars().take(TOOL_TEXT_CHARS).collect();
    format!("{head}… [{} more characters]", count - TOOL_TEXT_CHARS)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::agent::compact::view::marker_details;
    use ah_session::{BlockRecord, MessageMeta};

    fn stored(id: &str, role: Role, blocks: Vec<BlockRecord>) -> StoredMessage {
        StoredMessage {
            id: id.to_string(),
            parent_id: None,
            role,
            seq: 0,
            created_at: String::new(),
            meta: MessageMeta::default(),
            agent: None,
            blocks,
        }
    }

    fn text(text: &str) -> BlockRecord {
        BlockRecord::from(Block::Text { text: text.into() })
    }

    #[test]
    fn tool_calls_and_results_become_text_and_long_output_is_shortened() {
        let call = stored(
            "a",
            Role::Assistant,
            vec![
                BlockRecord::from(Block::Thinking {
                    thinking: "secret plan".into(),
                    signature: "sig".into(),
                }),
                text("Looking."),
                BlockRecord::from(Block::ToolUse {
                    id: "t1".into(),
                    name: "read".into(),
                    input: json!({"path": "src/lib.rs"}),
                }),
            ],
        );
        let long = "x".repeat(TOOL_TEXT_CHARS + 10);
        let result = stored(
            "b",
            Role::User,
            vec![BlockRecord::tool_result("t1", "read", long, true)],
        );
        let text = transcript(&[&call, &result], usize::MAX);
        assert!(text.starts_with("<conversation>\n### Assistant\nLooking.\n"));
        assert!(text.contains("### Assistant called read\n{\"path\":\"src/lib.rs\"}"));
        assert!(text.contains("### Result of read (error)\n"));
        assert!(text.contains("… [10 more characters]"));
        assert!(!text.contains("secret plan"));
        assert!(text.ends_with("</conversation>"));
    }

    #[test]
    fn the_oldest_messages_go_first_but_an_earlier_summary_stays() {
        let mut summary = text("old summary");
        summary.details = Some(marker_details("m1", 5, None));
        let summary = stored("s", Role::User, vec![summary]);
        let old = stored("m1", Role::User, vec![text(&"o".repeat(500))]);
        let new = stored("m2", Role::Assistant, vec![text("newest")]);
        let all = [&summary, &old, &new];
        let full = transcript(&all, usize::MAX);
        assert!(full.contains("### Summary of the earlier conversation\nold summary"));
        assert!(full.contains(&"o".repeat(500)));

        let trimmed = transcript(&all, 200);
        assert!(trimmed.contains("old summary"));
        assert!(!trimmed.contains("ooo"));
        assert!(trimmed.contains("[1 earlier messages left out"));
        assert!(trimmed.contains("newest"));
    }
}
