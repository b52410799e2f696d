//! The three requests ah makes of an MCP server: the handshake
//! (`initialize`, then `notifications/initialized`), the list of its tools
//! (`tools/list`, page by page, bounded) and a call (`tools/call`).

use std::time::Duration;

use serde_json::{Value, json};

use super::wire::{Conn, McpError};

/// The protocol version ah asks for.
pub const PROTOCOL_VERSION: &str = "2025-06-18";

/// The versions whose tools ah can use: they differ in nothing ah sends
/// or reads.
const KNOWN_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The most tools taken from one server, and pages read for them.
pub const MAX_TOOLS: usize = 256;
const MAX_PAGES: usize = 32;

/// Opens the conversation; the server's name and version as it gives them.
pub async fn handshake(conn: &mut Conn, timeout: Duration) -> Result<String, McpError> {
    let params = json!({
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "ah", "version": env!("CARGO_PKG_VERSION")},
    });
    let result = conn.request("initialize", params, timeout).await?;
    let version = result
        .get("protocolVersion")
        .and_then(Value::as_str)
        .unwrap_or("(none)");
    if !KNOWN_VERSIONS.contains(&version) {
        return Err(McpError::Garbage(format!(
            "it speaks MCP version {:?}; ah speaks {}",
            version.chars().take(40).collect::<String>(),
            KNOWN_VERSIONS.join(", ")
        )));
    }
    conn.notify("notifications/initialized").await?;
    let info = &result["serverInfo"];
    let text = |key: &str| {
        info.get(key)
            .and_then(Value::as_str)
            .unwrap_or("")
            .chars()
            .take(60)
            .collect::<String>()
    };
    Ok(format!("{} {}", text("name"), text("version"))
        .trim()
        .to_string())
}

/// The server's tools as it lists them (at most [`MAX_TOOLS`]), and
/// whether there were more.
pub async fn list_tools(
    conn: &mut Conn,
    timeout: Duration,
) -> Result<(Vec<Value>, bool), McpError> {
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let params = match &cursor {
            Some(cursor) => json!({ "cursor": cursor }),
            None => json!({}),
        };
        let page = conn.request("tools/list", params, timeout).await?;
        let Some(listed) = page.get("tools").and_then(Value::as_array) else {
            return Err(McpError::Garbage(
                "its answer to tools/list has no list of tools".to_string(),
            ));
        };
        for tool in listed {
            if tools.len() == MAX_TOOLS {
                return Ok((tools, true));
            }
            tools.push(tool.clone());
        }
        match page.get("nextCursor").and_then(Value::as_str) {
            Some(next) if !next.is_empty() => cursor = Some(next.to_string()),
            _ => return Ok((tools, false)),
        }
    }
    Ok((tools, true))
}

/// Calls `tool` with `arguments`; the result as the server sent it.
pub async fn call_tool(
    conn: &mut Conn,
    tool: &str,
    arguments: &Value,
    timeout: Duration,
) -> Result<Value, McpError> {
    let params = json!({"name": tool, "arguments": arguments});
    conn.request("tools/call", params, timeout).await
}
