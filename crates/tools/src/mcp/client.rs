//! The three requests ah makes of an MCP server: the handshake
//! (`initialize`, then `notifications/initialized`), the list of its tools
//! (`tools/list`, page by page) and a call (`tools/call`). Each is bounded
//! by the caller's deadline; what the list may hold is bounded here: the
//! number of tools, each one's size and all of them together.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::wire::{Capped, Conn, Deadline, MAX_MESSAGE_BYTES, McpError};

/// The protocol version ah asks for.
pub const PROTOCOL_VERSION: &str = "2025-06-18";

/// The versions whose tools ah can use: they differ in nothing ah sends
/// or reads.
const KNOWN_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The most tools taken from one server, and pages read for them.
pub const MAX_TOOLS: usize = 256;
const MAX_PAGES: usize = 32;

/// The largest answer to the handshake or one page of the list.
const MAX_PAGE_BYTES: usize = 4 * 1024 * 1024;

/// The largest entry of a tool kept (its name, description and schema).
pub const MAX_ENTRY_BYTES: usize = 96 * 1024;

/// The most bytes of tool entries kept of one server.
pub const MAX_KEPT_BYTES: usize = 2 * 1024 * 1024;

/// One tool the server listed: its name, and its entry (or why it was not
/// read).
#[derive(Debug)]
pub struct Listed {
    pub name: String,
    pub entry: Result<Value, String>,
}

/// What `tools/list` gave: the tools read, and why more were not.
#[derive(Debug, Default)]
pub struct Listing {
    pub tools: Vec<Listed>,
    pub left_out: Option<String>,
}

#[derive(Deserialize)]
struct Init {
    #[serde(rename = "protocolVersion")]
    protocol_version: Option<String>,
    #[serde(rename = "serverInfo")]
    server_info: Option<Info>,
}

#[derive(Deserialize)]
struct Info {
    name: Option<String>,
    version: Option<String>,
}

#[derive(Deserialize)]
struct Page<'a> {
    #[serde(borrow)]
    tools: Option<Capped<&'a RawValue, MAX_TOOLS>>,
    #[serde(rename = "nextCursor")]
    next_cursor: Option<String>,
}

#[derive(Deserialize)]
struct Named {
    name: Option<String>,
}

/// What an answer should have held, as an error.
fn not_a(what: &str, err: serde_json::Error) -> McpError {
    McpError::Garbage(format!("its answer to {what} is not one: {err}"))
}

/// Opens the conversation; the server's name and version as it gives them.
pub async fn handshake(conn: &mut Conn, deadline: Deadline) -> Result<String, McpError> {
    let params = json!({
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "ah", "version": env!("CARGO_PKG_VERSION")},
    });
    let result = conn
        .request("initialize", params, deadline, MAX_PAGE_BYTES)
        .await?;
    let init: Init = serde_json::from_str(result.get()).map_err(|err| not_a("initialize", err))?;
    let version = init.protocol_version.unwrap_or_else(|| "(none)".into());
    if !KNOWN_VERSIONS.contains(&version.as_str()) {
        return Err(McpError::Garbage(format!(
            "it speaks MCP version {:?}; ah speaks {}",
            version.chars().take(40).collect::<String>(),
            KNOWN_VERSIONS.join(", ")
        )));
    }
    conn.notify("notifications/initialized", deadline).await?;
    let text =
        |part: Option<String>| -> String { part.unwrap_or_default().chars().take(60).collect() };
    let info = init.server_info.unwrap_or(Info {
        name: None,
        version: None,
    });
    Ok(format!("{} {}", text(info.name), text(info.version))
        .trim()
        .to_string())
}

/// The server's tools as it lists them, within ah's bounds.
pub async fn list_tools(conn: &mut Conn, deadline: Deadline) -> Result<Listing, McpError> {
    let mut listing = Listing::default();
    let mut kept_bytes = 0;
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let params = match &cursor {
            Some(cursor) => json!({ "cursor": cursor }),
            None => json!({}),
        };
        let answer = conn
            .request("tools/list", params, deadline, MAX_PAGE_BYTES)
            .await?;
        let page: Page =
            serde_json::from_str(answer.get()).map_err(|err| not_a("tools/list", err))?;
        let Some(tools) = page.tools else {
            return Err(McpError::Garbage(
                "its answer to tools/list has no list of tools".to_string(),
            ));
        };
        for raw in tools.items {
            if listing.tools.len() == MAX_TOOLS {
                listing.left_out = Some(format!("only its first {MAX_TOOLS} tools are taken"));
                return Ok(listing);
            }
            let text = raw.get();
            let fits = text.len() <= MAX_ENTRY_BYTES;
            if fits && kept_bytes + text.len() > MAX_KEPT_BYTES {
                listing.left_out = Some(format!(
                    "its tools past {} MiB of names, descriptions and schemas are not taken",
                    MAX_KEPT_BYTES >> 20
                ));
                return Ok(listing);
            }
            let entry: Result<Value, String> = match fits {
                true => {
                    kept_bytes += text.len();
                    serde_json::from_str(text).map_err(|err| format!("its entry: {err}"))
                }
                false => Err(format!(
                    "its entry is {} KiB; ah takes at most {} KiB",
                    text.len() / 1024,
                    MAX_ENTRY_BYTES / 1024
                )),
            };
            // An entry read whole gives its name; of another, only the
            // name is read.
            let name = match &entry {
                Ok(read) => read.get("name").and_then(Value::as_str).map(str::to_string),
                Err(_) => serde_json::from_str::<Named>(text)
                    .ok()
                    .and_then(|named| named.name),
            };
            listing.tools.push(Listed {
                name: name.unwrap_or_default(),
                entry,
            });
        }
        if tools.more > 0 {
            listing.left_out = Some(format!("only its first {MAX_TOOLS} tools are taken"));
            return Ok(listing);
        }
        match page.next_cursor {
            Some(next) if !next.is_empty() => cursor = Some(next),
            _ => return Ok(listing),
        }
    }
    listing.left_out = Some(format!(
        "only its first {MAX_PAGES} pages of tools are read"
    ));
    Ok(listing)
}

/// Calls `tool` with `arguments`; the result as the server sent it.
pub async fn call_tool(
    conn: &mut Conn,
    tool: &str,
    arguments: &Value,
    deadline: Deadline,
) -> Result<Box<RawValue>, McpError> {
    let params = json!({"name": tool, "arguments": arguments});
    conn.request("tools/call", params, deadline, MAX_MESSAGE_BYTES)
        .await
}
