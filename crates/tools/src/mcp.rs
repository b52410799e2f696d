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
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::read::image;
use super::{MAX_TOOL_NAME, OutputLimits, ToolOutput, schema, truncate, valid_tool_name};
use ah_llm::ToolDef;
use client::Listed;
use wire::Capped;

/// What separates a server's name from its tool's in the name the model
/// sees.
pub const SEPARATOR: &str = "__";

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
    /// Where it was declared, as the model is told: the project's file by
    /// its path in the project (`.ah/config.toml`), the user's own by a
    /// neutral name; never a path of the host's.
    pub declared: String,
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

/// Whether `name` may name a server: a tool name of at most 32
/// characters, without [`SEPARATOR`].
pub fn valid_server_name(name: &str) -> bool {
    name.len() <= 32 && valid_tool_name(name) && !name.contains(SEPARATOR)
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
    /// Its server's [`McpServer::declared`].
    pub declared: String,
}

impl McpTool {
    pub fn spec(&self) -> ToolDef {
        ToolDef {
            name: self.name.clone(),
            description: format!(
                "{}\n\n(A tool of the MCP server {}, declared in {}; it runs where commands \
                 run, in /work.)",
                self.description, self.server, self.declared
            ),
            input_schema: self.input_schema.clone(),
        }
    }
}

/// The tools of `listed` that `server` offers, and a line for each one
/// left out and why. What a server says goes to the model with the secrets
/// ah knows taken out (a server may hold one in its environment).
pub fn offered(server: &McpServer, listed: &[Listed]) -> (Vec<McpTool>, Vec<String>) {
    let mut tools: Vec<McpTool> = Vec::new();
    let mut skipped = Vec::new();
    for Listed { name: tool, entry } in listed {
        let shown = format!("{:?}", tool.chars().take(MAX_TOOL_NAME).collect::<String>());
        let name = format!("{}{SEPARATOR}{tool}", server.name);
        if tool.is_empty() || !valid_tool_name(&name) {
            skipped.push(format!(
                "{shown}: not a tool name the model APIs take ([a-zA-Z0-9_-], at most \
                 {MAX_TOOL_NAME} characters with the server's name)"
            ));
            continue;
        }
        if ah_base::redact::contains_secret(tool) {
            skipped.push("(a name that holds a secret ah knows)".to_string());
            continue;
        }
        if !server.offers(tool) {
            continue;
        }
        if tools.iter().any(|known| &known.tool == tool) {
            skipped.push(format!("{shown}: listed twice"));
            continue;
        }
        let entry = match entry {
            Ok(entry) => entry,
            Err(why) => {
                skipped.push(format!("{shown}: {why}"));
                continue;
            }
        };
        let mut input_schema = match checked_schema(entry.get("inputSchema")) {
            Ok(schema) => schema,
            Err(why) => {
                skipped.push(format!("{shown}: {why}"));
                continue;
            }
        };
        ah_base::redact::json(&mut input_schema);
        // Redacted whole, then cut: a cut could split a secret.
        let description = entry.get("description").and_then(Value::as_str);
        let description: String = ah_base::redact::text(description.unwrap_or(""))
            .chars()
            .take(MAX_DESCRIPTION)
            .collect();
        tools.push(McpTool {
            server: server.name.clone(),
            tool: tool.clone(),
            name,
            description,
            input_schema,
            declared: server.declared.clone(),
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

/// The most parts of a result read; the rest are counted.
const MAX_PARTS: usize = 64;

/// A `tools/call` answer, read as far as ah uses it (strings, never a
/// tree of the server's making).
#[derive(Deserialize)]
struct CallResult<'a> {
    content: Option<Capped<Part, MAX_PARTS>>,
    #[serde(rename = "isError")]
    is_error: Option<bool>,
    #[serde(rename = "structuredContent", borrow)]
    structured: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Part {
    #[serde(rename = "type")]
    kind: Option<String>,
    text: Option<String>,
    data: Option<String>,
    resource: Option<Resource>,
    uri: Option<String>,
}

#[derive(Deserialize)]
struct Resource {
    uri: Option<String>,
    text: Option<String>,
}

/// The tool result of a `tools/call` answer: its text parts joined (cut
/// as `bash`'s output is), its first picture sent to the model the way
/// `read` sends one, and an error when the server says so (or sent no
/// tool result).
pub fn output(tool: &McpTool, result: &RawValue, limits: &OutputLimits) -> ToolOutput {
    let details = json!({"server": tool.server, "tool": tool.tool});
    let result: CallResult = match serde_json::from_str(result.get()) {
        Ok(result) => result,
        Err(err) => {
            return ToolOutput {
                details,
                may_change_files: true,
                ..ToolOutput::error(format!(
                    "MCP server {}: its answer to tools/call is not a tool result: {err}",
                    tool.server
                ))
            };
        }
    };
    let mut parts: Vec<String> = Vec::new();
    let mut picture: Option<(image::Picture, Vec<u8>)> = None;
    let content = result.content.unwrap_or(Capped {
        items: Vec::new(),
        more: 0,
    });
    for part in &content.items {
        match part.kind.as_deref().unwrap_or("") {
            "text" => parts.push(part.text.clone().unwrap_or_default()),
            "image" if picture.is_none() => match decoded_picture(part) {
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
            "resource" => match part.resource.as_ref() {
                Some(Resource {
                    text: Some(text), ..
                }) => parts.push(text.clone()),
                other => parts.push(format!(
                    "[a resource, {}, not shown]",
                    uri_of(other.and_then(|r| r.uri.as_deref()))
                )),
            },
            "resource_link" => parts.push(format!("[a link to {}]", uri_of(part.uri.as_deref()))),
            other => parts.push(format!(
                "[a {:?} part, which ah does not pass on]",
                other.chars().take(20).collect::<String>()
            )),
        }
    }
    if content.more > 0 {
        parts.push(format!("[{} more parts, not shown]", content.more));
    }
    if content.items.is_empty()
        && let Some(structured) = result.structured
    {
        parts.push(structured.get().to_string());
    }
    let is_error = result.is_error == Some(true);
    let whole = parts.join("\n");
    let content = truncate::head_tail(&whole, limits.bash, Some(limits.bash_lines));
    let mut details = details;
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
fn decoded_picture(part: &Part) -> Result<(image::Picture, Vec<u8>), String> {
    let data = part.data.as_deref().unwrap_or("");
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

fn uri_of(uri: Option<&str>) -> String {
    format!(
        "{:?}",
        uri.unwrap_or("?").chars().take(200).collect::<String>()
    )
}
