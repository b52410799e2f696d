use std::time::Duration;

use serde_json::value::{RawValue, to_raw_value};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};

use super::client::Listed;
use super::wire::{Conn, Deadline, MAX_MESSAGE_BYTES, McpError};
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

fn soon(after: Duration) -> Deadline {
    Deadline::within(after)
}

fn raw(value: Value) -> Box<RawValue> {
    to_raw_value(&value).unwrap()
}

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
    let result = conn
        .request("tools/list", json!({}), soon(SECOND), 1024)
        .await
        .unwrap();
    assert_eq!(result.get(), r#"{"tools":[]}"#);
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
        .request("initialize", json!({}), soon(SECOND), 1024)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, McpError::Garbage(why) if why.contains("\"Starting server...\" is not a JSON-RPC message")),
        "{err}"
    );

    let (mut conn, _from, to_client) = pipes();
    drop(to_client);
    let err = conn
        .request("tools/call", json!({}), soon(SECOND), 1024)
        .await
        .unwrap_err();
    assert!(matches!(err, McpError::Closed { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        "it ended (its output closed) before answering tools/call"
    );

    let (mut conn, _from, _to_client) = pipes();
    let err = conn
        .request("tools/call", json!({}), soon(SECOND), 1024)
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "it did not answer tools/call within 1 s");
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
        .request(
            "tools/call",
            json!({}),
            soon(SECOND * 10),
            MAX_MESSAGE_BYTES,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, McpError::TooLong(_)), "{err}");
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
        .request("tools/call", json!({}), soon(SECOND), 1024)
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
    let err = client::handshake(&mut conn, soon(SECOND))
        .await
        .unwrap_err();
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
        declared: "config.toml".into(),
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
    let mut listed = listed_of(listed);
    listed.push(Listed {
        name: "big".into(),
        entry: Err("its entry is 100 KiB; ah takes at most 96 KiB".into()),
    });
    let (tools, skipped) = offered(&server(), &listed);
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_str()).collect();
    assert_eq!(names, ["probe__echo", "probe__bare"]);
    assert_eq!(tools[1].input_schema["type"], "object");
    assert_eq!(skipped.len(), 7, "{skipped:?}");
    assert!(
        skipped[6].contains("ah takes at most 96 KiB"),
        "{skipped:?}"
    );
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

/// Entries as `tools/list` gives them.
fn listed_of(entries: Vec<Value>) -> Vec<Listed> {
    entries
        .into_iter()
        .map(|entry| Listed {
            name: entry["name"].as_str().unwrap_or_default().to_string(),
            entry: Ok(entry),
        })
        .collect()
}

fn tool() -> McpTool {
    let listed = listed_of(vec![json!({"name": "t", "inputSchema": {}})]);
    offered(&server(), &listed).0.remove(0)
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
    let out = output(&tool(), &raw(result), &limits);
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
        &raw(json!({"content": [{"type": "image", "data": fake}]})),
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
        &raw(json!({"content": [{"type": "image", "data": huge}]})),
        &limits,
    );
    assert!(
        out.content.contains("ah sends images of at most 3750 KB"),
        "{}",
        out.content
    );

    let out = output(
        &tool(),
        &raw(json!({"isError": true, "content": [{"type": "text", "text": "no such city"}]})),
        &limits,
    );
    assert!(out.is_error);
    assert_eq!(out.content, "no such city");
    let out = output(
        &tool(),
        &raw(json!({"structuredContent": {"a": 1}})),
        &limits,
    );
    assert_eq!(out.content, "{\"a\":1}");
    // Parts past the first 64 are counted, not read; a result of the
    // wrong shape is an error.
    let many: Vec<Value> = (0..100)
        .map(|i| json!({"type": "text", "text": i.to_string()}))
        .collect();
    let out = output(&tool(), &raw(json!({ "content": many })), &limits);
    assert!(
        out.content.ends_with("63\n[36 more parts, not shown]"),
        "{}",
        out.content
    );
    let out = output(&tool(), &raw(json!({"content": "text"})), &limits);
    assert!(out.is_error);
    assert!(
        out.content.contains("is not a tool result"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn a_server_that_stops_reading_cannot_hold_the_exchange() {
    // The server never reads: ah's request fills the pipe, and the
    // deadline still ends the wait.
    let (client_out, _server_in) = tokio::io::duplex(64);
    let (_server_out, client_in) = tokio::io::duplex(64);
    let mut conn = Conn::new(Box::new(client_in), Box::new(client_out));
    let big = json!({"text": "x".repeat(4096)});
    let err = conn
        .request("tools/call", big, soon(SECOND), 1024)
        .await
        .unwrap_err();
    assert!(matches!(err, McpError::Timeout { .. }), "{err}");
    let err = conn
        .notify(
            "notifications/initialized",
            soon(Duration::from_millis(100)),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, McpError::Timeout { .. }), "{err}");
}

#[tokio::test]
async fn a_servers_own_requests_are_bounded_in_number_and_id() {
    let (mut conn, mut from_client, mut to_client) = pipes();
    tokio::spawn(async move {
        let _ = next(&mut from_client).await;
        let id = format!("\"{}\"", "i".repeat(500));
        let line = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"ping\"}}\n");
        to_client.write_all(line.as_bytes()).await.unwrap();
    });
    let err = conn
        .request("tools/call", json!({}), soon(SECOND), 4096)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("not a short string or number"),
        "{err}"
    );

    // The server's input stays open (ah's answers go there) while it
    // floods ah with pings.
    let (mut conn, _from_client, mut to_client) = pipes();
    tokio::spawn(async move {
        for i in 0..100 {
            let line = json!({"jsonrpc": "2.0", "id": i, "method": "ping"}).to_string();
            if to_client
                .write_all(format!("{line}\n").as_bytes())
                .await
                .is_err()
            {
                return;
            }
        }
    });
    let err = conn
        .request("tools/call", json!({}), soon(SECOND), 4096)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("more than 64 requests"), "{err}");
}

#[tokio::test]
async fn the_list_keeps_what_fits_and_names_the_rest() {
    let (mut conn, mut from_client, mut to_client) = pipes();
    tokio::spawn(async move {
        let request = next(&mut from_client).await;
        let big = json!({"name": "big", "inputSchema": {"description": "d".repeat(200 * 1024)}});
        let small = json!({"name": "small", "inputSchema": {"type": "object"}});
        let answer = json!({"jsonrpc": "2.0", "id": request["id"],
            "result": {"tools": [small, big]}});
        to_client
            .write_all(format!("{answer}\n").as_bytes())
            .await
            .unwrap();
    });
    let listing = client::list_tools(&mut conn, soon(SECOND)).await.unwrap();
    assert_eq!(listing.tools.len(), 2);
    assert!(listing.tools[0].entry.is_ok());
    assert_eq!(listing.tools[1].name, "big");
    let why = listing.tools[1].entry.as_ref().unwrap_err();
    assert!(why.contains("ah takes at most 96 KiB"), "{why}");
    assert!(listing.left_out.is_none());
}
