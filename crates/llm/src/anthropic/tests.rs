//! Tests for request encoding and for whole calls over a real socket against a
//! tiny canned HTTP server on 127.0.0.1.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;
use crate::{Block, Role};

fn request() -> Request {
    Request {
        model: "claude-test".into(),
        system: String::new(),
        messages: vec![Message::user_text("hi")],
        tools: Vec::new(),
        max_tokens: 1024,
        thinking_budget: None,
    }
}

fn body_json(request: &Request) -> Value {
    let bytes = request_body(request).expect("request encodes");
    serde_json::from_slice(&bytes).expect("request body is JSON")
}

#[test]
fn minimal_body_omits_system_tools_and_thinking() {
    assert_eq!(
        body_json(&request()),
        json!({
            "model": "claude-test",
            "max_tokens": 1024,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
            "stream": true
        })
    );
}

#[test]
fn full_body_matches_the_api_shape() {
    let mut req = request();
    req.system = "You are ah.".into();
    req.thinking_budget = Some(4000);
    req.tools = vec![ToolDef {
        name: "read".into(),
        description: "Read a file".into(),
        input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
    }];
    req.messages.push(Message {
        role: Role::Assistant,
        content: vec![
            Block::Thinking {
                thinking: "hmm".into(),
                signature: "sig==".into(),
            },
            Block::ToolUse {
                id: "toolu_1".into(),
                name: "read".into(),
                input: json!({"path": "a"}),
            },
            Block::ToolUse {
                id: "toolu_2".into(),
                name: "read".into(),
                input: json!({"path": "b"}),
            },
        ],
    });
    req.messages.push(Message {
        role: Role::User,
        content: vec![
            Block::ToolResult {
                tool_use_id: "toolu_1".into(),
                content: "ok".into(),
                is_error: false,
            },
            Block::ToolResult {
                tool_use_id: "toolu_2".into(),
                content: "no such file".into(),
                is_error: true,
            },
        ],
    });
    assert_eq!(
        body_json(&req),
        json!({
            "model": "claude-test",
            "max_tokens": 1024,
            "system": "You are ah.",
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "sig=="},
                    {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a"}},
                    {"type": "tool_use", "id": "toolu_2", "name": "read", "input": {"path": "b"}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"},
                    {"type": "tool_result", "tool_use_id": "toolu_2", "content": "no such file", "is_error": true}
                ]}
            ],
            "tools": [{"name": "read", "description": "Read a file",
                       "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}],
            "stream": true,
            "thinking": {"type": "enabled", "budget_tokens": 4000}
        })
    );
}

/// One canned reply: raw HTTP head and body; `stall` keeps the socket open
/// afterwards without sending anything.
struct Reply {
    head: String,
    body: String,
    stall: bool,
}

fn sse_reply(body: &str) -> Reply {
    Reply {
        head: "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
            .into(),
        body: body.into(),
        stall: false,
    }
}

fn error_reply(status: &str, extra_headers: &str, body: &str) -> Reply {
    Reply {
        head: format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n{extra_headers}\r\n",
            body.len()
        ),
        body: body.into(),
        stall: false,
    }
}

/// A recorded request: lower-cased head and the body.
#[derive(Debug, Clone)]
struct Seen {
    head: String,
    body: Value,
}

/// Serves `replies` in order, one connection each, and records the requests.
async fn serve(replies: Vec<Reply>) -> (String, Arc<Mutex<Vec<Seen>>>) {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1");
    let addr = listener.local_addr().expect("local addr");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    tokio::spawn(async move {
        for reply in replies {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let request = read_request(&mut socket).await;
            log.lock().expect("log lock").push(request);
            let raw = format!("{}{}", reply.head, reply.body);
            if socket.write_all(raw.as_bytes()).await.is_err() {
                return;
            }
            if reply.stall {
                tokio::time::sleep(Duration::from_secs(30)).await;
            }
        }
    });
    (format!("http://{addr}/"), seen)
}

async fn read_request(socket: &mut TcpStream) -> Seen {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    let head_end = loop {
        let n = socket.read(&mut buf).await.expect("read request");
        assert!(n > 0, "client closed before sending a request");
        data.extend_from_slice(&buf[..n]);
        if let Some(pos) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos + 4;
        }
    };
    let head = String::from_utf8_lossy(&data[..head_end]).to_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map(|v| v.trim().parse().expect("content-length is a number"))
        .unwrap_or(0);
    while data.len() < head_end + length {
        let n = socket.read(&mut buf).await.expect("read body");
        assert!(n > 0, "client closed mid-body");
        data.extend_from_slice(&buf[..n]);
    }
    let body =
        serde_json::from_slice(&data[head_end..head_end + length]).expect("request body is JSON");
    Seen { head, body }
}

const SUCCESS: &str = concat!(
    "event: message_start\n",
    "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_9\",\"model\":\"claude-test\",\"usage\":{\"input_tokens\":11,\"output_tokens\":1}}}\n\n",
    "event: ping\ndata: {\"type\": \"ping\"}\n\n",
    "event: content_block_start\n",
    "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi there\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    "event: content_block_start\n",
    "data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_7\",\"name\":\"bash\",\"input\":{}}}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"command\\\"\"}}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\": \\\"ls\\\"}\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
    "event: message_delta\n",
    "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":17}}\n\n",
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
);

fn client(base: &str, retry: RetryPolicy) -> AnthropicClient {
    AnthropicClient::new(base, &Credentials::ApiKey("sk-test-key".into()), retry).expect("client")
}

fn quick_policy(max_attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(5),
        idle_timeout: Duration::from_secs(10),
    }
}

async fn call(client: &AnthropicClient) -> (Result<Response, LlmError>, Vec<StreamEvent>) {
    let mut events = Vec::new();
    let result = client.stream(&request(), &mut |e| events.push(e)).await;
    (result, events)
}

#[tokio::test]
async fn overloaded_then_success_is_retried_and_parsed() {
    let overloaded =
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    let (base, seen) = serve(vec![
        error_reply("529 Site Overloaded", "retry-after: 0\r\n", overloaded),
        sse_reply(SUCCESS),
    ])
    .await;
    let (result, events) = call(&client(&base, RetryPolicy::default())).await;
    let response = result.expect("second attempt succeeds");

    assert_eq!(response.id, "msg_9");
    assert_eq!(
        response.content,
        vec![
            Block::Text {
                text: "Hi there".into()
            },
            Block::ToolUse {
                id: "toolu_7".into(),
                name: "bash".into(),
                input: json!({"command": "ls"})
            },
        ]
    );
    assert_eq!(response.stop_reason.as_deref(), Some("tool_use"));
    assert_eq!(
        (response.usage.input_tokens, response.usage.output_tokens),
        (11, 17)
    );
    assert_eq!(
        events,
        vec![
            StreamEvent::Retry {
                attempt: 1,
                delay_ms: 0,
                reason: "HTTP 529 overloaded_error: Overloaded".into()
            },
            StreamEvent::TextDelta("Hi there".into()),
            StreamEvent::ToolUseStart {
                id: "toolu_7".into(),
                name: "bash".into()
            },
        ]
    );

    let seen = seen.lock().expect("log lock").clone();
    assert_eq!(seen.len(), 2);
    let head = &seen[1].head;
    assert!(head.starts_with("post /v1/messages http/1.1"), "{head}");
    assert!(head.contains("x-api-key: sk-test-key"), "{head}");
    assert!(head.contains("anthropic-version: 2023-06-01"), "{head}");
    assert!(head.contains("content-type: application/json"), "{head}");
    assert_eq!(seen[1].body["stream"], json!(true));
    assert_eq!(seen[1].body["model"], json!("claude-test"));
}

#[tokio::test]
async fn invalid_request_fails_at_once_and_long_prompt_is_overflow() {
    let invalid = r#"{"type":"error","error":{"type":"invalid_request_error","message":"messages: field required"}}"#;
    let too_long = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#;
    let (base, seen) = serve(vec![
        error_reply("400 Bad Request", "", invalid),
        error_reply("400 Bad Request", "", too_long),
    ])
    .await;
    let client = client(&base, quick_policy(5));

    let (result, events) = call(&client).await;
    match result {
        Err(LlmError::Api {
            status: 400,
            kind,
            message,
        }) => {
            assert_eq!(
                (kind.as_str(), message.as_str()),
                ("invalid_request_error", "messages: field required")
            );
        }
        other => panic!("expected the API's 400, got {other:?}"),
    }
    assert!(events.is_empty(), "no retry for a 400: {events:?}");
    assert_eq!(seen.lock().expect("log lock").len(), 1);

    let (result, _) = call(&client).await;
    assert!(
        matches!(result, Err(LlmError::ContextOverflow(ref m)) if m.contains("210000")),
        "{result:?}"
    );
}

#[tokio::test]
async fn cut_and_idle_streams_exhaust_retries() {
    let cut = SUCCESS
        .split("event: message_delta")
        .next()
        .expect("prefix")
        .to_string();
    let stalled = Reply {
        stall: true,
        ..sse_reply("event: ping\ndata: {\"type\":\"ping\"}\n\n")
    };
    let (base, seen) = serve(vec![sse_reply(&cut), stalled]).await;
    let policy = RetryPolicy {
        idle_timeout: Duration::from_millis(300),
        ..quick_policy(2)
    };

    let (result, events) = call(&client(&base, policy)).await;
    match result {
        Err(LlmError::RetriesExhausted { attempts: 2, last }) => {
            assert!(last.contains("no data"), "{last}")
        }
        other => panic!("expected exhausted retries, got {other:?}"),
    }
    let reasons: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Retry { reason, .. } => Some(reason.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(reasons.len(), 1);
    assert!(reasons[0].contains("message_stop"), "{reasons:?}");
    assert_eq!(seen.lock().expect("log lock").len(), 2);
}

#[tokio::test]
async fn refused_connection_is_retried_then_reported() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local addr");
    drop(listener);
    let (result, events) = call(&client(&format!("http://{addr}"), quick_policy(3))).await;
    match result {
        Err(LlmError::RetriesExhausted { attempts: 3, last }) => {
            assert!(last.contains("connection error"), "{last}")
        }
        other => panic!("expected exhausted retries, got {other:?}"),
    }
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, StreamEvent::Retry { .. }))
            .count(),
        2
    );
}

#[tokio::test]
async fn overloaded_error_mid_stream_is_retried() {
    let start = SUCCESS
        .split("event: content_block_stop")
        .next()
        .expect("prefix");
    let broken = format!(
        "{start}event: error\ndata: {{\"type\":\"error\",\"error\":{{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}}}\n\n"
    );
    let (base, _) = serve(vec![sse_reply(&broken), sse_reply(SUCCESS)]).await;
    let (result, events) = call(&client(&base, quick_policy(2))).await;
    assert_eq!(result.expect("second attempt succeeds").content.len(), 2);
    assert!(
        matches!(&events[1], StreamEvent::Retry { attempt: 1, reason, .. } if reason.contains("overloaded_error")),
        "{events:?}"
    );
    // The deltas of the broken attempt came first; the retry starts them over.
    assert_eq!(events[0], StreamEvent::TextDelta("Hi there".into()));
    assert_eq!(events[2], StreamEvent::TextDelta("Hi there".into()));
}

#[tokio::test]
async fn a_secret_is_redacted_from_deltas_split_across_it_and_from_the_response() {
    let secret = "sk-test-llm-0004-abcdefgh";
    ah_base::redact::register(secret);
    let delta = |index: u32, kind: &str, field: &str, value: &str| {
        format!(
            "event: content_block_delta\ndata: {}\n\n",
            json!({"type": "content_block_delta", "index": index,
                   "delta": {"type": kind, field: value}})
        )
    };
    let body = [
        SUCCESS.split("event: content_block_delta").next().unwrap_or_default().to_string(),
        delta(0, "text_delta", "text", "key: sk-test-ll"),
        delta(0, "text_delta", "text", "m-0004-abcdefgh!"),
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n".into(),
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\
         \"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_7\",\"name\":\"bash\",\"input\":{}}}\n\n"
            .into(),
        delta(1, "input_json_delta", "partial_json", &format!("{{\"command\": \"echo {secret}\"}}")),
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n".into(),
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n".into(),
    ]
    .concat();
    let (base, _seen) = serve(vec![sse_reply(&body)]).await;
    let (result, events) = call(&client(&base, quick_policy(1))).await;
    let response = result.expect("the reply parses");
    let streamed: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta(text) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        streamed.iter().all(|piece| !piece.contains("sk-test")),
        "{streamed:?}"
    );
    assert_eq!(streamed.concat(), "key: [REDACTED]!");
    assert_eq!(
        response.content,
        vec![
            Block::Text {
                text: "key: [REDACTED]!".into()
            },
            Block::ToolUse {
                id: "toolu_7".into(),
                name: "bash".into(),
                input: json!({"command": "echo [REDACTED]"})
            },
        ]
    );
}
