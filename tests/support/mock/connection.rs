//! One client connection: reads requests in turn (keep-alive), and plays
//! each one's answer onto the socket in the format of the API it came in on:
//! an error body, or a scripted SSE stream with its chunking, delays, stall,
//! cut or error event.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::BufReader;
use tokio::net::TcpStream;

use super::script::{ApiError, StreamEnd, Turn, TurnKind, Wire};
use super::{Answer, Shared, http, openai_sse, sse};

/// Serves requests on one connection until the client closes it, asks to
/// close, or a turn cuts it.
pub(super) async fn serve(stream: TcpStream, shared: Arc<Shared>) {
    // Small writes must leave at once for chunk and delay timing to mean anything.
    let _ = stream.set_nodelay(true);
    let mut reader = BufReader::new(stream);
    loop {
        let raw = match http::read_request(&mut reader).await {
            Ok(Some(raw)) => raw,
            Ok(None) => return,
            Err(err) => {
                let error = ApiError {
                    kind: "invalid_request_error".to_string(),
                    message: format!("mock: cannot parse the request: {err}"),
                };
                let _ = write_error(
                    reader.get_mut(),
                    Wire::Anthropic,
                    400,
                    &error,
                    None,
                    true,
                    "req_mock_bad",
                )
                .await;
                return;
            }
        };
        let close = raw.wants_close();
        let answer = shared.accept(raw);
        let keep_open = match answer {
            Answer::Reject {
                wire,
                status,
                error,
            } => write_error(
                reader.get_mut(),
                wire,
                status,
                &error,
                None,
                close,
                "req_mock_rejected",
            )
            .await
            .is_ok(),
            Answer::Scripted {
                wire,
                turn,
                number,
                model,
            } => answer_turn(reader.get_mut(), wire, &turn, number, &model, close).await,
        };
        if !keep_open || close {
            return;
        }
    }
}

fn common_headers(
    content_type: &str,
    request_id: &str,
    close: bool,
) -> Vec<(&'static str, String)> {
    let mut headers = vec![
        ("content-type", content_type.to_string()),
        ("request-id", request_id.to_string()),
    ];
    if close {
        headers.push(("connection", "close".to_string()));
    }
    headers
}

async fn write_error(
    out: &mut TcpStream,
    wire: Wire,
    status: u16,
    error: &ApiError,
    retry_after: Option<u64>,
    close: bool,
    request_id: &str,
) -> std::io::Result<()> {
    let mut headers = common_headers("application/json", request_id, close);
    if let Some(seconds) = retry_after {
        headers.push(("retry-after", seconds.to_string()));
    }
    http::write_fixed(
        out,
        status,
        headers,
        error.body(wire).to_string().as_bytes(),
    )
    .await
}

/// Plays one scripted turn; returns whether the connection can serve another
/// request.
async fn answer_turn(
    out: &mut TcpStream,
    wire: Wire,
    turn: &Turn,
    number: usize,
    model: &str,
    close: bool,
) -> bool {
    let request_id = format!("req_mock_{number}");
    let (reply, end) = match &turn.kind {
        TurnKind::HttpError {
            status,
            error,
            retry_after,
        } => {
            return write_error(out, wire, *status, error, *retry_after, close, &request_id)
                .await
                .is_ok();
        }
        TurnKind::Stream { reply, end } => (reply, end),
    };

    let frames = match wire {
        Wire::Anthropic => sse::render(turn, reply, &format!("msg_mock_{number}"), model),
        Wire::OpenAi => openai_sse::render(turn, reply, &format!("chatcmpl-mock-{number}"), model),
    };
    let upto = |after: &usize| (*after).min(frames.len());
    // Segments of frames, each preceded by a pause, and whether the body ends cleanly.
    let (segments, finish): (Vec<(Duration, Vec<String>)>, bool) = match end {
        StreamEnd::Complete => (vec![(Duration::ZERO, frames.clone())], true),
        StreamEnd::Cut { after } => (
            vec![(Duration::ZERO, frames[..upto(after)].to_vec())],
            false,
        ),
        StreamEnd::Stall { after, pause } => (
            vec![
                (Duration::ZERO, frames[..upto(after)].to_vec()),
                (*pause, frames[upto(after)..].to_vec()),
            ],
            true,
        ),
        StreamEnd::Error { after, error } => {
            let mut sent = frames[..upto(after)].to_vec();
            sent.push(match wire {
                Wire::Anthropic => sse::frame(&error.body(wire)),
                Wire::OpenAi => openai_sse::frame(&error.body(wire)),
            });
            (vec![(Duration::ZERO, sent)], true)
        }
    };

    let mut headers = common_headers("text/event-stream", &request_id, close);
    headers.push(("cache-control", "no-cache".to_string()));
    if http::write_chunked_head(out, 200, headers).await.is_err() {
        return false;
    }
    let mut first_chunk = true;
    for (pause, frames) in segments {
        pace(pause).await;
        for chunk in chunks(&frames, turn.chunk_size) {
            if !first_chunk {
                pace(turn.delay).await;
            }
            first_chunk = false;
            if http::write_chunk(out, &chunk).await.is_err() {
                return false;
            }
        }
    }
    finish && http::write_last_chunk(out).await.is_ok()
}

/// Waits `pause`; no pause at all when it is zero (tokio's timer would still
/// wait for its next tick, a millisecond, and a reply of twenty events would
/// take twenty of them).
async fn pace(pause: Duration) {
    if !pause.is_zero() {
        tokio::time::sleep(pause).await;
    }
}

/// The body chunks for `frames`: one per frame, or fixed-size byte slices of
/// their concatenation (which may split a frame, or a UTF-8 character).
fn chunks(frames: &[String], chunk_size: Option<usize>) -> Vec<Vec<u8>> {
    match chunk_size {
        None => frames
            .iter()
            .map(|frame| frame.as_bytes().to_vec())
            .collect(),
        Some(size) => frames
            .concat()
            .as_bytes()
            .chunks(size)
            .map(<[u8]>::to_vec)
            .collect(),
    }
}
