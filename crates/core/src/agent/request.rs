//! Turns the stored conversation into what the API accepts: empty text
//! blocks are left out, consecutive turns of one role are joined, and a tool
//! call whose result was never stored (ah was killed mid-step) is answered;
//! earlier file edits are shown in the form of the edit tool offered now
//! ([`edit_calls`]); the pictures sent are bounded ([`pictures`]).

mod edit_calls;
pub(super) mod pictures;

pub(super) use edit_calls::map_edit_calls;

use ah_llm::{Block, Message, Role};

/// What the model is told for a tool call whose result was never stored
/// (ah was killed or crashed while the step ran).
pub(super) const INTERRUPTED: &str = "interrupted: ah stopped before this tool call finished, so its \
                           result is unknown; check the files it may have changed before relying on it";

/// The stored conversation as the API accepts it: empty text blocks (a
/// model may stream one) are rejected by the API, so they are left out; a
/// tool call without a stored result (ah was killed during the step) gets
/// an error result, since the API rejects a `tool_use` left unanswered.
pub(super) fn sendable(mut messages: Vec<Message>) -> Vec<Message> {
    for message in &mut messages {
        message
            .content
            .retain(|b| !matches!(b, Block::Text { text } if text.is_empty()));
    }
    messages.retain(|m| !m.content.is_empty());
    // Consecutive messages of one role (a stored interruption followed by a
    // new prompt) are one turn for the API.
    let mut merged: Vec<Message> = Vec::with_capacity(messages.len());
    for message in messages {
        match merged.last_mut() {
            Some(last) if last.role == message.role => last.content.extend(message.content),
            _ => merged.push(message),
        }
    }
    let mut messages = merged;
    let mut i = 0;
    while i < messages.len() {
        if messages[i].role == Role::Assistant {
            answer_interrupted(&mut messages, i);
        }
        i += 1;
    }
    messages
}

/// Gives every `tool_use` of the assistant message at `at` a result in the
/// next message (results first, as the API requires), making one if needed.
fn answer_interrupted(messages: &mut Vec<Message>, at: usize) {
    let answered: Vec<String> = match messages.get(at + 1) {
        Some(next) if next.role == Role::User => next
            .content
            .iter()
            .filter_map(|b| match b {
                Block::ToolResult { tool_use_id, .. } => Some(tool_use_id.clone()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    let missing: Vec<Block> = messages[at]
        .content
        .iter()
        .filter_map(|b| match b {
            Block::ToolUse { id, .. } if !answered.contains(id) => Some(Block::ToolResult {
                tool_use_id: id.clone(),
                content: INTERRUPTED.to_string(),
                is_error: true,
            }),
            _ => None,
        })
        .collect();
    if missing.is_empty() {
        return;
    }
    match messages.get_mut(at + 1) {
        Some(next) if next.role == Role::User => {
            next.content.splice(0..0, missing);
        }
        _ => messages.insert(
            at + 1,
            Message {
                role: Role::User,
                content: missing,
            },
        ),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tool_use(id: &str) -> Block {
        Block::ToolUse {
            id: id.to_string(),
            name: "bash".to_string(),
            input: json!({"command": "true"}),
        }
    }

    fn result(id: &str, content: &str, is_error: bool) -> Block {
        Block::ToolResult {
            tool_use_id: id.to_string(),
            content: content.to_string(),
            is_error,
        }
    }

    fn message(role: Role, content: Vec<Block>) -> Message {
        Message { role, content }
    }

    #[test]
    fn empty_text_blocks_and_emptied_messages_are_left_out() {
        let sent = sendable(vec![
            Message::user_text("go"),
            message(
                Role::Assistant,
                vec![
                    Block::Text {
                        text: String::new(),
                    },
                    Block::Text {
                        text: "ok".to_string(),
                    },
                ],
            ),
            Message::user_text(""),
        ]);
        assert_eq!(
            sent,
            vec![
                Message::user_text("go"),
                message(
                    Role::Assistant,
                    vec![Block::Text {
                        text: "ok".to_string()
                    }]
                ),
            ]
        );
    }

    #[test]
    fn answered_tool_calls_are_sent_as_stored() {
        let stored = vec![
            Message::user_text("go"),
            message(Role::Assistant, vec![tool_use("a"), tool_use("b")]),
            message(
                Role::User,
                vec![result("a", "1", false), result("b", "2", true)],
            ),
        ];
        assert_eq!(sendable(stored.clone()), stored);
    }

    #[test]
    fn a_tool_call_cut_short_by_a_crash_gets_an_error_result_before_the_next_prompt() {
        let sent = sendable(vec![
            Message::user_text("first"),
            message(Role::Assistant, vec![tool_use("a")]),
            Message::user_text("second"),
        ]);
        assert_eq!(
            sent[2],
            message(
                Role::User,
                vec![
                    result("a", INTERRUPTED, true),
                    Block::Text {
                        text: "second".to_string()
                    }
                ]
            )
        );
        assert_eq!(sent.len(), 3);
    }

    #[test]
    fn only_the_unanswered_calls_get_results_and_a_trailing_call_gets_a_message() {
        let sent = sendable(vec![
            Message::user_text("go"),
            message(Role::Assistant, vec![tool_use("a"), tool_use("b")]),
            message(Role::User, vec![result("a", "1", false)]),
            message(Role::Assistant, vec![tool_use("c")]),
        ]);
        assert_eq!(
            sent[2].content,
            vec![result("b", INTERRUPTED, true), result("a", "1", false)]
        );
        assert_eq!(
            sent[4],
            message(Role::User, vec![result("c", INTERRUPTED, true)])
        );
    }
}
