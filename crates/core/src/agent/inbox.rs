//! Messages from other terminals while the loop runs (`ah --steer`,
//! `ah --followup`, a prompt given to a busy session), through the
//! [`Inbox`] the caller passes in.
//!
//! Steering is looked for before each tool call of a turn and once more
//! after its results: once a message is there, the calls not yet run get a
//! "skipped" result, and the message follows the results as user text in
//! the same user message (the API wants every `tool_use` answered in the
//! next user message, and user and assistant messages to alternate, so the
//! text cannot be a message of its own). When the model ends its turn,
//! whatever is pending (follow-ups, and steering that came too late for a
//! tool round) becomes the next user message and starts another turn.
//! Delivered text is stored as text blocks whose details say where it came
//! from, and announced as events.

use serde_json::json;

use super::emit::Emitter;
use crate::event::Event;
use ah_llm::{Block, Role};
use ah_session::queue::{QueueKind, Queued, SessionLock};
use ah_session::{BlockRecord, MessageMeta, Session, SessionError};

/// The result of a tool call that was not run because steering arrived.
pub const STEERED: &str = "skipped: a steering message arrived";

/// Where the loop finds messages sent to the session.
pub trait Inbox: Send + Sync {
    /// Takes the steering messages that arrived, oldest first.
    fn take_steering(&self) -> Result<Vec<Queued>, SessionError>;
    /// Messages `ids` are stored in the session as message `message_id`.
    fn delivered(&self, ids: &[i64], message_id: &str) -> Result<(), SessionError>;
    /// The model ended its turn at `head`: takes every pending message to
    /// start the next turn; with none, no more are accepted.
    fn turn_ended(&self, head: &str) -> Result<Vec<Queued>, SessionError>;
}

impl Inbox for SessionLock {
    fn take_steering(&self) -> Result<Vec<Queued>, SessionError> {
        self.take(QueueKind::Steer)
    }

    fn delivered(&self, ids: &[i64], message_id: &str) -> Result<(), SessionError> {
        SessionLock::delivered(self, ids, message_id)
    }

    fn turn_ended(&self, head: &str) -> Result<Vec<Queued>, SessionError> {
        SessionLock::turn_ended(self, head)
    }
}

/// The steering of one turn's tool round.
#[derive(Default)]
pub(super) struct TurnSteering {
    taken: Vec<Queued>,
    skipped: u32,
}

impl TurnSteering {
    /// Before a tool call: the "skipped" result for it when steering has
    /// arrived (now or earlier in this turn), else `None` (run it).
    pub(super) fn skip(
        &mut self,
        inbox: &dyn Inbox,
        id: &str,
        name: &str,
    ) -> Result<Option<BlockRecord>, SessionError> {
        if self.taken.is_empty() {
            self.taken = inbox.take_steering()?;
        }
        if self.taken.is_empty() {
            return Ok(None);
        }
        self.skipped += 1;
        Ok(Some(BlockRecord::tool_result(
            id,
            name,
            STEERED.into(),
            true,
        )))
    }

    /// After the turn's results: the steering text blocks that follow them.
    pub(super) fn after_results(
        &mut self,
        inbox: &dyn Inbox,
    ) -> Result<Vec<BlockRecord>, SessionError> {
        if self.taken.is_empty() {
            self.taken = inbox.take_steering()?;
        }
        Ok(blocks(&self.taken))
    }

    /// The results and the steering are stored as message `head`.
    pub(super) fn delivered(
        self,
        inbox: &dyn Inbox,
        session: &Session,
        out: &mut Emitter<'_>,
        head: &str,
    ) -> Result<(), SessionError> {
        deliver(inbox, session, out, head, &self.taken, self.skipped)
    }
}

/// The model ended its turn at `head`: stores what is pending as the next
/// user message and returns its id, or `None` when nothing is pending.
pub(super) fn next_turn(
    inbox: &dyn Inbox,
    session: &mut Session,
    out: &mut Emitter<'_>,
    head: &str,
) -> Result<Option<String>, SessionError> {
    let queued = inbox.turn_ended(head)?;
    if queued.is_empty() {
        return Ok(None);
    }
    let stored = session.append(
        Some(head),
        Role::User,
        &blocks(&queued),
        &MessageMeta::default(),
    )?;
    deliver(inbox, session, out, &stored.id, &queued, 0)?;
    Ok(Some(stored.id))
}

/// One text block per message; its details name the queue entry.
fn blocks(queued: &[Queued]) -> Vec<BlockRecord> {
    queued
        .iter()
        .map(|message| BlockRecord {
            details: Some(json!({ "queued": message.kind.as_str(), "queue_id": message.id })),
            ..BlockRecord::from(Block::Text {
                text: message.text.clone(),
            })
        })
        .collect()
}

/// Marks `queued` delivered in `message_id` and announces each.
fn deliver(
    inbox: &dyn Inbox,
    session: &Session,
    out: &mut Emitter<'_>,
    message_id: &str,
    queued: &[Queued],
    skipped: u32,
) -> Result<(), SessionError> {
    if queued.is_empty() {
        return Ok(());
    }
    let ids: Vec<i64> = queued.iter().map(|message| message.id).collect();
    inbox.delivered(&ids, message_id)?;
    for message in queued {
        let event = match message.kind {
            QueueKind::Steer => Event::SteeringDelivered {
                id: message.id,
                text: message.text.clone(),
                skipped,
            },
            QueueKind::Followup => Event::FollowupDelivered {
                id: message.id,
                text: message.text.clone(),
            },
        };
        out.emit(session, Some(message_id), event);
    }
    Ok(())
}
