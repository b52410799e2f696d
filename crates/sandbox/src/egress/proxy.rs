//! The egress proxy: one per run, on the host, serving the sandbox's
//! `127.0.0.1:PROXY_PORT`. It takes only `CONNECT host:port` requests whose
//! target an allowlist rule covers; anything else gets `403` (a head larger
//! than [`MAX_HEAD`] gets `431`). A name is resolved here, every address it
//! resolves to is checked, and the tunnel goes to a checked address, never
//! to a second resolution: a name that leads to this host or a local
//! network (DNS rebinding) is refused unless a rule names that address by
//! its number. Every decision is a line of `network.log` and an
//! [`EgressDecision`] for the run's events.

use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::task::{JoinHandle, JoinSet};

use super::allow::{Allowlist, Target, TargetHost, is_internal};
use ah_base::format_rfc3339;
use ah_base::redact;

/// The largest request head (request line and headers) read.
pub const MAX_HEAD: usize = 8 * 1024;

/// How long a client has to send its request head, and the proxy to
/// resolve and connect.
const STEP_TIMEOUT: Duration = Duration::from_secs(10);

/// Longest request text kept in a log line or event.
const SHOWN_CHARS: usize = 200;

/// One request the proxy decided on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EgressDecision {
    /// `host:port` as asked (or the request line, when it names none).
    pub target: String,
    pub allowed: bool,
    /// The rule that allowed it and where the tunnel went, or why not.
    pub reason: String,
}

/// The running proxy of one run.
pub struct Proxy {
    shared: Arc<Shared>,
    decisions: Mutex<mpsc::UnboundedReceiver<EgressDecision>>,
    accept: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy").finish_non_exhaustive()
    }
}

struct Shared {
    allow: Allowlist,
    log: Mutex<std::fs::File>,
    sender: mpsc::UnboundedSender<EgressDecision>,
}

impl Shared {
    /// Logs a decision and hands it to the run.
    fn record(&self, target: &str, allowed: bool, reason: &str) {
        let decision = EgressDecision {
            target: redact::text(&shown(target)).into_owned(),
            allowed,
            reason: redact::text(reason).into_owned(),
        };
        let verdict = if allowed { "allow" } else { "deny" };
        let line = format!(
            "{} {verdict} {} {}\n",
            format_rfc3339(SystemTime::now()),
            decision.target,
            decision.reason
        );
        if let Ok(mut log) = self.log.lock() {
            // The event still carries the decision when the log cannot.
            let _ = log.write_all(line.as_bytes());
        }
        let _ = self.sender.send(decision);
    }
}

impl Proxy {
    /// A proxy enforcing `allow`, appending its decisions to `log_path`.
    /// It serves nothing until [`Proxy::serve`] gives it a listener.
    pub fn new(allow: Allowlist, log_path: &Path) -> std::io::Result<Proxy> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log_path)?;
        let (sender, receiver) = mpsc::unbounded_channel();
        Ok(Proxy {
            shared: Arc::new(Shared {
                allow,
                log: Mutex::new(log),
                sender,
            }),
            decisions: Mutex::new(receiver),
            accept: Mutex::new(None),
        })
    }

    /// Serves the connections `listener` accepts, instead of any listener
    /// served before (which is closed with its connections).
    pub fn serve(&self, listener: std::net::TcpListener) -> std::io::Result<()> {
        listener.set_nonblocking(true)?;
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let task = tokio::spawn(accept_loop(listener, Arc::clone(&self.shared)));
        if let Ok(mut accept) = self.accept.lock()
            && let Some(old) = accept.replace(task)
        {
            old.abort();
        }
        Ok(())
    }

    /// The decisions made since the last call, oldest first.
    pub fn take_decisions(&self) -> Vec<EgressDecision> {
        let mut taken = Vec::new();
        if let Ok(mut decisions) = self.decisions.lock() {
            while let Ok(decision) = decisions.try_recv() {
                taken.push(decision);
            }
        }
        taken
    }
}

impl Drop for Proxy {
    /// Closes the listener and every tunnel.
    fn drop(&mut self) {
        if let Ok(mut accept) = self.accept.lock()
            && let Some(task) = accept.take()
        {
            task.abort();
        }
    }
}

/// Accepts connections; aborting the task drops every connection with it.
async fn accept_loop(listener: tokio::net::TcpListener, shared: Arc<Shared>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = accept(&listener) => match accepted {
                Ok(stream) => {
                    connections.spawn(handle(stream, Arc::clone(&shared)));
                }
                // Out of descriptors or the like: wait instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// The next connection from the sandbox, set to send small writes at once.
async fn accept(listener: &tokio::net::TcpListener) -> std::io::Result<TcpStream> {
    let (stream, _) = listener.accept().await?;
    no_delay(&stream);
    Ok(stream)
}

/// Why a request head could not be read.
enum HeadError {
    TooLarge,
    /// Closed, failed, or never finished: nothing was asked.
    Gone,
}

/// Reads up to the blank line that ends the head; returns the head and
/// whatever came after it.
async fn read_head(client: &mut TcpStream) -> Result<(String, Vec<u8>), HeadError> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        if let Some(end) = head_end(&buf) {
            let rest = buf.split_off(end);
            return Ok((String::from_utf8_lossy(&buf).into_owned(), rest));
        }
        if buf.len() > MAX_HEAD {
            return Err(HeadError::TooLarge);
        }
        match client.read(&mut chunk).await {
            Ok(0) | Err(_) => return Err(HeadError::Gone),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// The offset just past `\r\n\r\n` (or `\n\n`), within [`MAX_HEAD`].
fn head_end(buf: &[u8]) -> Option<usize> {
    let window = &buf[..buf.len().min(MAX_HEAD)];
    let crlf = window
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| i + 4);
    let lf = window.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

async fn handle(mut client: TcpStream, shared: Arc<Shared>) {
    let (head, rest) = match tokio::time::timeout(STEP_TIMEOUT, read_head(&mut client)).await {
        Ok(Ok(read)) => read,
        Ok(Err(HeadError::TooLarge)) => {
            let reason = format!("request head larger than {MAX_HEAD} bytes");
            shared.record("-", false, &reason);
            respond(&mut client, "431 Request Header Fields Too Large", &reason).await;
            return;
        }
        Ok(Err(HeadError::Gone)) | Err(_) => return,
    };
    let request_line = head.lines().next().unwrap_or_default();
    let (target, addresses, rule) = match plan(&shared.allow, request_line).await {
        Ok(plan) => plan,
        Err(denial) => {
            shared.record(&denial.target, false, &denial.reason);
            respond(&mut client, "403 Forbidden", &denial.reason).await;
            return;
        }
    };
    let shown_target = target.to_string();
    let mut upstream = match connect_first(&addresses).await {
        Ok(connected) => connected,
        Err(err) => {
            let reason = format!("allowed by {rule}, but no connection: {err}");
            shared.record(&shown_target, true, &reason);
            respond(&mut client, "502 Bad Gateway", &reason).await;
            return;
        }
    };
    let peer = upstream
        .peer_addr()
        .map_or_else(|_| "?".to_string(), |a| a.to_string());
    shared.record(
        &shown_target,
        true,
        &format!("allowed by {rule}, connected to {peer}"),
    );
    let established = b"HTTP/1.1 200 Connection established\r\n\r\n";
    if client.write_all(established).await.is_err()
        || (!rest.is_empty() && upstream.write_all(&rest).await.is_err())
    {
        return;
    }
    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
}

/// A refused request: what it asked for and why not.
struct Denial {
    target: String,
    reason: String,
}

/// Checks a request line; returns the target, the checked addresses to
/// try, and the rule that allowed it.
async fn plan(
    allow: &Allowlist,
    request_line: &str,
) -> Result<(Target, Vec<SocketAddr>, String), Denial> {
    let mut words = request_line.split_whitespace();
    let (method, authority) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let deny = |target: &str, reason: String| Denial {
        target: target.to_string(),
        reason,
    };
    if method != "CONNECT" {
        return Err(deny(
            request_line,
            "only CONNECT tunnels are allowed: use an https:// URL".to_string(),
        ));
    }
    let target = Target::parse(authority)
        .map_err(|_| deny(authority, "the CONNECT target is not host:port".to_string()))?;
    let Some(rule) = allow.matching(&target) else {
        return Err(deny(
            &target.to_string(),
            "no network allow rule matches: add it with --allow-host HOST:PORT or [network] allow"
                .to_string(),
        ));
    };
    let rule = rule.to_string();
    let addresses: Vec<SocketAddr> = match &target.host {
        TargetHost::Address(address) => vec![SocketAddr::new(*address, target.port)],
        TargetHost::Name(name) => {
            let lookup = tokio::net::lookup_host((name.as_str(), target.port));
            match tokio::time::timeout(STEP_TIMEOUT, lookup).await {
                Ok(Ok(found)) => found.collect(),
                Ok(Err(err)) => {
                    return Err(deny(
                        &target.to_string(),
                        format!("cannot resolve {name}: {err}"),
                    ));
                }
                Err(_) => {
                    return Err(deny(
                        &target.to_string(),
                        format!("resolving {name} timed out"),
                    ));
                }
            }
        }
    };
    if addresses.is_empty() {
        return Err(deny(
            &target.to_string(),
            "the name has no address".to_string(),
        ));
    }
    // Every address must pass, not just the first: the tunnel may use any.
    if let Some(internal) = addresses
        .iter()
        .find(|a| is_internal(a.ip()) && !allow.names_address(a.ip(), a.port()))
    {
        return Err(deny(
            &target.to_string(),
            format!(
                "it resolves to {}, a loopback, link-local or private address: only a rule \
                 naming that address (not a name) allows it",
                internal.ip()
            ),
        ));
    }
    Ok((target, addresses, rule))
}

/// Connects to the first address that answers.
async fn connect_first(addresses: &[SocketAddr]) -> std::io::Result<TcpStream> {
    let mut last = std::io::Error::other("no address to try");
    for address in addresses {
        match tokio::time::timeout(STEP_TIMEOUT, TcpStream::connect(address)).await {
            Ok(Ok(stream)) => {
                no_delay(&stream);
                return Ok(stream);
            }
            Ok(Err(err)) => last = err,
            Err(_) => last = std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out"),
        }
    }
    Err(last)
}

/// Sends what the relay writes at once: small writes (a streamed answer's
/// pieces) would otherwise wait on the peer's delayed ACK (Nagle), ~40 ms
/// each. A socket that refuses it is relayed all the same.
fn no_delay(stream: &TcpStream) {
    let _ = stream.set_nodelay(true);
}

/// Answers with `status` and a one-line reason, and closes.
async fn respond(client: &mut TcpStream, status: &str, reason: &str) {
    let body = format!("ah egress proxy: {}\n", redact::text(reason));
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = client.write_all(response.as_bytes()).await;
    let _ = client.shutdown().await;
}

/// Client text made safe for one log line: printable ASCII only, cut short.
fn shown(text: &str) -> String {
    let mut out: String = text
        .chars()
        .take(SHOWN_CHARS)
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                '?'
            }
        })
        .collect();
    if text.chars().count() > SHOWN_CHARS {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests;
