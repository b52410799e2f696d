//! What an interrupted run leaves behind must be a valid conversation: the
//! text the model had streamed so far is kept as an assistant message, and
//! every `tool_use` without a result gets one saying it was interrupted. The
//! session's state (`processing`, `idle`, `closed`) lives in its `context`
//! table so another process can tell whether a run is live.

use super::INTERRUPTED;
use super::event::{Event, SessionState};
use crate::llm::{Block, Role};
use crate::session::{BlockRecord, MessageMeta, Session, SessionError};

/// Collects the text of the model call in flight from the event stream, so
/// that an abort mid-stream can keep it.
#[derive(Debug, Default)]
pub struct PartialText {
    text: String,
}

impl PartialText {
    /// Follows one event: a new call or a retry starts over; a finished
    /// call is stored by the loop itself, so nothing is pending after it.
    pub fn observe(&mut self, event: &Event) {
        match event {
            Event::TextDelta { text } => self.text.push_str(text),
            Event::ApiCallStart { .. } | Event::ApiCallEnd { .. } | Event::Retry { .. } => {
                self.text.clear()
            }
            _ => {}
        }
    }

    /// The text streamed by the unfinished call, if any.
    pub fn pending(&self) -> Option<&str> {
        Some(self.text.as_str()).filter(|t| !t.is_empty())
    }
}

/// After the loop was stopped mid-turn: stores `partial` (the text of an
/// unfinished model call) as an assistant message with stop reason
/// `aborted`, then answers every `tool_use` of the last message that has no
/// result yet with "interrupted", so the stored conversation stays valid for
/// the API and can be continued.
pub fn close_interrupted(session: &mut Session, partial: Option<&str>) -> Result<(), SessionError> {
    let Some(head) = session.head()? else {
        return Ok(());
    };
    let Some(last) = session.path_to(&head)?.pop() else {
        return Ok(());
    };
    if last.role == Role::User {
        if let Some(text) = partial {
            let meta = MessageMeta {
                stop_reason: Some("aborted".to_string()),
                ..MessageMeta::default()
            };
            let block = BlockRecord::from(Block::Text {
                text: text.to_string(),
            });
            session.append(Some(&head), Role::Assistant, &[block], &meta)?;
        }
        return Ok(());
    }
    let results: Vec<BlockRecord> = last
        .blocks
        .iter()
        .filter_map(|b| match &b.block {
            Block::ToolUse { id, name, .. } => {
                Some(BlockRecord::tool_result(id, name, INTERRUPTED.into(), true))
            }
            _ => None,
        })
        .collect();
    if !results.is_empty() {
        session.append(Some(&head), Role::User, &results, &MessageMeta::default())?;
    }
    Ok(())
}

/// Records the session's state in its `context` (key `state`) and the
/// event log, and returns the event for the consumer.
pub fn set_state(session: &Session, state: SessionState) -> Result<Event, SessionError> {
    session.set_context("state", state.as_str())?;
    let event = Event::StateChange { state };
    let details = serde_json::to_value(&event).unwrap_or_default();
    session.record_event(None, event.name(), &details)?;
    Ok(event)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session() -> (tempfile::TempDir, Session) {
        let dir = tempfile::tempdir().unwrap();
        let session = Session::create(dir.path()).unwrap();
        (dir, session)
    }

    fn text(t: &str) -> BlockRecord {
        BlockRecord::from(Block::Text { text: t.into() })
    }

    #[test]
    fn partial_text_follows_the_call_in_flight() {
        let mut partial = PartialText::default();
        partial.observe(&Event::ApiCallStart {
            turn: 1,
            model: "m".into(),
        });
        partial.observe(&Event::TextDelta { text: "Hel".into() });
        partial.observe(&Event::Retry {
            attempt: 1,
            delay_ms: 0,
            reason: "cut".into(),
        });
        assert_eq!(partial.pending(), None, "a retry starts over");
        partial.observe(&Event::TextDelta {
            text: "Hello".into(),
        });
        partial.observe(&Event::TextDelta {
            text: " there".into(),
        });
        assert_eq!(partial.pending(), Some("Hello there"));
    }

    #[test]
    fn an_abort_mid_stream_keeps_the_partial_text() {
        let (_dir, mut session) = session();
        let user = session
            .append(None, Role::User, &[text("go")], &MessageMeta::default())
            .unwrap();
        close_interrupted(&mut session, Some("I was say")).unwrap();
        let path = session.path_to(&session.head().unwrap().unwrap()).unwrap();
        assert_eq!(path.len(), 2);
        assert_eq!(path[0].id, user.id);
        assert_eq!(path[1].role, Role::Assistant);
        assert_eq!(path[1].meta.stop_reason.as_deref(), Some("aborted"));
        assert_eq!(
            path[1].blocks[0].block,
            Block::Text {
                text: "I was say".into()
            }
        );
    }

    #[test]
    fn unanswered_tool_calls_get_interrupted_results() {
        let (_dir, mut session) = session();
        let user = session
            .append(None, Role::User, &[text("go")], &MessageMeta::default())
            .unwrap();
        let call = BlockRecord::from(Block::ToolUse {
            id: "t1".into(),
            name: "bash".into(),
            input: serde_json::json!({"command": "sleep 9"}),
        });
        session
            .append(
                Some(&user.id),
                Role::Assistant,
                &[call],
                &MessageMeta::default(),
            )
            .unwrap();
        close_interrupted(&mut session, Some("ignored: the call was stored")).unwrap();
        let path = session.path_to(&session.head().unwrap().unwrap()).unwrap();
        assert_eq!(path.len(), 3);
        match &path[2].blocks[0].block {
            Block::ToolResult {
                tool_use_id,
                is_error,
                content,
            } => {
                assert_eq!(tool_use_id, "t1");
                assert!(*is_error && content.starts_with("interrupted"));
            }
            other => panic!("expected a tool result, got {other:?}"),
        }
    }

    #[test]
    fn state_is_kept_in_the_context_and_logged() {
        let (_dir, session) = session();
        let event = set_state(&session, SessionState::Processing).unwrap();
        assert_eq!(
            event,
            Event::StateChange {
                state: SessionState::Processing
            }
        );
        assert_eq!(
            session.context("state").unwrap().as_deref(),
            Some("processing")
        );
        set_state(&session, SessionState::Closed).unwrap();
        assert_eq!(session.context("state").unwrap().as_deref(), Some("closed"));
    }
}
