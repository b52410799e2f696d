//! A scripted stand-in for the Anthropic Messages API and the OpenAI Chat
//! Completions API, for tests that run the real `ah` binary with
//! `ANTHROPIC_BASE_URL` (or `AH_OPENAI_BASE_URL=<url>/v1`) pointing here.
//!
//! The test hands [`MockServer::start`] one [`Turn`] per expected
//! `POST /v1/messages` or `POST /v1/chat/completions`, in order; the server
//! answers each with the scripted SSE stream or error in the format of the
//! API the request came in on, records every request, and stops when dropped. It runs
//! on its own thread and tokio runtime, so plain `#[test]` functions can use it.
//!
//! ```ignore
//! let mock = MockServer::start(vec![
//!     Turn::reply(Reply::new().tool_use("toolu_1", "write", json!({"path": "a.txt"}))),
//!     Turn::error(529, "overloaded_error", "Overloaded").retry_after(0),
//!     Turn::reply(Reply::new().text("done")),
//! ]);
//! // run ah with ANTHROPIC_BASE_URL=mock.url(), then:
//! assert_eq!(mock.requests().len(), 3);
//! ```
//!
//! For several agents at once (`ah org`), [`MockServer::start_agents`] gives
//! each agent a script of its own: a request whose system prompt says
//! "You are the agent `NAME`" takes the next turn of `NAME`'s script, any
//! other request the next shared one (see `agents.rs`).

mod agents;
mod connection;
mod http;
mod openai_sse;
mod recorded;
mod script;
mod sse;

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

pub(crate) use recorded::RecordedRequest;
pub(crate) use script::{Reply, Turn};

use agents::Agents;
use http::RawRequest;
use script::{ApiError, Wire};

/// Model named in replies when the request names none.
const FALLBACK_MODEL: &str = "claude-mock";

/// A running mock server; dropping it stops the server and closes every
/// connection it has open.
pub(crate) struct MockServer {
    url: String,
    shared: Arc<Shared>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

struct Shared {
    state: Mutex<State>,
    arrived: Condvar,
}

struct State {
    /// The shared script: turns for requests no agent's script answers.
    turns: VecDeque<Turn>,
    scripted: usize,
    agents: Agents,
    requests: Vec<RecordedRequest>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panicking test thread must not hide the mock's state from others.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl MockServer {
    /// Starts a server on `127.0.0.1` (ephemeral port) that answers the
    /// `POST /v1/messages` requests it receives with `turns`, in order.
    ///
    /// # Panics
    /// If the listening socket or the runtime cannot be set up.
    pub(crate) fn start(turns: Vec<Turn>) -> MockServer {
        MockServer::launch(turns, Agents::default())
    }

    /// Starts a server with the shared script `turns` and the agents' own
    /// scripts `agents`.
    fn launch(turns: Vec<Turn>, agents: Agents) -> MockServer {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap_or_else(|err| panic!("mock: cannot bind 127.0.0.1:0: {err}"));
        let address = std_listener
            .local_addr()
            .unwrap_or_else(|err| panic!("mock: cannot read the bound address: {err}"));
        std_listener
            .set_nonblocking(true)
            .unwrap_or_else(|err| panic!("mock: cannot make the listener non-blocking: {err}"));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap_or_else(|err| panic!("mock: cannot build a tokio runtime: {err}"));
        let listener = {
            let _context = runtime.enter();
            TcpListener::from_std(std_listener)
                .unwrap_or_else(|err| panic!("mock: cannot register the listener: {err}"))
        };

        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                scripted: turns.len(),
                turns: turns.into(),
                agents,
                requests: Vec::new(),
            }),
            arrived: Condvar::new(),
        });
        let (shutdown, shutdown_signal) = oneshot::channel();
        let server_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("mock-model-server".to_string())
            .spawn(move || {
                runtime.block_on(accept_loop(listener, server_shared, shutdown_signal));
                // Dropping the runtime cancels every connection task.
                drop(runtime);
            })
            .unwrap_or_else(|err| panic!("mock: cannot spawn the server thread: {err}"));

        MockServer {
            url: format!("http://{address}"),
            shared,
            shutdown: Some(shutdown),
            thread: Some(thread),
        }
    }

    /// Base URL for `ANTHROPIC_BASE_URL`, e.g. `http://127.0.0.1:40123`.
    pub(crate) fn url(&self) -> String {
        self.url.clone()
    }

    /// Base URL of the OpenAI-compatible API, for `AH_<PROVIDER>_BASE_URL`,
    /// e.g. `http://127.0.0.1:40123/v1`.
    pub(crate) fn openai_url(&self) -> String {
        format!("{}/v1", self.url)
    }

    /// Appends a turn to the script while the server runs.
    pub(crate) fn push(&self, turn: Turn) {
        let mut state = self.shared.lock();
        state.scripted += 1;
        state.turns.push_back(turn);
    }

    /// Every request received so far, in arrival order.
    pub(crate) fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.lock().requests.clone()
    }

    /// How many scripted turns no request has used yet.
    pub(crate) fn pending_turns(&self) -> usize {
        self.shared.lock().turns.len()
    }

    /// Blocks until at least `count` requests have arrived and returns them.
    ///
    /// # Panics
    /// If `timeout` passes first, naming how many did arrive.
    pub(crate) fn wait_for_requests(
        &self,
        count: usize,
        timeout: Duration,
    ) -> Vec<RecordedRequest> {
        let deadline = Instant::now() + timeout;
        let mut state = self.shared.lock();
        while state.requests.len() < count {
            let now = Instant::now();
            if now >= deadline {
                panic!(
                    "mock: expected {count} requests within {timeout:?}, got {}",
                    state.requests.len()
                );
            }
            state = self
                .shared
                .arrived
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        state.requests.clone()
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            // The server thread may already be gone; nothing to stop then.
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            // A panic on the server thread was already printed; don't double-panic.
            let _ = thread.join();
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut shutdown: oneshot::Receiver<()>,
) {
    loop {
        tokio::select! {
            _ = &mut shutdown => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    tokio::spawn(connection::serve(stream, Arc::clone(&shared)));
                }
                Err(err) => {
                    eprintln!("mock: accept failed: {err}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
        }
    }
}

/// What the mock does with one request.
enum Answer {
    /// The request gets no turn: wrong route, bad body, or script exhausted.
    Reject {
        wire: Wire,
        status: u16,
        error: ApiError,
    },
    Scripted {
        wire: Wire,
        turn: Turn,
        number: usize,
        model: String,
    },
}

impl Shared {
    /// Records the request and picks its answer.
    fn accept(&self, raw: RawRequest) -> Answer {
        let parsed = serde_json::from_slice::<Value>(&raw.body);
        let mut state = self.lock();
        state.requests.push(RecordedRequest {
            method: raw.method.clone(),
            path: raw.path.clone(),
            headers: raw.headers,
            body: parsed.as_ref().map_or(Value::Null, Clone::clone),
        });
        let number = state.requests.len();
        self.arrived.notify_all();

        let route = raw.path.split('?').next().unwrap_or_default();
        let wire = match route {
            "/v1/chat/completions" => Wire::OpenAi,
            _ => Wire::Anthropic,
        };
        let reject = |status: u16, kind: &str, message: String| Answer::Reject {
            wire,
            status,
            error: ApiError {
                kind: kind.to_string(),
                message,
            },
        };
        if raw.method != "POST" || !matches!(route, "/v1/messages" | "/v1/chat/completions") {
            return reject(
                404,
                "not_found_error",
                format!(
                    "mock: no route for {} {}; only POST /v1/messages and \
                     POST /v1/chat/completions are served",
                    raw.method, raw.path
                ),
            );
        }
        let body = match parsed {
            Ok(body) => body,
            Err(err) => {
                return reject(
                    400,
                    "invalid_request_error",
                    format!("mock: request body is not JSON: {err}"),
                );
            }
        };
        if body["stream"] != Value::Bool(true) {
            return reject(
                400,
                "invalid_request_error",
                "mock: only streaming requests are served; send \"stream\": true".to_string(),
            );
        }
        let next = match state.agents.owner(&body) {
            Some(agent) => state.agents.next_turn(&agent, number),
            None => state.turns.pop_front().ok_or_else(|| {
                format!(
                    "mock script exhausted: request {number} has no scripted turn ({} turns were scripted)",
                    state.scripted
                )
            }),
        };
        let turn = match next {
            Ok(turn) => turn,
            // A 400 fails the client at once: a test with too few turns
            // should fail fast, not after a round of retries.
            Err(message) => return reject(400, "invalid_request_error", message),
        };
        let model = body["model"].as_str().unwrap_or(FALLBACK_MODEL).to_string();
        Answer::Scripted {
            wire,
            turn,
            number,
            model,
        }
    }
}
