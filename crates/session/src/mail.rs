//! The agents' inboxes of an `ah org` session, in the session's own file so
//! that a crash or Ctrl+C loses no mail and continuing the session delivers
//! it. Routing an agent's message posts its letters and marks the message
//! routed in one transaction (a message is routed once, also when a crash
//! came between its storing and its routing); a delivery stores the user
//! message that carries the mail and marks the mail delivered in another.

use rusqlite::{OptionalExtension, TransactionBehavior, params};

use super::store::{NewMessage, insert_message, put_context};
use super::{BlockRecord, MessageMeta, Result, Session, SessionError, StoredMessage};
use ah_base::time::now_rfc3339;
use ah_llm::Role;

/// Why a letter was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MailKind {
    /// The user's task, to every agent.
    Task,
    /// A message addressed to its recipient by name (`@@name`).
    Direct,
    /// A message to every agent but its sender (`@@group`).
    Group,
    /// The user's answer to the recipient's `@@user` question.
    Answer,
    /// The user's message while the run goes (`i`, `ah --steer`).
    Interjection,
    /// ah telling the recipient something (a tag naming no agent, a turn
    /// cut at its tool budget).
    Notice,
}

impl MailKind {
    pub fn as_str(self) -> &'static str {
        match self {
            MailKind::Task => "task",
            MailKind::Direct => "direct",
            MailKind::Group => "group",
            MailKind::Answer => "answer",
            MailKind::Interjection => "interjection",
            MailKind::Notice => "notice",
        }
    }

    fn parse(text: &str) -> Option<MailKind> {
        [
            MailKind::Task,
            MailKind::Direct,
            MailKind::Group,
            MailKind::Answer,
            MailKind::Interjection,
            MailKind::Notice,
        ]
        .into_iter()
        .find(|kind| kind.as_str() == text)
    }
}

/// A letter to post.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Letter {
    pub recipient: String,
    /// An agent's name, `user`, or `ah`.
    pub sender: String,
    pub kind: MailKind,
    pub text: String,
}

/// A letter in an inbox, not yet delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mail {
    pub id: i64,
    pub sender: String,
    pub kind: MailKind,
    pub text: String,
}

impl Session {
    /// Posts `letters` and sets the `context` values in one transaction;
    /// with a `source`, the letters were routed from that message, which
    /// is marked routed (see [`Session::is_routed`]).
    pub fn post(
        &mut self,
        source: Option<&str>,
        letters: &[Letter],
        context: &[(&str, &str)],
    ) -> Result<()> {
        let path = self.path.clone();
        let sql = |e| super::schema::classify(&path, e);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql)?;
        let now = now_rfc3339();
        for letter in letters {
            tx.prepare_cached(
                "INSERT INTO mail (recipient, sender, kind, text, source, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )
            .and_then(|mut stmt| {
                stmt.execute(params![
                    letter.recipient,
                    letter.sender,
                    letter.kind.as_str(),
                    letter.text,
                    source,
                    now
                ])
            })
            .map_err(sql)?;
        }
        if let Some(source) = source {
            tx.execute(
                "INSERT OR IGNORE INTO routed (message_id) VALUES (?1)",
                [source],
            )
            .map_err(sql)?;
        }
        for (key, value) in context {
            put_context(&tx, key, value).map_err(sql)?;
        }
        tx.commit().map_err(sql)
    }

    /// Whether message `id` was routed ([`Session::post`] with it as the
    /// source).
    pub fn is_routed(&self, id: &str) -> Result<bool> {
        self.conn
            .prepare_cached("SELECT 1 FROM routed WHERE message_id = ?1")
            .and_then(|mut stmt| stmt.query_row([id], |_| Ok(())).optional())
            .map(|found| found.is_some())
            .map_err(|e| self.sql(e))
    }

    /// The letters waiting for `recipient`, oldest first.
    pub fn pending_mail(&self, recipient: &str) -> Result<Vec<Mail>> {
        let rows: Vec<(i64, String, String, String)> = self
            .conn
            .prepare_cached(
                "SELECT id, sender, kind, text FROM mail
                 WHERE recipient = ?1 AND delivered_in IS NULL ORDER BY id",
            )
            .and_then(|mut stmt| {
                stmt.query_map([recipient], |row| {
                    Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
                })?
                .collect()
            })
            .map_err(|e| self.sql(e))?;
        rows.into_iter()
            .map(|(id, sender, kind, text)| {
                let kind = MailKind::parse(&kind)
                    .ok_or_else(|| self.corrupt(format!("mail {id} has unknown kind {kind:?}")))?;
                Ok(Mail {
                    id,
                    sender,
                    kind,
                    text,
                })
            })
            .collect()
    }

    /// Stores `blocks` (made of `mail`) as a user message of `recipient`
    /// under `parent`, marks `mail` delivered in it and sets the `context`
    /// values, in one transaction. Mail delivered meanwhile (by another
    /// process) fails the delivery.
    pub fn deliver(
        &mut self,
        recipient: &str,
        parent: Option<&str>,
        (mail, blocks): (&[Mail], &[BlockRecord]),
        context: &[(&str, &str)],
    ) -> Result<StoredMessage> {
        let path = self.path.clone();
        let sql = |e| super::schema::classify(&path, e);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql)?;
        let message = NewMessage {
            parent_id: parent,
            role: Role::User,
            blocks,
            meta: &MessageMeta::default(),
            agent: Some(recipient),
        };
        let stored = insert_message(&tx, &path, &message)?;
        for letter in mail {
            let marked = tx
                .prepare_cached(
                    "UPDATE mail SET delivered_in = ?2
                     WHERE id = ?1 AND recipient = ?3 AND delivered_in IS NULL",
                )
                .and_then(|mut stmt| stmt.execute(params![letter.id, stored.id, recipient]))
                .map_err(sql)?;
            if marked != 1 {
                return Err(SessionError::Invalid {
                    path: path.clone(),
                    reason: format!(
                        "mail {} for {recipient} was delivered by another process",
                        letter.id
                    ),
                });
            }
        }
        for (key, value) in context {
            put_context(&tx, key, value).map_err(sql)?;
        }
        tx.commit().map_err(sql)?;
        Ok(stored)
    }

    /// The id of the newest letter (0 without mail).
    pub fn last_mail_id(&self) -> Result<i64> {
        self.conn
            .prepare_cached("SELECT COALESCE(MAX(id), 0) FROM mail")
            .and_then(|mut stmt| stmt.query_row([], |row| row.get(0)))
            .map_err(|e| self.sql(e))
    }

    /// Removes the letters posted after letter `id` (a run taken back out
    /// of the session, see [`Session::remove_branch`] for its messages).
    pub fn remove_mail_after(&self, id: i64) -> Result<()> {
        self.conn
            .prepare_cached("DELETE FROM mail WHERE id > ?1")
            .and_then(|mut stmt| stmt.execute([id]))
            .map(drop)
            .map_err(|e| self.sql(e))
    }

    /// The newest message holding the result of a step that recorded the
    /// files after it (`details.head`): where the session's latest files
    /// are, in whichever agent's branch (one agent runs at a time, on the
    /// one work copy of the run). Results of calls that never ran (cut,
    /// interrupted) record no files and do not count.
    pub fn newest_step_message(&self) -> Result<Option<String>> {
        self.conn
            .prepare_cached(
                "SELECT m.id FROM messages m
                 WHERE EXISTS (SELECT 1 FROM content_blocks b
                               WHERE b.message_id = m.id AND b.block_type = 'tool_result'
                                 AND json_extract(b.details, '$.head') IS NOT NULL)
                 ORDER BY m.seq DESC LIMIT 1",
            )
            .and_then(|mut stmt| stmt.query_row([], |row| row.get(0)).optional())
            .map_err(|e| self.sql(e))
    }

    /// The newest message of `agent`'s conversation.
    pub fn agent_head(&self, agent: &str) -> Result<Option<String>> {
        self.conn
            .prepare_cached("SELECT id FROM messages WHERE agent = ?1 ORDER BY seq DESC LIMIT 1")
            .and_then(|mut stmt| stmt.query_row([agent], |row| row.get(0)).optional())
            .map_err(|e| self.sql(e))
    }
}
