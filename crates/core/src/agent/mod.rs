//! The agent loop: send the conversation to the model, stream the answer,
//! run the tools it asks for as sandbox steps, store everything in the
//! session, and repeat until the model ends its turn.
//!
//! The loop talks to the outside only through the [`Provider`] trait, the
//! sandbox [`Run`], the [`Session`] store, the [`Inbox`] of messages from
//! other terminals and an event callback.

pub mod abort;
pub mod compact;
mod emit;

pub mod inbox;
pub mod instructions;
mod interrupt;
pub mod loop_detect;
pub mod prompt;
mod request;
mod round;
mod state;
pub(crate) mod step;
mod text_tools;

pub use abort::{AbortHandle, AbortSignal, abort_channel};
pub use emit::record_event;
pub use inbox::Inbox;
pub use interrupt::{close_interrupted, set_state};

use std::time::Instant;

use serde_json::Value;

pub use crate::event::{CompactReason, EndReason, Event};
use emit::{Emitter, stream_event};
use interrupt::keep_partial;
use request::{INTERRUPTED, map_edit_calls, sendable};
use state::LoopState;

use ah_llm::models::{ModelInfo, ToolProtocol};
use ah_llm::{Block, LlmError, Provider, Request, Response, Role, ToolDef};
use ah_record::run::Run;
use ah_session::{BlockRecord, MessageMeta, Session, SessionError, StoredMessage};

/// What the loop needs to know besides its collaborators.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub model: ModelInfo,
    pub system: String,
    /// The tools offered to the model (`Run::tool_specs`, which follows the
    /// run's step rules).
    pub tools: Vec<ToolDef>,
    /// Stop after this many tool calls.
    pub max_tools: Option<u32>,
    /// How many recent tool calls loop detection looks at; 0 turns it off.
    pub loop_window: usize,
    pub thinking_budget: Option<u32>,
    /// Compact when the conversation comes within this many tokens of the
    /// context window.
    pub compact_reserve: u64,
    /// The instructions for summarising the conversation.
    pub compact_prompt: String,
}

/// Why the loop could not go on.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(transparent)]
    Llm(#[from] LlmError),
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error("compacting the conversation failed: {0}")]
    Compaction(String),
}

/// The outcome of [`run_agent`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentSummary {
    pub reason: EndReason,
    /// The loop's last message: where its branch of the session ends.
    pub head: String,
    pub turns: u32,
    pub tool_calls: u32,
}

/// Runs the loop from the message `head` (normally the user's prompt) until
/// the model ends its turn, the tool limit is reached, the model keeps
/// repeating its calls (see [`loop_detect`]), `abort` fires (see [`abort`]),
/// or a call fails.
/// Steering and follow-ups come from `inbox` (see [`inbox`]).
/// Every assistant response and every batch of tool results is one stored
/// message; `on_event` sees everything as it happens.
#[allow(clippy::too_many_arguments)]
pub async fn run_agent(
    config: &AgentConfig,
    provider: &dyn Provider,
    session: &mut Session,
    run: &mut Run,
    head: String,
    abort: &mut AbortSignal,
    inbox: &dyn Inbox,
    on_event: &mut (dyn FnMut(&Event) + Send),
) -> Result<AgentSummary, AgentError> {
    let mut state = LoopState::new(on_event, head, config.loop_window);
    state.emit(
        session,
        Event::AgentStart {
            session: session.id(),
            run_id: run.id(),
            model: config.model.id.clone(),
            backend: run.backend_kind().as_str().to_string(),
        },
    );
    loop {
        state.turns += 1;
        let turn = state.turns;
        state.emit(session, Event::TurnStart { turn });
        let LoopState { out, head, .. } = &mut state;
        let called = tokio::select! {
            called = compact::call_model(config, provider, session, head, turn, out) => {
                Some(called)
            }
            () = abort.finalizing() => None,
        };
        let Some(called) = called else {
            // Stopped mid-stream: what was streamed is kept.
            let partial = state.out.take_partial();
            if let Some(kept) = keep_partial(session, &state.head, &partial)? {
                state.head = kept;
            }
            let reason = match abort.is_requested() {
                true => EndReason::Aborted,
                false => EndReason::Finalized,
            };
            return Ok(state.end(session, reason));
        };
        let (response, latency_ms) = match called {
            Ok(answer) => answer,
            Err(err) => {
                let message = err.to_string();
                state.emit(session, Event::Error { message });
                let reason = EndReason::Failed;
                state.emit(session, Event::AgentEnd { reason });
                return Err(err);
            }
        };
        let calls = store_answer(session, &mut state, &response, latency_ms)?;
        if calls.is_empty()
            && config.model.tool_protocol == ToolProtocol::Text
            && let Some(ran) =
                text_tools::run_blocks(config, &response, run, session, &mut state, abort).await?
        {
            state.emit(session, Event::TurnEnd { turn });
            match ran.stop {
                Some(reason) => return Ok(state.end(session, reason)),
                None => continue,
            }
        }
        if calls.is_empty() {
            state.emit(session, Event::TurnEnd { turn });
            let reason = match response.stop_reason.as_deref() {
                Some("end_turn") | Some("stop_sequence") | None => EndReason::Done,
                Some(_) => EndReason::Stopped,
            };
            if reason == EndReason::Done
                && !abort.is_finalizing()
                && let Some(next) = inbox::next_turn(inbox, session, &mut state.out, &state.head)?
            {
                state.head = next;
                continue;
            }
            return Ok(state.end(session, reason));
        }

        let round = round::run_round(
            round::Round {
                config,
                run,
                session,
                inbox,
                truncated: &response.truncated_tool_calls,
            },
            calls,
            &mut state,
            abort,
        )
        .await?;
        state.emit(session, Event::TurnEnd { turn });
        let stop = if round.aborted {
            Some(EndReason::Aborted)
        } else if abort.is_finalizing() {
            Some(EndReason::Finalized)
        } else {
            state.stop_after_calls(config, run)
        };
        if let Some(reason) = stop {
            return Ok(state.end(session, reason));
        }
    }
}

/// Stores the model's answer under the head (which moves to it), announces
/// the call's end, and returns the tool calls it made (id, name, input).
fn store_answer(
    session: &mut Session,
    state: &mut LoopState<'_>,
    response: &Response,
    latency_ms: u64,
) -> Result<Vec<(String, String, Value)>, AgentError> {
    let blocks: Vec<BlockRecord> = response
        .content
        .iter()
        .cloned()
        .map(BlockRecord::from)
        .collect();
    let meta = MessageMeta {
        usage: Some(response.usage),
        stop_reason: response.stop_reason.clone(),
        model: Some(response.model.clone()),
        api_latency_ms: Some(latency_ms),
    };
    let stored = session.append(Some(&state.head), Role::Assistant, &blocks, &meta)?;
    state.head = stored.id;
    state.emit(
        session,
        Event::ApiCallEnd {
            turn: state.turns,
            latency_ms,
            usage: response.usage,
            stop_reason: response.stop_reason.clone(),
        },
    );
    Ok(response
        .content
        .iter()
        .filter_map(|b| match b {
            Block::ToolUse { id, name, input } => Some((id.clone(), name.clone(), input.clone())),
            _ => None,
        })
        .collect())
}

/// Sends the conversation along `path` (root to head) to the model, as
/// compaction left it, streaming the answer's events to the consumer.
/// Returns the answer and how long the call took, in milliseconds.
async fn stream_call(
    config: &AgentConfig,
    provider: &dyn Provider,
    session: &Session,
    path: &[StoredMessage],
    turn: u32,
    out: &mut Emitter<'_>,
) -> Result<(Response, u64), AgentError> {
    let head = path.last().map(|message| message.id.as_str());
    let (system, tools) = text_tools::request_parts(config);
    let request = Request {
        model: config.model.id.clone(),
        system,
        messages: map_edit_calls(
            sendable(request::pictures::messages(
                session,
                &compact::request_view(path),
                config.model.images,
            )?),
            &config.tools,
        ),
        tools,
        max_tokens: compact::max_tokens_for(config, path),
        thinking_budget: config.thinking_budget,
    };
    out.emit(
        session,
        head,
        Event::ApiCallStart {
            turn,
            model: config.model.id.clone(),
        },
    );
    let started = Instant::now();
    // Stream events reach consumers live; the few worth keeping (retries)
    // are stored once the call is over, since the store is not shared
    // with the provider's callback.
    let mut to_store = Vec::new();
    let result = provider
        .stream(&request, &mut |ev| {
            if let Some(event) = stream_event(ev) {
                out.live(&event);
                if event.is_persisted() {
                    to_store.push(event);
                }
            }
        })
        .await;
    for event in to_store {
        record_event(session, head, &event);
    }
    Ok((result?, started.elapsed().as_millis() as u64))
}
