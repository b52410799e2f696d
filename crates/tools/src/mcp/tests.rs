use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};

use super::wire::{Conn, MAX_MESSAGE_BYTES, McpError};
use super::*;

/// A client's connection and the server's end of the pipes.
fn pipes() -> (Conn, BufReader<DuplexStream>, DuplexStream) {
    let (client_out, server_in) = tokio::io::duplex(1 << 20);
    let (server_out, client_in) = tokio::io::duplex(1 << 20);
    (
        Conn::new(Box::new(client_in), Box::new(client_out)),
        BufReader::new(server_in),
        server_out,
    )
}

async fn next(reader: &mut BufReader<DuplexStream>) -> Value {
    let mut line = String::new();
    reader.read_line(&mut line).await.unwrap();
    serde_json::from_str(&line).unwrap()
}

const SECOND: Duration = Duration::from_secs(1);

#[tokio::test]
async fn an_answer_comes_after_notifications_and_the_servers_own_requests() {
    let (mut conn, mut from_client, mut to_client) = pipes();
    let server = tokio::spawn(async move {
        let request = next(&mut from_client).await;
        assert_eq!(request["method"], "tools/list");
        let lines = [
            json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {}}).to_string(),
            String::new(),
            json!({"jsonrpc": "2.0", "id": "p", "method": "ping"}).to_string(),
            json!({"jsonrpc": "2.0", "id": 7, "method": "sampling/createMessage"}).to_string(),
            json!({"jsonrpc": "2.0", "id": 999, "result": {"stale": true}}).to_string(),
            json!({"jsonrpc": "2.0", "id": request["id"], "result": {"tools": []}}).to_string(),
        ];
        for line in lines {
            to_client
                .write_all(format!("{line}\r\n").as_bytes())
                .await
                .unwrap();
        }
        let pong = next(&mut from_client).await;
        let refused = next(&mut from_client).await;
        (pong, refused)
    });
    let result = conn.request("tools/list", json!({}), SECOND).await.unwrap();
    assert_eq!(result, json!({"tools": []}));
    let (pong, refused) = server.await.unwrap();
    assert_eq!(pong, json!({"jsonrpc": "2.0", "id": "p", "result": {}}));
    assert_eq!(refused["id"], 7);
    assert_eq!(refused["error"]["code"], -32601);
}

#[tokio::test]
async fn garbage_an_end_a_silence_and_an_endless_line_are_errors() {
    let (mut conn, _from, mut to_client) = pipes();
    to_client.write_all(b"Starting server...\n").await.unwrap();
    let err = conn
        .request("initialize", json!({}), SECOND)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, McpError::Garbage(why) if why.contains("\"Starting server...\" is not JSON")),
        "{err}"
    );

    let (mut conn, _from, to_client) = pipes();
    drop(to_client);
    let err = conn
        .request("tools/call", json!({}), SECOND)
        .await
        .unwrap_err();
    assert!(matches!(err, McpError::Closed { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        "it ended (its output closed) before answering tools/call"
    );

    let (mut conn, _from, _to_client) = pipes();
    let err = conn
        .request("tools/call", json!({}), Duration::from_millis(200))
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "it did not answer tools/call within 0 s");
    assert!(err.is_fatal());

    let (mut conn, _from, mut to_client) = pipes();
    let writer = tokio::spawn(async move {
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..=MAX_MESSAGE_BYTES >> 20 {
            if to_client.write_all(&chunk).await.is_err() {
                return;
            }
        }
    });
    let err = conn
        .request("tools/call", json!({}), SECOND * 10)
        .await
        .unwrap_err();
    assert!(matches!(err, McpError::TooLong), "{err}");
    drop(conn);
    writer.await.unwrap();
}

#[tokio::test]
async fn an_error_answer_is_not_fatal_and_keeps_its_message() {
    let (mut conn, mut from_client, mut to_client) = pipes();
    tokio::spawn(async move {
        let request = next(&mut from_client).await;
        let answer = json!({"jsonrpc": "2.0", "id": request["id"],
            "error": {"code": -32602, "message": "unknown tool"}});
        to_client
            .write_all(format!("{answer}\n").as_bytes())
            .await
            .unwrap();
    });
    let err = conn
        .request("tools/call", json!({}), SECOND)
        .await
        .unwrap_err();
    assert!(!err.is_fatal());
    assert_eq!(
        err.to_string(),
        "it answered tools/call with error -32602: unknown tool"
    );
}

#[tokio::test]
async fn the_handshake_refuses_a_version_ah_does_not_speak() {
    let (mut conn, mut from_client, mut to_client) = pipes();
    tokio::spawn(async move {
        let request = next(&mut from_client).await;
        assert_eq!(
            request["params"]["protocolVersion"],
            client::PROTOCOL_VERSION
        );
        let answer = json!({"jsonrpc": "2.0", "id": request["id"],
            "result": {"protocolVersion": "1999-01-01", "capabilities": {}}});
        to_client
            .write_all(format!("{answer}\n").as_bytes())
            .await
            .unwrap();
    });
    let err = client::handshake(&mut conn, SECOND).await.unwrap_err();
    assert!(
        err.to_string().contains("MCP version \"1999-01-01\""),
        "{err}"
    );
}

fn server() -> McpServer {
    McpServer {
        name: "probe".into(),
        command: "probe".into(),
        args: Vec::new(),
        env: Vec::new(),
        enabled_tools: None,
        disabled_tools: vec!["hidden".into()],
        startup_timeout: 10,
        timeout: 10,
        source: "config.toml".into(),
    }
}

#[test]
fn listed_tools_are_named_by_their_server_and_checked() {
    let object = json!({"type": "object", "properties": {"a": {"type": "string"}}});
    let listed = vec![
        json!({"name": "echo", "description": "Echoes", "inputSchema": object}),
        json!({"name": "bare", "inputSchema": {"properties": {}}}),
        json!({"name": "hidden", "inputSchema": object}),
        json!({"name": "echo", "inputSchema": object}),
        json!({"name": "bad name\u{202e}", "inputSchema": object}),
        json!({"name": "x".repeat(60), "inputSchema": object}),
        json!({"name": "list", "inputSchema": {"type": "array"}}),
        json!({"name": "remote", "inputSchema": {"$ref": "https://example.com/s.json"}}),
        json!({"name": "none"}),
    ];
    let (tools, skipped) = offered(&server(), &listed);
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_str()).collect();
    assert_eq!(names, ["probe__echo", "probe__bare"]);
    assert_eq!(tools[1].input_schema["type"], "object");
    assert_eq!(skipped.len(), 6, "{skipped:?}");
    assert!(skipped[0].contains("listed twice"), "{skipped:?}");
    assert!(
        skipped[1].starts_with("\"bad name\\u{202e}\""),
        "{skipped:?}"
    );
    assert!(skipped[4].contains("refused"), "{skipped:?}");
    let spec = tools[0].spec();
    assert!(
        spec.description
            .contains("MCP server probe, declared in config.toml")
    );

    let mut only = server();
    only.enabled_tools = Some(vec!["bare".into()]);
    let (tools, _) = offered(&only, &listed);
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].tool, "bare");
}

const PIXEL: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgAAACAAFUok9dAAAAAElFTkSuQmCC";

fn tool() -> McpTool {
    offered(&server(), &[json!({"name": "t", "inputSchema": {}})])
        .0
        .remove(0)
}

#[test]
fn a_result_gives_its_text_and_one_picture_known_by_its_bytes() {
    let limits = OutputLimits::default();
    let result = json!({"content": [
        {"type": "text", "text": "first"},
        {"type": "image", "data": PIXEL, "mimeType": "image/jpeg"},
        {"type": "image", "data": PIXEL, "mimeType": "image/png"},
        {"type": "resource", "resource": {"uri": "file:///a", "text": "inline"}},
        {"type": "audio", "data": "AAAA"},
    ]});
    let out = output(&tool(), &result, &limits);
    assert!(!out.is_error);
    assert!(
        out.content
            .starts_with("first\n[an image (image/png, 1×1 pixels, 1 KB)"),
        "{}",
        out.content
    );
    assert!(out.content.contains("[another image, not sent"));
    assert!(out.content.contains("inline"));
    assert!(out.content.contains("\"audio\" part"));
    assert_eq!(out.details["image"]["media_type"], "image/png");
    assert!(out.stdout.starts_with(b"\x89PNG"));

    let fake = base64::engine::general_purpose::STANDARD.encode(b"<svg/>");
    let out = output(
        &tool(),
        &json!({"content": [{"type": "image", "data": fake}]}),
        &limits,
    );
    assert!(
        out.content.contains("not sent: it is no PNG"),
        "{}",
        out.content
    );
    assert!(out.details.get("image").is_none());

    let huge = "A".repeat(6_000_000);
    let out = output(
        &tool(),
        &json!({"content": [{"type": "image", "data": huge}]}),
        &limits,
    );
    assert!(
        out.content.contains("ah sends images of at most 3750 KB"),
        "{}",
        out.content
    );

    let out = output(
        &tool(),
        &json!({"isError": true, "content": [{"type": "text", "text": "no such city"}]}),
        &limits,
    );
    assert!(out.is_error);
    assert_eq!(out.content, "no such city");
    let out = output(&tool(), &json!({"structuredContent": {"a": 1}}), &limits);
    assert_eq!(out.content, "{\"a\":1}");
}
