//! Request conversion: ah's messages as a Chat Completions body.

use serde_json::{Value, json};

use super::*;
use crate::{Block, Message, Role, ToolDef};

fn body_json(request: &Request, field: OutputLimitField) -> Value {
    let bytes = request::body(request, field).expect("request encodes");
    serde_json::from_slice(&bytes).expect("request body is JSON")
}

fn request(messages: Vec<Message>) -> Request {
    Request {
        model: "gpt-test".into(),
        system: String::new(),
        messages,
        tools: Vec::new(),
        max_tokens: 1000,
        thinking_budget: None,
    }
}

#[test]
fn minimal_body_streams_with_usage_and_names_the_output_limit_as_told() {
    let req = request(vec![Message::user_text("hi")]);
    assert_eq!(
        body_json(&req, OutputLimitField::MaxTokens),
        json!({
            "model": "gpt-test",
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 1000,
            "stream": true,
            "stream_options": {"include_usage": true}
        })
    );
    let body = body_json(&req, OutputLimitField::MaxCompletionTokens);
    assert_eq!(body["max_completion_tokens"], json!(1000));
    assert!(body.get("max_tokens").is_none());
}

#[test]
fn a_tool_conversation_becomes_system_tool_calls_and_tool_messages() {
    let mut req = request(vec![
        Message::user_text("fix it"),
        Message {
            role: Role::Assistant,
            content: vec![
                Block::Thinking {
                    thinking: "private".into(),
                    signature: "sig".into(),
                },
                Block::Text {
                    text: "Looking.".into(),
                },
                Block::ToolUse {
                    id: "call_1".into(),
                    name: "read".into(),
                    input: json!({"path": "a"}),
                },
                Block::ToolUse {
                    id: "call_2".into(),
                    name: "bash".into(),
                    input: json!({"command": "false"}),
                },
            ],
        },
        Message {
            role: Role::User,
            content: vec![
                Block::ToolResult {
                    tool_use_id: "call_1".into(),
                    content: "1\tx".into(),
                    is_error: false,
                },
                Block::ToolResult {
                    tool_use_id: "call_2".into(),
                    content: "exit 1".into(),
                    is_error: true,
                },
                Block::Text {
                    text: "[ah: you repeat yourself]".into(),
                },
            ],
        },
        Message {
            role: Role::Assistant,
            content: vec![Block::RedactedThinking { data: "x".into() }],
        },
        Message {
            role: Role::Assistant,
            content: vec![Block::ToolUse {
                id: "call_3".into(),
                name: "bash".into(),
                input: json!({"command": "ls"}),
            }],
        },
    ]);
    req.system = "You are ah.".into();
    req.tools = vec![ToolDef {
        name: "read".into(),
        description: "Read a file".into(),
        input_schema: json!({"type": "object"}),
    }];
    let body = body_json(&req, OutputLimitField::MaxTokens);
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "You are ah."},
            {"role": "user", "content": "fix it"},
            {"role": "assistant", "content": "<thinking>\nprivate\n</thinking>\n\nLooking.", "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "read", "arguments": "{\"path\":\"a\"}"}},
                {"id": "call_2", "type": "function",
                 "function": {"name": "bash", "arguments": "{\"command\":\"false\"}"}}
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "1\tx"},
            {"role": "tool", "tool_call_id": "call_2", "content": "Error: exit 1"},
            {"role": "user", "content": "[ah: you repeat yourself]"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_3", "type": "function",
                 "function": {"name": "bash", "arguments": "{\"command\":\"ls\"}"}}
            ]}
        ])
    );
    assert_eq!(
        body["tools"],
        json!([{"type": "function", "function": {
            "name": "read", "description": "Read a file", "parameters": {"type": "object"}
        }}])
    );
}

#[test]
fn pictures_are_image_url_parts_after_the_text_of_their_message() {
    let picture = |data: &str| Block::Image {
        source: crate::ImageSource {
            kind: "base64".into(),
            media_type: "image/png".into(),
            data: data.into(),
        },
    };
    let req = request(vec![Message {
        role: Role::User,
        content: vec![
            Block::ToolResult {
                tool_use_id: "call_1".into(),
                content: "a.png is an image".into(),
                is_error: false,
            },
            Block::Text {
                text: "[ah: a note]".into(),
            },
            picture("iVBO"),
            picture("R0lG"),
        ],
    }]);
    let url = |data: &str| json!({"url": format!("data:image/png;base64,{data}")});
    assert_eq!(
        body_json(&req, OutputLimitField::MaxTokens)["messages"],
        json!([
            {"role": "tool", "tool_call_id": "call_1", "content": "a.png is an image"},
            {"role": "user", "content": [
                {"type": "text", "text": "[ah: a note]"},
                {"type": "image_url", "image_url": url("iVBO")},
                {"type": "image_url", "image_url": url("R0lG")},
            ]},
        ])
    );
}

#[test]
fn a_client_needs_no_key_and_a_key_no_header_allows_is_refused_unshown() {
    let retry = RetryPolicy::default();
    assert!(
        OpenAiClient::new(
            "http://x/v1/",
            None,
            OutputLimitField::MaxTokens,
            retry.clone()
        )
        .is_ok()
    );
    let err = OpenAiClient::new(
        "http://x/v1",
        Some("sk-a\nb"),
        OutputLimitField::MaxTokens,
        retry,
    )
    .expect_err("invalid header");
    assert!(!err.to_string().contains("sk-a"), "{err}");
}
