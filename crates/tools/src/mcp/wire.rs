//! JSON-RPC 2.0 over a stdio MCP server's pipes: one message per line, in
//! both directions. Everything the server sends is hostile: a line is read
//! up to [`MAX_MESSAGE_BYTES`] and no further, every answer is waited for
//! until a deadline, a line that is not a JSON-RPC message ends the
//! conversation, and a request of the server's is answered (`ping`) or
//! refused (everything else: ah offers the server nothing) without waiting.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::time::Instant;

/// The longest message read from a server: an image's base64 (at most
/// 5 MB) with room to spare.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// How much of a bad line an error quotes.
const QUOTE_CHARS: usize = 80;

/// Why a server's answer did not come.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error("it did not answer {what} within {secs} s")]
    Timeout { what: String, secs: u64 },
    #[error("it ended (its output closed) before answering {what}")]
    Closed { what: String },
    #[error("it sent something that is not an MCP message: {0}")]
    Garbage(String),
    #[error("it sent a message longer than {} MiB", MAX_MESSAGE_BYTES >> 20)]
    TooLong,
    #[error("it answered {what} with error {code}: {message}")]
    Rpc {
        what: String,
        code: i64,
        message: String,
    },
    #[error("it could not be written to: {0}")]
    Write(std::io::Error),
    #[error("it could not be read from: {0}")]
    Read(std::io::Error),
}

impl McpError {
    /// Whether the conversation is over: anything but an error answer
    /// leaves the server in a state ah cannot trust (or know).
    pub fn is_fatal(&self) -> bool {
        !matches!(self, McpError::Rpc { .. })
    }
}

type Reader = BufReader<Box<dyn AsyncRead + Send + Unpin>>;
type Writer = Box<dyn AsyncWrite + Send + Unpin>;

/// The host's end of one server's pipes.
pub struct Conn {
    reader: Reader,
    writer: Writer,
    next_id: i64,
}

impl Conn {
    pub fn new(
        reader: Box<dyn AsyncRead + Send + Unpin>,
        writer: Box<dyn AsyncWrite + Send + Unpin>,
    ) -> Conn {
        Conn {
            reader: BufReader::new(reader),
            writer,
            next_id: 1,
        }
    }

    /// Sends a notification (nothing comes back).
    pub async fn notify(&mut self, method: &str) -> Result<(), McpError> {
        self.send(&json!({"jsonrpc": "2.0", "method": method}))
            .await
    }

    /// Sends a request and waits, at most `timeout`, for its answer's
    /// `result`.
    pub async fn request(
        &mut self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, McpError> {
        let id = self.next_id;
        self.next_id += 1;
        let what = method.to_string();
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await?;
        let deadline = Instant::now() + timeout;
        loop {
            let line = match tokio::time::timeout_at(deadline, read_line(&mut self.reader)).await {
                Err(_) => {
                    return Err(McpError::Timeout {
                        what,
                        secs: timeout.as_secs(),
                    });
                }
                Ok(Err(ReadError::Closed)) => return Err(McpError::Closed { what }),
                Ok(Err(ReadError::TooLong)) => return Err(McpError::TooLong),
                Ok(Err(ReadError::Io(err))) => return Err(McpError::Read(err)),
                Ok(Ok(line)) => line,
            };
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let message = parse(&line)?;
            if let Some(method) = message.get("method").and_then(Value::as_str) {
                // A request of the server's has an id and wants an answer;
                // a notification (logging, progress) is let go.
                if let Some(theirs) = message.get("id") {
                    let answer = match method {
                        "ping" => json!({"jsonrpc": "2.0", "id": theirs, "result": {}}),
                        _ => json!({"jsonrpc": "2.0", "id": theirs, "error": {
                            "code": -32601,
                            "message": "ah offers MCP servers no requests of their own",
                        }}),
                    };
                    self.send(&answer).await?;
                }
                continue;
            }
            // An answer to another id (none is outstanding) is let go.
            if message.get("id") != Some(&json!(id)) {
                continue;
            }
            if let Some(error) = message.get("error") {
                return Err(McpError::Rpc {
                    what,
                    code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
                    message: error
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("(no message)")
                        .chars()
                        .take(2000)
                        .collect(),
                });
            }
            return message.get("result").cloned().ok_or_else(|| {
                McpError::Garbage(format!("its answer to {what} has neither result nor error"))
            });
        }
    }

    async fn send(&mut self, message: &Value) -> Result<(), McpError> {
        let mut line = message.to_string().into_bytes();
        line.push(b'\n');
        self.writer
            .write_all(&line)
            .await
            .map_err(McpError::Write)?;
        self.writer.flush().await.map_err(McpError::Write)
    }
}

/// A JSON-RPC 2.0 message object, or why `line` is none.
fn parse(line: &[u8]) -> Result<serde_json::Map<String, Value>, McpError> {
    let quote = || {
        let text = String::from_utf8_lossy(line);
        let cut: String = text.chars().take(QUOTE_CHARS).collect();
        format!("{cut:?}{}", if cut.len() < text.len() { "…" } else { "" })
    };
    match serde_json::from_slice::<Value>(line) {
        Ok(Value::Object(message)) if message.get("jsonrpc") == Some(&json!("2.0")) => Ok(message),
        Ok(_) => Err(McpError::Garbage(format!(
            "{} is not a JSON-RPC 2.0 message",
            quote()
        ))),
        Err(_) => Err(McpError::Garbage(format!("{} is not JSON", quote()))),
    }
}

enum ReadError {
    Closed,
    TooLong,
    Io(std::io::Error),
}

/// The next line, without its newline; at most [`MAX_MESSAGE_BYTES`].
async fn read_line(reader: &mut Reader) -> Result<Vec<u8>, ReadError> {
    let mut line = Vec::new();
    loop {
        let buf = reader.fill_buf().await.map_err(ReadError::Io)?;
        if buf.is_empty() {
            return Err(ReadError::Closed);
        }
        let (take, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(at) => (at, true),
            None => (buf.len(), false),
        };
        if line.len() + take > MAX_MESSAGE_BYTES {
            return Err(ReadError::TooLong);
        }
        line.extend_from_slice(&buf[..take]);
        reader.consume(take + usize::from(done));
        if done {
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            return Ok(line);
        }
    }
}
