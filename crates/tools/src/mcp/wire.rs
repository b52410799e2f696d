//! JSON-RPC 2.0 over a stdio MCP server's pipes: one message per line, in
//! both directions. Everything the server sends is hostile: a line is read
//! up to a limit and no further, and a whole exchange (writing the
//! request, answering the server's own requests, reading the answer) has
//! one deadline, so a server that stops reading cannot hold ah either. A
//! message is parsed without building a tree of it: the answer's `result`
//! stays raw text for the caller to read into what it expects. A line
//! that is not a JSON-RPC message ends the conversation; a request of the
//! server's is answered (`ping`) or refused (everything else: ah offers
//! the server nothing), a bounded number of times per exchange.

use serde::Deserialize;
use serde_json::json;
use serde_json::value::RawValue;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::time::Instant;

/// The longest answer to a call: an image's base64 (at most 5 MB) with
/// room to spare.
pub const MAX_MESSAGE_BYTES: usize = 8 * 1024 * 1024;

/// How many requests of its own a server may make while ah waits for one
/// answer.
const MAX_SERVER_REQUESTS: usize = 64;

/// The longest id of a server's request ah echoes back.
const MAX_ID_BYTES: usize = 128;

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
    #[error("it sent a message longer than {} KiB", .0 / 1024)]
    TooLong(usize),
    #[error("it answered {what} with error {code}: {message}")]
    Rpc {
        what: String,
        code: i64,
        message: String,
    },
    #[error("it could not be started: {0}")]
    Start(std::io::Error),
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

/// When an exchange must be over, and the time it was given (for the
/// error that says so).
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    at: Instant,
    secs: u64,
}

impl Deadline {
    /// `secs` seconds from now.
    pub fn after(secs: u64) -> Deadline {
        Deadline::within(std::time::Duration::from_secs(secs))
    }

    /// `time` from now (said in whole seconds, rounded).
    pub fn within(time: std::time::Duration) -> Deadline {
        Deadline {
            at: Instant::now() + time,
            secs: time.as_secs_f64().round() as u64,
        }
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

/// What a line holds, read without building a tree of it (unknown fields
/// are skipped).
#[derive(Deserialize)]
struct Envelope<'a> {
    jsonrpc: Option<String>,
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    method: Option<String>,
    #[serde(borrow)]
    result: Option<&'a RawValue>,
    error: Option<RpcError>,
}

#[derive(Deserialize)]
struct RpcError {
    code: Option<i64>,
    message: Option<String>,
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

    /// Sends a notification (nothing comes back) before `deadline`.
    pub async fn notify(&mut self, method: &str, deadline: Deadline) -> Result<(), McpError> {
        let message = json!({"jsonrpc": "2.0", "method": method}).to_string();
        match tokio::time::timeout_at(deadline.at, self.send(&message)).await {
            Ok(sent) => sent,
            Err(_) => Err(timeout(method, deadline)),
        }
    }

    /// Sends a request and waits until `deadline` for its answer's
    /// `result`, as raw JSON text of at most `max_bytes`.
    pub async fn request(
        &mut self,
        method: &str,
        params: serde_json::Value,
        deadline: Deadline,
        max_bytes: usize,
    ) -> Result<Box<RawValue>, McpError> {
        let exchange = self.exchange(method, params, max_bytes);
        match tokio::time::timeout_at(deadline.at, exchange).await {
            Ok(answer) => answer,
            Err(_) => Err(timeout(method, deadline)),
        }
    }

    async fn exchange(
        &mut self,
        method: &str,
        params: serde_json::Value,
        max_bytes: usize,
    ) -> Result<Box<RawValue>, McpError> {
        let id = self.next_id;
        self.next_id += 1;
        let what = method.to_string();
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send(&request.to_string()).await?;
        let mut requests = 0;
        loop {
            let line = match read_line(&mut self.reader, max_bytes).await {
                Err(ReadError::Closed) => return Err(McpError::Closed { what }),
                Err(ReadError::TooLong) => return Err(McpError::TooLong(max_bytes)),
                Err(ReadError::Io(err)) => return Err(McpError::Read(err)),
                Ok(line) => line,
            };
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let message = parse(&line)?;
            if let Some(method) = &message.method {
                // A request of the server's has an id and wants an answer;
                // a notification (logging, progress) is let go.
                if let Some(theirs) = message.id {
                    requests += 1;
                    let answer = server_request_answer(method, theirs, requests)?;
                    self.send(&answer).await?;
                }
                continue;
            }
            // An answer to another id (none is outstanding) is let go.
            if message.id.map(|theirs| theirs.get().trim()) != Some(id.to_string().as_str()) {
                continue;
            }
            if let Some(error) = message.error {
                let text = error.message.unwrap_or_else(|| "(no message)".into());
                return Err(McpError::Rpc {
                    what,
                    code: error.code.unwrap_or(0),
                    message: text.chars().take(2000).collect(),
                });
            }
            return message.result.map(RawValue::to_owned).ok_or_else(|| {
                McpError::Garbage(format!("its answer to {what} has neither result nor error"))
            });
        }
    }

    async fn send(&mut self, message: &str) -> Result<(), McpError> {
        let mut line = message.as_bytes().to_vec();
        line.push(b'\n');
        self.writer
            .write_all(&line)
            .await
            .map_err(McpError::Write)?;
        self.writer.flush().await.map_err(McpError::Write)
    }
}

/// The timeout error for `what`, which was to be over by `deadline`.
fn timeout(what: &str, deadline: Deadline) -> McpError {
    McpError::Timeout {
        what: what.to_string(),
        secs: deadline.secs,
    }
}

/// The answer to the server's `count`th request of one exchange: `ping`
/// answered, anything else refused.
fn server_request_answer(method: &str, id: &RawValue, count: usize) -> Result<String, McpError> {
    if count > MAX_SERVER_REQUESTS {
        return Err(McpError::Garbage(format!(
            "it sent more than {MAX_SERVER_REQUESTS} requests of its own while ah waited for \
             one answer"
        )));
    }
    let id = id.get().trim();
    let plain = id.len() <= MAX_ID_BYTES
        && (id.starts_with('"') || id.bytes().all(|b| b.is_ascii_digit() || b == b'-'));
    if !plain {
        return Err(McpError::Garbage(format!(
            "a request of its own has an id that is not a short string or number ({} bytes)",
            id.len()
        )));
    }
    Ok(match method {
        "ping" => format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#),
        _ => format!(
            r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32601,"message":"ah offers MCP servers no requests of their own"}}}}"#
        ),
    })
}

/// A JSON-RPC 2.0 message, or why `line` is none.
fn parse(line: &[u8]) -> Result<Envelope<'_>, McpError> {
    let quote = || {
        let text = String::from_utf8_lossy(line);
        let cut: String = text.chars().take(QUOTE_CHARS).collect();
        format!("{cut:?}{}", if cut.len() < text.len() { "…" } else { "" })
    };
    match serde_json::from_slice::<Envelope>(line) {
        Ok(message) if message.jsonrpc.as_deref() == Some("2.0") => Ok(message),
        Ok(_) => Err(McpError::Garbage(format!(
            "{} is not a JSON-RPC 2.0 message",
            quote()
        ))),
        Err(_) => Err(McpError::Garbage(format!(
            "{} is not a JSON-RPC message",
            quote()
        ))),
    }
}

enum ReadError {
    Closed,
    TooLong,
    Io(std::io::Error),
}

/// The next line, without its newline; at most `max` bytes.
async fn read_line(reader: &mut Reader, max: usize) -> Result<Vec<u8>, ReadError> {
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
        if line.len() + take > max {
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

/// A JSON array of which the first `N` items are read and the rest only
/// counted (skipped without being kept).
pub struct Capped<T, const N: usize> {
    pub items: Vec<T>,
    pub more: usize,
}

impl<'de, T: Deserialize<'de>, const N: usize> Deserialize<'de> for Capped<T, N> {
    fn deserialize<D: serde::Deserializer<'de>>(input: D) -> Result<Self, D::Error> {
        struct Visit<T, const N: usize>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>, const N: usize> serde::de::Visitor<'de> for Visit<T, N> {
            type Value = Capped<T, N>;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an array")
            }

            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Capped<T, N>, A::Error> {
                let mut items = Vec::new();
                while items.len() < N {
                    match seq.next_element()? {
                        Some(item) => items.push(item),
                        None => return Ok(Capped { items, more: 0 }),
                    }
                }
                let mut more = 0;
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {
                    more += 1;
                }
                Ok(Capped { items, more })
            }
        }
        input.deserialize_seq(Visit::<T, N>(std::marker::PhantomData))
    }
}
