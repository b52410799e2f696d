//! The proxy on loopback: a target server on 127.0.0.1, the proxy served on
//! another loopback port, and raw HTTP from a client.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;

/// A target that answers every connection with `hello` and closes.
async fn target() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("bind target: {e}"));
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let _ = stream.write_all(b"hello").await;
        }
    });
    port
}

/// A proxy allowing `rules`, its port, and its log file.
fn start_proxy(rules: &[String]) -> (Proxy, u16, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let allow = Allowlist::parse(rules).unwrap_or_else(|e| panic!("{e}"));
    let proxy =
        Proxy::new(allow, &dir.path().join("network.log")).unwrap_or_else(|e| panic!("proxy: {e}"));
    let listener =
        std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("bind: {e}"));
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    proxy
        .serve(listener)
        .unwrap_or_else(|e| panic!("serve: {e}"));
    (proxy, port, dir)
}

/// Sends `request` to the proxy and reads everything it answers.
async fn ask(port: u16, request: &[u8]) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap_or_else(|e| panic!("connect proxy: {e}"));
    let _ = stream.write_all(request).await;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer)).await;
    String::from_utf8_lossy(&answer).into_owned()
}

fn log_of(dir: &tempfile::TempDir) -> String {
    std::fs::read_to_string(dir.path().join("network.log")).unwrap_or_default()
}

#[tokio::test]
async fn an_allowed_target_is_tunnelled_and_logged() {
    let port = target().await;
    let (proxy, proxy_port, dir) = start_proxy(&[format!("127.0.0.1:{port}")]);
    let answer = ask(
        proxy_port,
        format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes(),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("hello"), "{answer}");
    let decisions = proxy.take_decisions();
    assert_eq!(decisions.len(), 1, "{decisions:?}");
    assert!(decisions[0].allowed);
    assert_eq!(decisions[0].target, format!("127.0.0.1:{port}"));
    let log = log_of(&dir);
    assert!(
        log.contains(&format!(
            " allow 127.0.0.1:{port} allowed by 127.0.0.1:{port}"
        )),
        "{log}"
    );
    assert!(proxy.take_decisions().is_empty());
}

#[tokio::test]
async fn other_targets_methods_and_huge_heads_are_refused() {
    let port = target().await;
    let (proxy, proxy_port, dir) = start_proxy(&[format!("127.0.0.1:{port}")]);
    let other = port.wrapping_add(1).max(1);
    let answer = ask(
        proxy_port,
        format!("CONNECT 127.0.0.1:{other} HTTP/1.1\r\n\r\n").as_bytes(),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    assert!(answer.contains("no network allow rule matches"), "{answer}");
    let answer = ask(
        proxy_port,
        format!("GET http://127.0.0.1:{port}/ HTTP/1.1\r\n\r\n").as_bytes(),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    assert!(answer.contains("only CONNECT"), "{answer}");
    let huge = format!(
        "CONNECT 127.0.0.1:{port} HTTP/1.1\r\nX: {}\r\n\r\n",
        "a".repeat(MAX_HEAD)
    );
    let answer = ask(proxy_port, huge.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
    let decisions = proxy.take_decisions();
    assert_eq!(decisions.len(), 3, "{decisions:?}");
    assert!(decisions.iter().all(|d| !d.allowed));
    let log = log_of(&dir);
    assert_eq!(
        log.lines().filter(|l| l.contains(" deny ")).count(),
        3,
        "{log}"
    );
    // A client cannot forge log lines.
    let _ = ask(proxy_port, b"CONNECT a\nfake allow line:1 HTTP/1.1\r\n\r\n").await;
    assert!(!log_of(&dir).lines().any(|l| l.starts_with("fake")));
}

#[tokio::test]
async fn a_name_that_resolves_to_loopback_needs_the_address_named() {
    let port = target().await;
    // `localhost` resolves to loopback: a name rule is not enough.
    let (proxy, proxy_port, _dir) = start_proxy(&[format!("localhost:{port}")]);
    let answer = ask(
        proxy_port,
        format!("CONNECT localhost:{port} HTTP/1.1\r\n\r\n").as_bytes(),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    assert!(
        answer.contains("loopback, link-local or private"),
        "{answer}"
    );
    assert!(proxy.take_decisions().iter().all(|d| !d.allowed));
    // Naming the addresses it resolves to allows it.
    let (_proxy, proxy_port, _dir) = start_proxy(&[
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
    ]);
    let answer = ask(
        proxy_port,
        format!("CONNECT localhost:{port} HTTP/1.1\r\n\r\n").as_bytes(),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[test]
fn heads_end_at_the_first_blank_line() {
    assert_eq!(head_end(b"CONNECT a:1 HTTP/1.1\r\n\r\nrest"), Some(24));
    assert_eq!(head_end(b"CONNECT a:1 HTTP/1.1\n\nrest"), Some(22));
    assert_eq!(head_end(b"CONNECT a:1 HTTP/1.1\r\n"), None);
    assert_eq!(shown("a\nb\u{7f}c"), "a?b?c");
}

#[tokio::test]
async fn both_sides_of_a_tunnel_send_small_writes_at_once() {
    let port = target().await;
    let upstream = connect_first(&[SocketAddr::from(([127, 0, 0, 1], port))])
        .await
        .unwrap_or_else(|e| panic!("connect: {e}"));
    assert!(upstream.nodelay().unwrap_or(false), "the target's side");
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("bind: {e}"));
    let address = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
    let _client = TcpStream::connect(address).await;
    let accepted = accept(&listener)
        .await
        .unwrap_or_else(|e| panic!("accept: {e}"));
    assert!(accepted.nodelay().unwrap_or(false), "the sandbox's side");
}
