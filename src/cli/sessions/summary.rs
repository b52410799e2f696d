//! One line per message for `ah scan`, `ah tree`, `ah branches` and
//! `ah diff`: the start of its text, its tool calls with their key
//! parameter, its tool results as ok or error.

use serde::Serialize;

use super::super::display::key_param;
use ah_core::present::terminal_safe;
use ah_core::sessions::{Block, Role, StoredMessage};

/// How much of a text block a summary shows, in characters.
const TEXT_CHARS: usize = 70;

/// The parts of a message's summary, in block order.
pub(super) fn parts(message: &StoredMessage) -> Vec<String> {
    let mut parts = Vec::new();
    for record in &message.blocks {
        match &record.block {
            Block::Text { text } => {
                // The note ah adds to a prompt that starts a new run says
                // nothing about the conversation.
                if message.role == Role::User && !parts.is_empty() && text.starts_with("[ah: ") {
                    continue;
                }
                parts.push(short(text));
            }
            Block::Thinking { .. } | Block::RedactedThinking { .. } => {
                parts.push("(thinking)".to_string());
            }
            Block::ToolUse { name, input, .. } => {
                parts.push(
                    format!("{name} {}", key_param(name, input))
                        .trim_end()
                        .to_string(),
                );
            }
            Block::ToolResult { is_error, .. } => {
                let name = record.tool_name.as_deref().unwrap_or("tool");
                let outcome = if *is_error { "error" } else { "ok" };
                parts.push(format!("{name}: {outcome}"));
            }
            Block::Image { source } => parts.push(format!("(image, {})", source.media_type)),
        }
    }
    parts
}

/// The summary as one line of plain text.
pub(super) fn line(message: &StoredMessage) -> String {
    let parts = parts(message);
    if parts.is_empty() {
        "(empty)".to_string()
    } else {
        parts.join(" · ")
    }
}

/// `@N role  summary` (`[agent] summary` in an org), safe for the
/// terminal.
pub(super) fn row(message: &StoredMessage) -> String {
    let agent = match &message.agent {
        Some(agent) => format!("[{}] ", terminal_safe(agent)),
        None => String::new(),
    };
    format!(
        "@{:<4} {:<9}  {agent}{}",
        message.seq,
        message.role.as_str(),
        terminal_safe(&line(message))
    )
}

/// The newest text on `path`, shortened to one line.
pub(super) fn last_text<'a>(path: impl DoubleEndedIterator<Item = &'a StoredMessage>) -> String {
    path.rev()
        .find_map(|m| {
            m.blocks.iter().find_map(|b| match &b.block {
                Block::Text { text } => Some(short(text)),
                _ => None,
            })
        })
        .unwrap_or_default()
}

/// The first non-blank line of `text`, cut at [`TEXT_CHARS`].
fn short(text: &str) -> String {
    let first = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default();
    let mut out: String = first.chars().take(TEXT_CHARS).collect();
    if out.len() < first.len() || text.trim().lines().nth(1).is_some() {
        out.push('…');
    }
    format!("\"{out}\"")
}

/// A message as `ah scan --json` shows it.
#[derive(Serialize)]
pub(super) struct ScanEntry<'a> {
    pub seq: i64,
    pub id: &'a str,
    pub parent_id: Option<&'a str>,
    pub role: &'a str,
    /// The agent whose conversation it is part of (`ah org`).
    pub agent: Option<&'a str>,
    pub created_at: &'a str,
    pub model: Option<&'a str>,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub summary: Vec<String>,
    pub head: bool,
}

impl<'a> ScanEntry<'a> {
    pub(super) fn new(message: &'a StoredMessage, head: bool) -> ScanEntry<'a> {
        ScanEntry {
            seq: message.seq,
            id: &message.id,
            parent_id: message.parent_id.as_deref(),
            role: message.role.as_str(),
            agent: message.agent.as_deref(),
            created_at: &message.created_at,
            model: message.meta.model.as_deref(),
            input_tokens: message.meta.usage.map(|u| u.input_tokens),
            output_tokens: message.meta.usage.map(|u| u.output_tokens),
            summary: parts(message),
            head,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ah_core::sessions::{BlockRecord, MessageMeta};
    use serde_json::json;

    fn message(role: Role, blocks: Vec<BlockRecord>) -> StoredMessage {
        StoredMessage {
            id: "01".into(),
            parent_id: None,
            role,
            seq: 7,
            created_at: String::new(),
            meta: MessageMeta::default(),
            agent: None,
            blocks,
        }
    }

    #[test]
    fn a_summary_shows_text_calls_and_results() {
        let answer = message(
            Role::Assistant,
            vec![
                BlockRecord::from(Block::Text {
                    text: "\n  I'll write it.\nThen test.".into(),
                }),
                BlockRecord::from(Block::ToolUse {
                    id: "t1".into(),
                    name: "write".into(),
                    input: json!({"path": "a.txt", "content": "x"}),
                }),
            ],
        );
        assert_eq!(line(&answer), "\"I'll write it.…\" · write a.txt");
        let results = message(
            Role::User,
            vec![
                BlockRecord::tool_result("t1", "write", "done".into(), false),
                BlockRecord::tool_result("t2", "bash", "boom".into(), true),
            ],
        );
        assert_eq!(line(&results), "write: ok · bash: error");
        assert_eq!(row(&results), "@7    user       write: ok · bash: error");
    }

    #[test]
    fn the_new_run_note_and_control_characters_are_not_shown_raw() {
        let prompt = message(
            Role::User,
            vec![
                BlockRecord::from(Block::Text {
                    text: "go \x1b[2J".into(),
                }),
                BlockRecord::from(Block::Text {
                    text: "[ah: this message starts a new run.]".into(),
                }),
            ],
        );
        assert_eq!(row(&prompt), "@7    user       \"go ^[[2J\"");
        assert_eq!(line(&message(Role::User, vec![])), "(empty)");
    }
}
