//! The agent loop: send the conversation to the model, stream the answer,
//! run the tools it asks for as sandbox steps, store everything in the
//! session, and repeat until the model ends its turn.
//!
//! The loop talks to the outside only through the [`Provider`] trait, the
//! sandbox [`Run`], the [`Session`] store and an event callback.

pub mod compact;
pub mod event;
mod interrupt;
pub mod loop_detect;
pub mod prompt;

pub use interrupt::{PartialText, close_interrupted, set_state};

use std::time::Instant;

use serde_json::{Value, json};

pub use event::{CompactReason, EndReason, Event};
use loop_detect::LoopDetector;

use crate::llm::models::ModelInfo;
use crate::llm::{Block, LlmError, Message, Provider, Request, Response, Role, StreamEvent};
use crate::sandbox::run::{Run, StepOutcome};
use crate::session::{BlockRecord, MessageMeta, Session, SessionError, StoredMessage};

/// What the loop needs to know besides its collaborators.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub model: ModelInfo,
    pub system: String,
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentSummary {
    pub reason: EndReason,
    pub turns: u32,
    pub tool_calls: u32,
}

/// Runs the loop from the message `head` (normally the user's prompt) until
/// the model ends its turn, the tool limit is reached, the model keeps
/// repeating its calls (see [`loop_detect`]) or a call fails.
/// Every assistant response and every batch of tool results is one stored
/// message; `on_event` sees everything as it happens.
pub async fn run_agent(
    config: &AgentConfig,
    provider: &dyn Provider,
    session: &mut Session,
    run: &mut Run,
    mut head: String,
    on_event: &mut (dyn FnMut(&Event) + Send),
) -> Result<AgentSummary, AgentError> {
    let mut out = Emitter { on_event };
    out.emit(
        session,
        Some(&head),
        Event::AgentStart {
            session: session.id(),
            run_id: run.id(),
            model: config.model.id.clone(),
            backend: run.backend_kind().as_str().to_string(),
        },
    );
    let mut turns = 0;
    let mut tool_calls = 0;
    let mut loops = LoopDetector::new(config.loop_window);
    loop {
        turns += 1;
        out.emit(session, Some(&head), Event::TurnStart { turn: turns });
        let (response, latency_ms) = match compact::call_model(
            config, provider, session, &mut head, turns, &mut out,
        )
        .await
        {
            Ok(answer) => answer,
            Err(err) => {
                out.emit(
                    session,
                    Some(&head),
                    Event::Error {
                        message: err.to_string(),
                    },
                );
                out.emit(
                    session,
                    Some(&head),
                    Event::AgentEnd {
                        reason: EndReason::Failed,
                    },
                );
                return Err(err);
            }
        };
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
        let stored = session.append(Some(&head), Role::Assistant, &blocks, &meta)?;
        head = stored.id;
        out.emit(
            session,
            Some(&head),
            Event::ApiCallEnd {
                turn: turns,
                latency_ms,
                usage: response.usage,
                stop_reason: response.stop_reason.clone(),
            },
        );

        let calls: Vec<(String, String, Value)> = response
            .content
            .iter()
            .filter_map(|b| match b {
                Block::ToolUse { id, name, input } => {
                    Some((id.clone(), name.clone(), input.clone()))
                }
                _ => None,
            })
            .collect();
        if calls.is_empty() {
            out.emit(session, Some(&head), Event::TurnEnd { turn: turns });
            let reason = match response.stop_reason.as_deref() {
                Some("end_turn") | Some("stop_sequence") | None => EndReason::Done,
                Some(_) => EndReason::Stopped,
            };
            out.emit(session, Some(&head), Event::AgentEnd { reason });
            return Ok(AgentSummary {
                reason,
                turns,
                tool_calls,
            });
        }

        // Every tool_use gets a result, even past the limit, so the stored
        // conversation stays valid for the API.
        let mut results = Vec::with_capacity(calls.len());
        let mut steering = Vec::new();
        let mut limited = false;
        for (id, name, input) in calls {
            if response.truncated_tool_calls.contains(&id) {
                results.push(BlockRecord::tool_result(&id, &name, CUT_OFF.into(), true));
                continue;
            }
            if config.max_tools.is_some_and(|max| tool_calls >= max) {
                limited = true;
                results.push(BlockRecord::tool_result(
                    &id,
                    &name,
                    "not run: the tool call limit (--max-tools) was reached".into(),
                    true,
                ));
                continue;
            }
            tool_calls += 1;
            out.emit(
                session,
                Some(&head),
                Event::ToolCallStart {
                    id: id.clone(),
                    name: name.clone(),
                    input: input.clone(),
                },
            );
            let outcome = run.tool_step(&name, &input).await;
            for event in step_events(&id, &name, &outcome) {
                out.emit(session, Some(&head), event);
            }
            results.push(result_record(&id, &name, &run.id(), &outcome));
            if let Some(repetition) = loops.record(&name, &input) {
                out.emit(session, Some(&head), repetition.event());
                out.emit(
                    session,
                    Some(&head),
                    Event::SteeringInjected {
                        text: repetition.steering(),
                    },
                );
                steering.push(repetition.steering_block());
            }
        }
        // Text after the results: the API wants tool results first.
        results.append(&mut steering);
        let stored = session.append(Some(&head), Role::User, &results, &MessageMeta::default())?;
        head = stored.id;
        out.emit(session, Some(&head), Event::TurnEnd { turn: turns });
        if run.poisoned().is_some() {
            out.emit(
                session,
                Some(&head),
                Event::AgentEnd {
                    reason: EndReason::Poisoned,
                },
            );
            return Ok(AgentSummary {
                reason: EndReason::Poisoned,
                turns,
                tool_calls,
            });
        }
        if loops.should_stop() {
            out.emit(
                session,
                Some(&head),
                Event::AgentEnd {
                    reason: EndReason::Looping,
                },
            );
            return Ok(AgentSummary {
                reason: EndReason::Looping,
                turns,
                tool_calls,
            });
        }
        if limited || config.max_tools.is_some_and(|max| tool_calls >= max) {
            out.emit(
                session,
                Some(&head),
                Event::AgentEnd {
                    reason: EndReason::ToolLimit,
                },
            );
            return Ok(AgentSummary {
                reason: EndReason::ToolLimit,
                turns,
                tool_calls,
            });
        }
    }
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
    let request = Request {
        model: config.model.id.clone(),
        system: config.system.clone(),
        messages: sendable(compact::request_messages(path)),
        tools: crate::tools::specs(),
        max_tokens: config.model.max_output_tokens,
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
                (out.on_event)(&event);
                if event.is_persisted() {
                    to_store.push(event);
                }
            }
        })
        .await;
    for event in to_store {
        out.store(session, head, &event);
    }
    Ok((result?, started.elapsed().as_millis() as u64))
}

/// What the model is told for a tool call whose result was never stored
/// (ah was killed or crashed while the step ran).
const INTERRUPTED: &str = "interrupted: ah stopped before this tool call finished, so its \
                           result is unknown; check the files it may have changed before relying on it";

/// The result of a tool call whose input the output limit cut off.
const CUT_OFF: &str = "not run: your response reached the output token limit (max_tokens) in the \
middle of this tool call, so its input was cut off. Split large content into several smaller \
write or edit calls.";

/// The stored conversation as the API accepts it: empty text blocks (a
/// model may stream one) are rejected by the API, so they are left out; a
/// tool call without a stored result (ah was killed during the step) gets
/// an error result, since the API rejects a `tool_use` left unanswered.
fn sendable(mut messages: Vec<Message>) -> Vec<Message> {
    for message in &mut messages {
        message
            .content
            .retain(|b| !matches!(b, Block::Text { text } if text.is_empty()));
    }
    messages.retain(|m| !m.content.is_empty());
    // Consecutive messages of one role (a stored interruption followed by a
    // new prompt) are one turn for the API.
    let mut merged: Vec<Message> = Vec::with_capacity(messages.len());
    for message in messages {
        match merged.last_mut() {
            Some(last) if last.role == message.role => last.content.extend(message.content),
            _ => merged.push(message),
        }
    }
    let mut messages = merged;
    let mut i = 0;
    while i < messages.len() {
        if messages[i].role == Role::Assistant {
            answer_interrupted(&mut messages, i);
        }
        i += 1;
    }
    messages
}

/// Gives every `tool_use` of the assistant message at `at` a result in the
/// next message (results first, as the API requires), making one if needed.
fn answer_interrupted(messages: &mut Vec<Message>, at: usize) {
    let answered: Vec<String> = match messages.get(at + 1) {
        Some(next) if next.role == Role::User => next
            .content
            .iter()
            .filter_map(|b| match b {
                Block::ToolResult { tool_use_id, .. } => Some(tool_use_id.clone()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    let missing: Vec<Block> = messages[at]
        .content
        .iter()
        .filter_map(|b| match b {
            Block::ToolUse { id, .. } if !answered.contains(id) => Some(Block::ToolResult {
                tool_use_id: id.clone(),
                content: INTERRUPTED.to_string(),
                is_error: true,
            }),
            _ => None,
        })
        .collect();
    if missing.is_empty() {
        return;
    }
    match messages.get_mut(at + 1) {
        Some(next) if next.role == Role::User => {
            next.content.splice(0..0, missing);
        }
        _ => messages.insert(
            at + 1,
            Message {
                role: Role::User,
                content: missing,
            },
        ),
    }
}

/// Hands events to the consumer and stores the ones worth keeping.
struct Emitter<'a> {
    on_event: &'a mut (dyn FnMut(&Event) + Send),
}

impl Emitter<'_> {
    fn emit(&mut self, session: &Session, message_id: Option<&str>, event: Event) {
        self.store(session, message_id, &event);
        (self.on_event)(&event);
    }

    fn store(&self, session: &Session, message_id: Option<&str>, event: &Event) {
        if !event.is_persisted() {
            return;
        }
        let details = serde_json::to_value(event).unwrap_or(Value::Null);
        // The event log is a record, not a dependency: a failed insert must
        // not stop the run; the message rows stay authoritative.
        let _ = session.record_event(message_id, event.name(), &details);
    }
}

/// The live event for a stream event; the start of a streamed tool call is
/// announced later, with its complete input, as `ToolCallStart`.
fn stream_event(event: StreamEvent) -> Option<Event> {
    match event {
        StreamEvent::TextDelta(text) => Some(Event::TextDelta { text }),
        StreamEvent::ThinkingDelta(text) => Some(Event::ThinkingDelta { text }),
        StreamEvent::ToolUseStart { .. } => None,
        StreamEvent::Retry {
            attempt,
            delay_ms,
            reason,
        } => Some(Event::Retry {
            attempt,
            delay_ms,
            reason,
        }),
    }
}

fn step_events(id: &str, name: &str, outcome: &StepOutcome) -> Vec<Event> {
    let mut events = Vec::new();
    if let Some(commit) = &outcome.commit {
        events.push(Event::StepCommitted {
            step: outcome.step,
            commit: commit.clone(),
            changes: outcome.changes.clone(),
        });
    }
    if let Some(report) = &outcome.violation {
        events.push(Event::Violation {
            step: outcome.step,
            report: report.clone(),
        });
    }
    events.push(Event::ToolCallEnd {
        id: id.to_string(),
        name: name.to_string(),
        is_error: outcome.output.is_error,
        duration_ms: outcome.duration_ms,
        details: outcome.output.details.clone(),
    });
    events
}

/// The stored tool result: what the model was told, the full output, and
/// where the step lives on disk.
fn result_record(id: &str, name: &str, run_id: &str, outcome: &StepOutcome) -> BlockRecord {
    let out = &outcome.output;
    let mut full = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.stderr.is_empty() {
        if !full.is_empty() {
            full.push('\n');
        }
        full.push_str(&String::from_utf8_lossy(&out.stderr));
    }
    let mut record = BlockRecord::tool_result(id, name, out.content.clone(), out.is_error);
    record.tool_output = Some(full);
    record.duration_ms = Some(outcome.duration_ms);
    record.details = Some(json!({
        "run_id": run_id,
        "step": outcome.step,
        "commit": outcome.commit,
        "exit_code": out.exit_code,
        "tool": out.details,
        "violation": outcome.violation,
    }));
    record
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool_use(id: &str) -> Block {
        Block::ToolUse {
            id: id.to_string(),
            name: "bash".to_string(),
            input: json!({"command": "true"}),
        }
    }

    fn result(id: &str, content: &str, is_error: bool) -> Block {
        Block::ToolResult {
            tool_use_id: id.to_string(),
            content: content.to_string(),
            is_error,
        }
    }

    fn message(role: Role, content: Vec<Block>) -> Message {
        Message { role, content }
    }

    #[test]
    fn empty_text_blocks_and_emptied_messages_are_left_out() {
        let sent = sendable(vec![
            Message::user_text("go"),
            message(
                Role::Assistant,
                vec![
                    Block::Text {
                        text: String::new(),
                    },
                    Block::Text {
                        text: "ok".to_string(),
                    },
                ],
            ),
            Message::user_text(""),
        ]);
        assert_eq!(
            sent,
            vec![
                Message::user_text("go"),
                message(
                    Role::Assistant,
                    vec![Block::Text {
                        text: "ok".to_string()
                    }]
                ),
            ]
        );
    }

    #[test]
    fn answered_tool_calls_are_sent_as_stored() {
        let stored = vec![
            Message::user_text("go"),
            message(Role::Assistant, vec![tool_use("a"), tool_use("b")]),
            message(
                Role::User,
                vec![result("a", "1", false), result("b", "2", true)],
            ),
        ];
        assert_eq!(sendable(stored.clone()), stored);
    }

    #[test]
    fn a_tool_call_cut_short_by_a_crash_gets_an_error_result_before_the_next_prompt() {
        let sent = sendable(vec![
            Message::user_text("first"),
            message(Role::Assistant, vec![tool_use("a")]),
            Message::user_text("second"),
        ]);
        assert_eq!(
            sent[2],
            message(
                Role::User,
                vec![
                    result("a", INTERRUPTED, true),
                    Block::Text {
                        text: "second".to_string()
                    }
                ]
            )
        );
        assert_eq!(sent.len(), 3);
    }

    #[test]
    fn only_the_unanswered_calls_get_results_and_a_trailing_call_gets_a_message() {
        let sent = sendable(vec![
            Message::user_text("go"),
            message(Role::Assistant, vec![tool_use("a"), tool_use("b")]),
            message(Role::User, vec![result("a", "1", false)]),
            message(Role::Assistant, vec![tool_use("c")]),
        ]);
        assert_eq!(
            sent[2].content,
            vec![result("b", INTERRUPTED, true), result("a", "1", false)]
        );
        assert_eq!(
            sent[4],
            message(Role::User, vec![result("c", INTERRUPTED, true)])
        );
    }
}
