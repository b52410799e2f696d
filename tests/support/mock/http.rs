//! Just enough HTTP/1.1 for the mock: reading requests (Content-Length or
//! chunked bodies, several per keep-alive connection) and writing fixed-length
//! or chunked responses.

use std::collections::BTreeMap;
use std::io;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// Longest request head (request line and headers) the mock accepts.
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Largest request body the mock accepts.
const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

/// A request as read off the wire.
pub(super) struct RawRequest {
    pub(super) method: String,
    pub(super) path: String,
    /// Lowercase names; repeated headers joined with ", ".
    pub(super) headers: BTreeMap<String, String>,
    pub(super) body: Vec<u8>,
}

impl RawRequest {
    /// Whether the client asked to close the connection after this exchange.
    pub(super) fn wants_close(&self) -> bool {
        self.headers
            .get("connection")
            .is_some_and(|value| value.eq_ignore_ascii_case("close"))
    }
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

/// Reads one CRLF- (or LF-) terminated line, without its terminator.
/// `Ok(None)` means the peer closed the connection before sending anything.
async fn read_line(
    reader: &mut BufReader<TcpStream>,
    budget: &mut usize,
) -> io::Result<Option<String>> {
    let mut line = Vec::new();
    let read = reader.read_until(b'\n', &mut line).await?;
    if read == 0 {
        return Ok(None);
    }
    *budget = budget
        .checked_sub(read)
        .ok_or_else(|| invalid(format!("request head longer than {MAX_HEAD_BYTES} bytes")))?;
    while matches!(line.last(), Some(b'\n' | b'\r')) {
        line.pop();
    }
    String::from_utf8(line)
        .map(Some)
        .map_err(|_| invalid("request head is not UTF-8".to_string()))
}

/// Reads the next request on the connection; `Ok(None)` when the client
/// closed it cleanly between requests.
pub(super) async fn read_request(
    reader: &mut BufReader<TcpStream>,
) -> io::Result<Option<RawRequest>> {
    let mut budget = MAX_HEAD_BYTES;
    let Some(request_line) = read_line(reader, &mut budget).await? else {
        return Ok(None);
    };
    let mut parts = request_line.split_whitespace();
    let (Some(method), Some(path)) = (parts.next(), parts.next()) else {
        return Err(invalid(format!("malformed request line {request_line:?}")));
    };
    let (method, path) = (method.to_string(), path.to_string());

    let mut headers: BTreeMap<String, String> = BTreeMap::new();
    loop {
        let line = read_line(reader, &mut budget)
            .await?
            .ok_or_else(|| invalid("connection closed inside the request head".to_string()))?;
        if line.is_empty() {
            break;
        }
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| invalid(format!("malformed header line {line:?}")))?;
        let name = name.trim().to_ascii_lowercase();
        let value = value.trim().to_string();
        headers
            .entry(name)
            .and_modify(|existing| {
                existing.push_str(", ");
                existing.push_str(&value);
            })
            .or_insert(value);
    }

    let chunked = headers
        .get("transfer-encoding")
        .is_some_and(|value| value.to_ascii_lowercase().contains("chunked"));
    let body = if chunked {
        read_chunked_body(reader).await?
    } else {
        let length = match headers.get("content-length") {
            Some(value) => value
                .parse::<usize>()
                .map_err(|_| invalid(format!("bad content-length {value:?}")))?,
            None => 0,
        };
        if length > MAX_BODY_BYTES {
            return Err(invalid(format!(
                "request body of {length} bytes is too large"
            )));
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).await?;
        body
    };
    Ok(Some(RawRequest {
        method,
        path,
        headers,
        body,
    }))
}

async fn read_chunked_body(reader: &mut BufReader<TcpStream>) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut budget = MAX_HEAD_BYTES;
        let line = read_line(reader, &mut budget)
            .await?
            .ok_or_else(|| invalid("connection closed inside a chunked body".to_string()))?;
        let size_text = line.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| invalid(format!("bad chunk size line {line:?}")))?;
        if size == 0 {
            // Trailers, up to the empty line that ends the body.
            while read_line(reader, &mut budget)
                .await?
                .is_some_and(|trailer| !trailer.is_empty())
            {}
            return Ok(body);
        }
        if body.len() + size > MAX_BODY_BYTES {
            return Err(invalid("chunked request body is too large".to_string()));
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader.read_exact(&mut body[start..]).await?;
        let mut crlf = [0u8; 2];
        reader.read_exact(&mut crlf).await?;
        if &crlf != b"\r\n" {
            return Err(invalid("chunk data not followed by CRLF".to_string()));
        }
    }
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        413 => "Payload Too Large",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        529 => "Overloaded",
        _ => "Status",
    }
}

fn head(status: u16, headers: &[(&str, String)]) -> String {
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason_phrase(status));
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    head
}

/// Writes a complete response with a Content-Length body.
pub(super) async fn write_fixed<W: AsyncWrite + Unpin>(
    out: &mut W,
    status: u16,
    mut headers: Vec<(&str, String)>,
    body: &[u8],
) -> io::Result<()> {
    headers.push(("content-length", body.len().to_string()));
    let mut bytes = head(status, &headers).into_bytes();
    bytes.extend_from_slice(body);
    out.write_all(&bytes).await?;
    out.flush().await
}

/// Writes the head of a `transfer-encoding: chunked` response.
pub(super) async fn write_chunked_head<W: AsyncWrite + Unpin>(
    out: &mut W,
    status: u16,
    mut headers: Vec<(&str, String)>,
) -> io::Result<()> {
    headers.push(("transfer-encoding", "chunked".to_string()));
    out.write_all(head(status, &headers).as_bytes()).await?;
    out.flush().await
}

/// Writes one non-empty body chunk and flushes it onto the wire.
pub(super) async fn write_chunk<W: AsyncWrite + Unpin>(out: &mut W, data: &[u8]) -> io::Result<()> {
    let mut bytes = format!("{:x}\r\n", data.len()).into_bytes();
    bytes.extend_from_slice(data);
    bytes.extend_from_slice(b"\r\n");
    out.write_all(&bytes).await?;
    out.flush().await
}

/// Ends a chunked body.
pub(super) async fn write_last_chunk<W: AsyncWrite + Unpin>(out: &mut W) -> io::Result<()> {
    out.write_all(b"0\r\n\r\n").await?;
    out.flush().await
}
