//! What an interrupted run leaves behind must be a valid conversation: the
//! text the model had streamed so far is kept as an assistant message, and
//! every `tool_use` without a result gets one saying it was interrupted. The
//! session's state (`processing`, `idle`, `closed`) and the id of the process
//! working on it are recorded in its `context` table, for people and tools
//! reading the file; which process holds the session is decided by the lock
//! in its queue (`ah_session::queue`).

use super::INTERRUPTED;
use super::emit::record_event;
use crate::event::{Event, SessionState};
use ah_llm::{Block, Role};
use ah_session::{BlockRecord, MessageMeta, Session, SessionError};

/// Stores `text`, streamed by a model call that was stopped, as an
/// assistant message under `head` with stop reason `aborted`. Returns the
/// new message's id, or `None` when nothing had been streamed.
pub(super) fn keep_partial(
    session: &mut Session,
    head: &str,
    text: &str,
) -> Result<Option<String>, SessionError> {
    if text.is_empty() {
        return Ok(None);
    }
    let meta = MessageMeta {
        stop_reason: Some("aborted".to_string()),
        ..MessageMeta::default()
    };
    let block = BlockRecord::from(Block::Text {
        text: text.to_string(),
    });
    let stored = session.append(Some(head), Role::Assistant, &[block], &meta)?;
    Ok(Some(stored.id))
}

/// The "interrupted" results for every `tool_use` in `blocks`.
fn interrupted_results(blocks: &[BlockRecord]) -> Vec<BlockRecord> {
    blocks
        .iter()
        .filter_map(|b| match &b.block {
            Block::ToolUse { id, name, .. } => {
                Some(BlockRecord::tool_result(id, name, INTERRUPTED.into(), true))
            }
            _ => None,
        })
        .collect()
}

/// Repairs a session left mid-turn by a crash or a hurried exit: when the
/// last message is an assistant message with tool calls, they all get an
/// "interrupted" result, so the stored conversation is valid for the API.
pub fn close_interrupted(session: &mut Session) -> Result<(), SessionError> {
    let Some(head) = session.head()? else {
        return Ok(());
    };
    let Some(last) = session.path_to(&head)?.pop() else {
        return Ok(());
    };
    if last.role != Role::Assistant {
        return Ok(());
    }
    let results = interrupted_results(&last.blocks);
    if !results.is_empty() {
        session.append(Some(&head), Role::User, &results, &MessageMeta::default())?;
    }
    Ok(())
}

/// Records the session's state, and this process as the one working on it,
/// in its `context` (keys `state` and `pid`) and its event log, and returns
/// the event for the consumer.
pub fn set_state(session: &Session, state: SessionState) -> Result<Event, SessionError> {
    session.set_context("state", state.as_str())?;
    session.set_context("pid", &std::process::id().to_string())?;
    let event = Event::StateChange { state };
    record_event(session, None, &event);
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
    fn partial_text_is_kept_as_an_aborted_answer() {
        let (_dir, mut session) = session();
        let user = session
            .append(None, Role::User, &[text("go")], &MessageMeta::default())
            .unwrap();
        assert_eq!(keep_partial(&mut session, &user.id, "").unwrap(), None);
        let kept = keep_partial(&mut session, &user.id, "I was say")
            .unwrap()
            .unwrap();
        let path = session.path_to(&kept).unwrap();
        assert_eq!(path.len(), 2);
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
        close_interrupted(&mut session).unwrap();
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
        close_interrupted(&mut session).unwrap();
        assert_eq!(
            session
                .path_to(&session.head().unwrap().unwrap())
                .unwrap()
                .len(),
            3
        );
    }

    #[test]
    fn state_and_process_are_kept_in_the_context() {
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
        assert_eq!(
            session.context("pid").unwrap(),
            Some(std::process::id().to_string())
        );
    }
}
