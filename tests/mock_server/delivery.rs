//! How the mock delivers answers: HTTP errors, cut and stalled streams,
//! chunking and delays, script bookkeeping, request recording, keep-alive
//! connections and shutdown.

use std::io::{BufReader, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::client::{block_on, deltas, messages_body, post, read_raw_response, send};
use crate::support::mock::{MockServer, Reply, Turn};

#[test]
fn http_errors_carry_the_api_error_body_and_retry_after() {
    let mock = MockServer::start(vec![
        Turn::error(529, "overloaded_error", "Overloaded").retry_after(3),
        Turn::error(400, "invalid_request_error", "prompt is too long"),
    ]);
    let overloaded = post(&mock);
    assert_eq!(overloaded.status, 529);
    assert_eq!(overloaded.header("retry-after"), Some("3"));
    assert_eq!(overloaded.header("content-type"), Some("application/json"));
    assert_eq!(
        overloaded.json(),
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    );
    let invalid = post(&mock);
    assert_eq!(invalid.status, 400);
    assert_eq!(invalid.header("retry-after"), None);
    assert_eq!(invalid.json()["error"]["message"], "prompt is too long");
}

#[test]
fn cut_closes_the_connection_mid_body() {
    let mock = MockServer::start(vec![Turn::cut(Reply::new().text("partial answer"), 4)]);
    let seen = post(&mock);
    assert_eq!(seen.status, 200);
    assert!(seen.error.is_some(), "the client sees an incomplete body");
    assert_eq!(
        seen.event_names(),
        ["message_start", "ping", "content_block_start", "ping"]
    );
}

#[test]
fn stall_goes_silent_then_resumes() {
    let pause = Duration::from_millis(600);
    let mock = MockServer::start(vec![
        Turn::stall(Reply::new().text("slow"), 2, pause),
        Turn::stall(Reply::new().text("slow"), 2, Duration::from_secs(30)),
    ]);
    let patient = post(&mock);
    assert_eq!(patient.error, None);
    assert_eq!(patient.events().last().unwrap().0, "message_stop");
    // The longest silence falls right after the second event.
    let (gap, after) = (1..patient.chunks.len())
        .map(|i| (patient.chunks[i].0 - patient.chunks[i - 1].0, i))
        .max()
        .unwrap();
    assert!(
        gap >= pause - Duration::from_millis(50),
        "longest gap {gap:?}"
    );
    let before: Vec<u8> = patient.chunks[..after]
        .iter()
        .flat_map(|(_, c)| c.to_vec())
        .collect();
    assert_eq!(
        String::from_utf8(before).unwrap().matches("\n\n").count(),
        2
    );

    let client = reqwest::Client::new();
    let idle = Duration::from_millis(300);
    let impatient = block_on(send(&client, &mock.url(), &messages_body(), Some(idle)));
    assert_eq!(impatient.error.as_deref(), Some("idle for 300ms"));
    assert_eq!(impatient.event_names(), ["message_start", "ping"]);
}

#[test]
fn chunks_respect_size_even_inside_characters_and_delay() {
    let text = "naïve café ünï";
    let mock = MockServer::start(vec![
        Turn::reply(Reply::new().text(text)).chunk_size(5),
        Turn::reply(Reply::new().text(text))
            .chunk_size(100)
            .delay_ms(20),
    ]);
    let small = post(&mock);
    assert!(small.chunks.len() > 1);
    assert!(small.chunks.iter().all(|(_, chunk)| chunk.len() <= 5));
    let joined: String = deltas(&small.events(), 0)
        .iter()
        .map(|d| d["text"].as_str().unwrap())
        .collect();
    assert_eq!(joined, text);

    let slow = post(&mock);
    let gaps = slow.body().len().div_ceil(100) as u32 - 1;
    let total = slow.chunks.last().unwrap().0;
    assert!(
        total >= Duration::from_millis(20) * gaps,
        "{gaps} gaps took {total:?}"
    );
    assert_eq!(slow.events().last().unwrap().0, "message_stop");
}

#[test]
fn exhausted_script_fails_clearly() {
    let mock = MockServer::start(vec![Turn::reply(Reply::new().text("only one"))]);
    assert_eq!(post(&mock).status, 200);
    let extra = post(&mock);
    assert_eq!(extra.status, 400, "a client must not retry it");
    assert_eq!(extra.json()["type"], "error");
    let message = extra.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.starts_with("mock script exhausted: request 2 has no scripted turn"),
        "{message}"
    );
}

#[test]
fn turns_pushed_while_running_are_served_in_order_on_one_client() {
    let mock = MockServer::start(Vec::new());
    mock.push(Turn::reply(Reply::new().text("first")));
    mock.push(Turn::error(429, "rate_limit_error", "slow down").retry_after(0));
    mock.push(Turn::reply(Reply::new().text("third")));
    assert_eq!(mock.pending_turns(), 3);

    let client = reqwest::Client::new();
    let statuses = block_on(async {
        let mut statuses = Vec::new();
        for _ in 0..3 {
            statuses.push(
                send(&client, &mock.url(), &messages_body(), None)
                    .await
                    .status,
            );
        }
        statuses
    });
    assert_eq!(statuses, [200, 429, 200]);
    assert_eq!(mock.pending_turns(), 0);
}

#[test]
fn requests_are_recorded_with_lowercase_headers_and_json_body() {
    let mock = MockServer::start(vec![Turn::reply(Reply::new().text("ok"))]);
    let url = mock.url();
    let sender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        block_on(send(&reqwest::Client::new(), &url, &messages_body(), None)).status
    });
    let requests = mock.wait_for_requests(1, Duration::from_secs(10));
    assert_eq!(sender.join().unwrap(), 200);

    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(
        (request.method.as_str(), request.path.as_str()),
        ("POST", "/v1/messages")
    );
    assert_eq!(request.header("X-API-Key"), Some("test-key"));
    assert_eq!(
        request.headers.get("anthropic-version").map(String::as_str),
        Some("2023-06-01")
    );
    assert_eq!(request.body, messages_body());
}

#[test]
#[should_panic(expected = "mock: expected 1 requests within 50ms, got 0")]
fn waiting_for_requests_that_never_come_fails() {
    let mock = MockServer::start(Vec::new());
    mock.wait_for_requests(1, Duration::from_millis(50));
}

#[test]
fn unknown_routes_and_non_streaming_requests_do_not_use_turns() {
    let mock = MockServer::start(vec![Turn::reply(Reply::new().text("kept"))]);
    let client = reqwest::Client::new();
    let (route, non_streaming) = block_on(async {
        let route = client
            .get(format!("{}/v1/models", mock.url()))
            .send()
            .await
            .unwrap()
            .status();
        let mut body = messages_body();
        body["stream"] = json!(false);
        let non_streaming = send(&client, &mock.url(), &body, None).await;
        (route.as_u16(), non_streaming)
    });
    assert_eq!(route, 404);
    assert_eq!(non_streaming.status, 400);
    assert_eq!(
        non_streaming.json()["error"]["type"],
        "invalid_request_error"
    );
    assert_eq!(mock.pending_turns(), 1);
    assert_eq!(mock.requests().len(), 2);
}

#[test]
fn one_keep_alive_connection_serves_several_requests() {
    let mock = MockServer::start(vec![
        Turn::reply(Reply::new().text("streamed")).chunk_size(7),
        Turn::error(503, "api_error", "try later"),
    ]);
    let address = mock.url().trim_start_matches("http://").to_string();
    let stream = TcpStream::connect(&address).unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;

    let body = messages_body().to_string();
    let first = format!(
        "POST /v1/messages HTTP/1.1\r\nHost: {address}\r\nX-Api-Key: raw-key\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    writer.write_all(first.as_bytes()).unwrap();
    let (status, streamed) = read_raw_response(&mut reader);
    assert_eq!(status, 200);
    assert!(
        String::from_utf8(streamed)
            .unwrap()
            .ends_with("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
    );

    let (head, tail) = body.split_at(10);
    let second = format!(
        "POST /v1/messages HTTP/1.1\r\nHost: {address}\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{head}\r\n{:x}\r\n{tail}\r\n0\r\n\r\n",
        head.len(),
        tail.len()
    );
    writer.write_all(second.as_bytes()).unwrap();
    let (status, error) = read_raw_response(&mut reader);
    assert_eq!(status, 503);
    assert_eq!(
        serde_json::from_slice::<Value>(&error).unwrap()["error"]["message"],
        "try later"
    );

    let requests = mock.requests();
    assert_eq!(requests[0].header("x-api-key"), Some("raw-key"));
    assert_eq!(requests[1].body, messages_body());
}

#[test]
fn dropping_the_server_closes_stalled_streams_and_the_port() {
    let mock = MockServer::start(vec![Turn::stall(
        Reply::new().text("never"),
        2,
        Duration::from_secs(60),
    )]);
    let address = mock.url().trim_start_matches("http://").to_string();
    let client = reqwest::Client::new();
    let seen = block_on(async {
        let url = mock.url();
        let request =
            tokio::spawn(async move { send(&client, &url, &messages_body(), None).await });
        // Wait until the stall has begun, then stop the server under the client.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let dropped = Instant::now();
        drop(mock);
        assert!(
            dropped.elapsed() < Duration::from_secs(2),
            "drop returns promptly"
        );
        request.await.unwrap()
    });
    assert_eq!(seen.event_names(), ["message_start", "ping"]);
    assert!(
        seen.error.is_some(),
        "the stalled body ends in an error, not a clean end"
    );
    assert!(
        TcpStream::connect(&address).is_err(),
        "nothing listens after drop"
    );
}
