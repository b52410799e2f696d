//! The test client side: sends requests to the mock with reqwest or a raw
//! socket and keeps what arrived, chunk by chunk with timings, so tests can
//! parse it as server-sent events.

use std::convert::Infallible;
use std::io::{BufRead, BufReader, Read};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use bytes::Bytes;
use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::support::mock::MockServer;

/// What a client saw of one response.
pub(super) struct Seen {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    /// Body pieces as they arrived, with the time since the request was sent.
    pub chunks: Vec<(Duration, Bytes)>,
    /// The transport error that ended the body early, if any.
    pub error: Option<String>,
}

impl Seen {
    pub(super) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }

    pub(super) fn body(&self) -> Vec<u8> {
        self.chunks
            .iter()
            .flat_map(|(_, chunk)| chunk.to_vec())
            .collect()
    }

    pub(super) fn json(&self) -> Value {
        serde_json::from_slice(&self.body()).expect("body is JSON")
    }

    /// Parses the body, chunk by chunk as it arrived, as server-sent events.
    pub(super) fn events(&self) -> Vec<(String, Value)> {
        let pieces: Vec<Result<Bytes, Infallible>> = self
            .chunks
            .iter()
            .map(|(_, chunk)| Ok(chunk.clone()))
            .collect();
        block_on(
            futures_util::stream::iter(pieces)
                .eventsource()
                .collect::<Vec<_>>(),
        )
        .into_iter()
        .map(|event| {
            let event = event.expect("valid SSE");
            let data: Value = serde_json::from_str(&event.data).expect("event data is JSON");
            assert_eq!(
                data["type"],
                event.event.as_str(),
                "event name matches data type"
            );
            (event.event, data)
        })
        .collect()
    }

    pub(super) fn event_names(&self) -> Vec<String> {
        self.events().into_iter().map(|(name, _)| name).collect()
    }
}

pub(super) fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(future)
}

pub(super) fn messages_body() -> Value {
    json!({
        "model": "claude-test-model",
        "max_tokens": 1024,
        "stream": true,
        "messages": [{"role": "user", "content": "hi"}],
    })
}

pub(super) async fn send(
    client: &reqwest::Client,
    url: &str,
    body: &Value,
    idle: Option<Duration>,
) -> Seen {
    send_to(client, &format!("{url}/v1/messages"), body, idle).await
}

/// Sends `body` as a POST to `endpoint` (a full URL) and keeps what comes
/// back; `idle` ends the body early after that long without a chunk.
pub(super) async fn send_to(
    client: &reqwest::Client,
    endpoint: &str,
    body: &Value,
    idle: Option<Duration>,
) -> Seen {
    let started = Instant::now();
    let mut response = client
        .post(endpoint)
        .header("x-api-key", "test-key")
        .header("anthropic-version", "2023-06-01")
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .expect("mock answers");
    let mut seen = Seen {
        status: response.status().as_u16(),
        headers: response.headers().clone(),
        chunks: Vec::new(),
        error: None,
    };
    loop {
        let next = match idle {
            Some(limit) => match tokio::time::timeout(limit, response.chunk()).await {
                Ok(next) => next,
                Err(_) => {
                    seen.error = Some(format!("idle for {limit:?}"));
                    return seen;
                }
            },
            None => response.chunk().await,
        };
        match next {
            Ok(Some(chunk)) => seen.chunks.push((started.elapsed(), chunk)),
            Ok(None) => return seen,
            Err(err) => {
                seen.error = Some(err.to_string());
                return seen;
            }
        }
    }
}

/// Sends one streaming request with a fresh client.
pub(super) fn post(mock: &MockServer) -> Seen {
    block_on(send(
        &reqwest::Client::new(),
        &mock.url(),
        &messages_body(),
        None,
    ))
}

/// Sends `body` to `route` of the mock (`/v1/messages`,
/// `/v1/chat/completions`) with a fresh client.
pub(super) fn post_body(mock: &MockServer, route: &str, body: &Value) -> Seen {
    block_on(send_to(
        &reqwest::Client::new(),
        &format!("{}{route}", mock.url()),
        body,
        None,
    ))
}

/// The deltas of block `index`, in order.
pub(super) fn deltas(events: &[(String, Value)], index: u64) -> Vec<Value> {
    events
        .iter()
        .filter(|(name, data)| name == "content_block_delta" && data["index"] == index)
        .map(|(_, data)| data["delta"].clone())
        .collect()
}

/// Reads one HTTP/1.1 response off a raw socket: status, then the body
/// (Content-Length or chunked).
pub(super) fn read_raw_response(reader: &mut BufReader<TcpStream>) -> (u16, Vec<u8>) {
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let status: u16 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    let (mut length, mut chunked) = (0, false);
    loop {
        line.clear();
        reader.read_line(&mut line).unwrap();
        let header = line.trim_end().to_ascii_lowercase();
        if header.is_empty() {
            break;
        }
        if let Some(value) = header.strip_prefix("content-length: ") {
            length = value.parse().unwrap();
        }
        chunked |= header == "transfer-encoding: chunked";
    }
    let mut body = Vec::new();
    if !chunked {
        body.resize(length, 0);
        reader.read_exact(&mut body).unwrap();
        return (status, body);
    }
    loop {
        line.clear();
        reader.read_line(&mut line).unwrap();
        let size = usize::from_str_radix(line.trim_end(), 16).unwrap();
        let mut data = vec![0; size + 2];
        reader.read_exact(&mut data).unwrap();
        if size == 0 {
            return (status, body);
        }
        body.extend_from_slice(&data[..size]);
    }
}
