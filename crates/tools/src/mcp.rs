//! MCP servers' tools, as the model sees them. A server is declared in the
//! configuration (`[mcp.NAME]`: its command and what it gets) and started
//! inside the run's sandbox by the layers above; this module speaks to it
//! over its pipes ([`wire`], [`client`]), turns what it lists into tools
//! named `NAME__TOOL` and what it answers into a tool result (text, and
//! one picture that goes the way `read`'s pictures go). Everything a
//! server says is bounded: names, descriptions, schemas, the number of
//! tools, every message and every wait.

pub mod client;
#[cfg(test)]
mod tests;
pub mod wire;

use base64::Engine as _;
use serde_json::{Value, json};

use super::read::image;
use super::{OutputLimits, ToolOutput, schema, truncate};
use ah_llm::ToolDef;

/// What separates a server's name from its tool's in the name the model
/// sees.
pub const SEPARATOR: &str = "__";

/// The longest tool name the model APIs take.
const MAX_NAME: usize = 64;

/// The longest description kept of a server's tool, in characters.
const MAX_DESCRIPTION: usize = 4_000;

/// The largest input schema kept, in bytes of JSON.
const MAX_SCHEMA_BYTES: usize = 64 * 1024;

/// A declared server: how to start it and which of its tools to offer.
#[derive(Debug, Clone, PartialEq)]
pub struct McpServer {
    /// `[a-zA-Z0-9_-]`, without [`SEPARATOR`].
    pub name: String,
    pub command: String,
    pub args: Vec<String>,
    /// Variables it is started with (names and values; the values never
    /// leave the host but for the server's own environment).
    pub env: Vec<(String, String)>,
    /// Only these of its tools, when given.
    pub enabled_tools: Option<Vec<String>>,
    /// Never these.
    pub disabled_tools: Vec<String>,
    /// Seconds for its start and listing.
    pub startup_timeout: u64,
    /// Seconds a call may take.
    pub timeout: u64,
    /// Where it was declared, as the user sees it.
    pub source: String,
}

impl McpServer {
    /// Whether the server's tool `tool` is offered.
    fn offers(&self, tool: &str) -> bool {
        self.enabled_tools
            .as_ref()
            .is_none_or(|only| only.iter().any(|name| name == tool))
            && !self.disabled_tools.iter().any(|name| name == tool)
    }
}

/// Whether `name` may name a server.
pub fn valid_server_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 32
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        && !name.contains(SEPARATOR)
}

/// One of a server's tools, offered to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct McpTool {
    pub server: String,
    /// The server's name for it.
    pub tool: String,
    /// `SERVER__TOOL`.
    pub name: String,
    pub description: String,
    pub input_schema: Value,
    pub source: String,
}

impl McpTool {
    pub fn spec(&self) -> ToolDef {
        ToolDef {
            name: self.name.clone(),
            description: format!(
                "{}\n\n(A tool of the MCP server {}, declared in {}; it runs where commands \
                 run, in /work.)",
                self.description, self.server, self.source
            ),
            input_schema: self.input_schema.clone(),
        }
    }
}

/// The tools of `listed` (a `tools/list` answer's entries) that `server`
/// offers, and a line for each one left out and why.
pub fn offered(server: &McpServer, listed: &[Value]) -> (Vec<McpTool>, Vec<String>) {
    let mut tools: Vec<McpTool> = Vec::new();
    let mut skipped = Vec::new();
    for entry in listed {
        let tool = entry.get("name").and_then(Value::as_str).unwrap_or("");
        let shown = format!("{:?}", tool.chars().take(MAX_NAME).collect::<String>());
        let name = format!("{}{SEPARATOR}{tool}", server.name);
        let valid = !tool.is_empty()
            && name.len() <= MAX_NAME
            && tool
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !valid {
            skipped.push(format!(
                "{shown}: not a tool name the model APIs take ([a-zA-Z0-9_-], at most \
                 {MAX_NAME} characters with the server's name)"
            ));
            continue;
        }
        if !server.offers(tool) {
            continue;
        }
        if tools.iter().any(|known| known.tool == tool) {
            skipped.push(format!("{shown}: listed twice"));
            continue;
        }
        let input_schema = match checked_schema(entry.get("inputSchema")) {
            Ok(schema) => schema,
            Err(why) => {
                skipped.push(format!("{shown}: {why}"));
                continue;
            }
        };
        let description = entry
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("")
            .chars()
            .take(MAX_DESCRIPTION)
            .collect();
        tools.push(McpTool {
            server: server.name.clone(),
            tool: tool.to_string(),
            name,
            description,
            input_schema,
            source: server.source.clone(),
        });
    }
    (tools, skipped)
}

/// A tool's input schema, if ah can check inputs with it: an object's
/// schema, bounded, that compiles without reaching outside itself.
fn checked_schema(schema: Option<&Value>) -> Result<Value, String> {
    let Some(Value::Object(object)) = schema else {
        return Err("its input schema is not a JSON object".to_string());
    };
    let mut object = object.clone();
    match object.get("type") {
        None => {
            object.insert("type".to_string(), json!("object"));
        }
        Some(kind) if kind == "object" => {}
        Some(_) => return Err("its input schema is not that of an object".to_string()),
    }
    let schema = Value::Object(object);
    if schema.to_string().len() > MAX_SCHEMA_BYTES {
        return Err(format!(
            "its input schema is larger than {} KiB",
            MAX_SCHEMA_BYTES / 1024
        ));
    }
    schema::compile(&schema).map_err(|why| format!("its input schema is refused: {why}"))?;
    Ok(schema)
}

/// The tool result of a `tools/call` answer: its text parts joined (cut
/// as `bash`'s output is), its first picture sent to the model the way
/// `read` sends one, and an error when the server says so.
pub fn output(tool: &McpTool, result: &Value, limits: &OutputLimits) -> ToolOutput {
    let mut parts: Vec<String> = Vec::new();
    let mut picture: Option<(image::Picture, Vec<u8>)> = None;
    let items = result
        .get("content")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for item in &items {
        match item.get("type").and_then(Value::as_str).unwrap_or("") {
            "text" => parts.push(item["text"].as_str().unwrap_or("").to_string()),
            "image" if picture.is_none() => match decoded_picture(item) {
                Ok((found, bytes)) => {
                    parts.push(format!(
                        "[an image ({}, {}×{} pixels, {} KB); it is shown to you after the \
                         results of this turn]",
                        found.media_type,
                        found.width,
                        found.height,
                        (bytes.len() as u64).div_ceil(1000)
                    ));
                    picture = Some((found, bytes));
                }
                Err(why) => parts.push(format!("[an image that is not sent: {why}]")),
            },
            "image" => parts.push("[another image, not sent: ah sends one per call]".to_string()),
            "resource" => match item["resource"].get("text").and_then(Value::as_str) {
                Some(text) => parts.push(text.to_string()),
                None => parts.push(format!(
                    "[a resource, {}, not shown]",
                    resource_name(&item["resource"])
                )),
            },
            "resource_link" => parts.push(format!("[a link to {}]", resource_name(item))),
            other => parts.push(format!(
                "[a {:?} part, which ah does not pass on]",
                other.chars().take(20).collect::<String>()
            )),
        }
    }
    if items.is_empty()
        && let Some(structured) = result.get("structuredContent")
    {
        parts.push(structured.to_string());
    }
    let is_error = result.get("isError").and_then(Value::as_bool) == Some(true);
    let whole = parts.join("\n");
    let content = truncate::head_tail(&whole, limits.bash, Some(limits.bash_lines));
    let mut details = json!({"server": tool.server, "tool": tool.tool});
    let stdout = match picture {
        Some((found, bytes)) if !is_error => {
            details["path"] = json!(format!("an image from {}", tool.name));
            details["image"] = json!({
                "media_type": found.media_type,
                "width": found.width,
                "height": found.height,
                "bytes": bytes.len(),
            });
            bytes
        }
        _ => whole.into_bytes(),
    };
    ToolOutput {
        content,
        is_error,
        details,
        stdout,
        stderr: Vec::new(),
        exit_code: None,
        may_change_files: true,
    }
}

/// The picture of an image part, known by its bytes (not by the type the
/// server gives) and within what `read` sends.
fn decoded_picture(item: &Value) -> Result<(image::Picture, Vec<u8>), String> {
    let data = item.get("data").and_then(Value::as_str).unwrap_or("");
    // base64 grows by a third: a longer text is refused before decoding.
    if data.len() as u64 > image::MAX_BYTES / 3 * 4 + 4 {
        return Err(format!(
            "it is about {} KB; ah sends images of at most {} KB",
            (data.len() as u64 / 4 * 3).div_ceil(1000),
            image::MAX_BYTES / 1000
        ));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|_| "its data is not base64".to_string())?;
    let head = &bytes[..bytes.len().min(image::SNIFF)];
    let found = match image::sniff(head) {
        Some(Ok(found)) => found,
        Some(Err(kind)) => return Err(format!("a {kind} whose size its header does not give")),
        None => return Err("it is no PNG, JPEG, GIF or WebP".to_string()),
    };
    match image::refusal(&found, bytes.len() as u64) {
        Some(why) => Err(why),
        None => Ok((found, bytes)),
    }
}

fn resource_name(resource: &Value) -> String {
    let uri = resource.get("uri").and_then(Value::as_str).unwrap_or("?");
    format!("{:?}", uri.chars().take(200).collect::<String>())
}
