//! Conversion of foreign reasoning and tool ids for the Anthropic API.

use serde_json::json;

use super::*;
use crate::Role;

#[test]
fn valid_ids_are_kept_and_others_rewritten_the_same_way_every_time() {
    assert_eq!(
        anthropic_tool_id("toolu_01A-b"),
        Cow::Borrowed("toolu_01A-b")
    );
    assert_eq!(anthropic_tool_id("call_abc"), Cow::Borrowed("call_abc"));
    let odd = anthropic_tool_id("call:1.x");
    assert!(odd.starts_with("call_1_x-"), "{odd}");
    assert_eq!(odd.len(), "call_1_x-".len() + 16);
    assert_eq!(odd, anthropic_tool_id("call:1.x"));
    // Differing only in refused characters, the ids stay apart.
    assert_ne!(odd, anthropic_tool_id("call.1:x"));
    let empty = anthropic_tool_id("");
    assert!(
        empty.len() == 17 && empty.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'),
        "{empty}"
    );
}

#[test]
fn a_claude_conversation_is_passed_through_untouched() {
    let messages = vec![Message {
        role: Role::Assistant,
        content: vec![
            Block::Thinking {
                thinking: "plan".into(),
                signature: "sig".into(),
            },
            Block::ToolUse {
                id: "toolu_1".into(),
                name: "bash".into(),
                input: json!({}),
            },
        ],
    }];
    assert!(matches!(for_anthropic(&messages), Cow::Borrowed(_)));
}

#[test]
fn unsigned_thinking_becomes_text_and_ids_are_rewritten_in_pairs() {
    let messages = vec![
        Message {
            role: Role::Assistant,
            content: vec![
                Block::Thinking {
                    thinking: " look first \n".into(),
                    signature: String::new(),
                },
                Block::ToolUse {
                    id: "call:7".into(),
                    name: "read".into(),
                    input: json!({"path": "a"}),
                },
            ],
        },
        Message {
            role: Role::User,
            content: vec![Block::ToolResult {
                tool_use_id: "call:7".into(),
                content: "a".into(),
                is_error: false,
            }],
        },
    ];
    let sent = for_anthropic(&messages);
    assert_eq!(
        sent[0].content[0],
        Block::Text {
            text: "<thinking>\nlook first\n</thinking>".into()
        }
    );
    let Block::ToolUse { id, .. } = &sent[0].content[1] else {
        panic!("{:?}", sent[0]);
    };
    let Block::ToolResult { tool_use_id, .. } = &sent[1].content[0] else {
        panic!("{:?}", sent[1]);
    };
    assert_eq!(id, tool_use_id);
    assert_eq!(*id, anthropic_tool_id("call:7"));
}
