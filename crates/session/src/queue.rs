//! The queue beside each session (`<ulid>.queue.db` next to `<ulid>.db`):
//! the lock that says which ah process works on the session, and the
//! messages other terminals send it — steering (delivered between tool
//! rounds) and follow-ups (delivered when the model ends its turn).
//!
//! A message goes `pending` → `taken` (by the owner, in one transaction, so
//! each is delivered once however many readers there are) → `delivered`
//! (stored in the session as message `message_id`) → `answered` (the turn
//! it started or steered ended, at session message `answer_head`). One that
//! the owner could not deliver before it stopped is `dropped`, with why.
//! Senders use [`Queue`]; the owner uses [`SessionLock`].

mod lock;
mod process;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::schema::{self, classify};
use super::{Result, SessionError};
use ah_base::time::now_rfc3339;

pub use lock::{Acquire, SessionLock, Takeover};
pub use process::ProcessId;

/// How often the owner refreshes its heartbeat.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(10);
/// A lock whose heartbeat is older than this is free to take.
pub const STALE_AFTER: Duration = Duration::from_secs(30);

/// Migration `i` takes the queue schema from version `i` to `i + 1`.
/// Append new migrations; never edit a released one.
const MIGRATIONS: &[&str] = &[
    // 0 -> 1: the lock (at most one row) and the messages.
    "CREATE TABLE lock (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        pid INTEGER NOT NULL,
        started INTEGER NOT NULL,
        heartbeat_ms INTEGER NOT NULL,
        accepting INTEGER NOT NULL,
        acquired_at TEXT NOT NULL
    );
    CREATE TABLE queue (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        kind TEXT NOT NULL CHECK (kind IN ('steer', 'followup')),
        text TEXT NOT NULL,
        sender_pid INTEGER,
        created_at TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN
            ('pending', 'taken', 'delivered', 'answered', 'dropped')),
        taken_at TEXT,
        message_id TEXT,
        answer_head TEXT,
        outcome TEXT,
        finished_at TEXT
    );
    CREATE INDEX queue_status ON queue(status, kind, id);",
];

/// The queue schema version this build writes.
pub const QUEUE_SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// What a queued message asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueKind {
    /// Delivered between tool rounds; the turn's remaining calls are skipped.
    Steer,
    /// Delivered when the model ends its turn, starting another one.
    Followup,
}

impl QueueKind {
    pub fn as_str(self) -> &'static str {
        match self {
            QueueKind::Steer => "steer",
            QueueKind::Followup => "followup",
        }
    }

    fn parse(text: &str) -> Option<QueueKind> {
        match text {
            "steer" => Some(QueueKind::Steer),
            "followup" => Some(QueueKind::Followup),
            _ => None,
        }
    }
}

/// A message taken from the queue for delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queued {
    pub id: i64,
    pub kind: QueueKind,
    pub text: String,
}

/// The process holding a session's lock, as recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    pub process: ProcessId,
    /// Unix time of the last heartbeat, in milliseconds.
    pub heartbeat_ms: i64,
    /// Whether it takes steering and follow-ups now (its agent loop may
    /// still run), as opposed to finishing (reviewing) or compacting.
    pub accepting: bool,
}

/// Why a recorded owner no longer holds the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gone {
    /// Its process no longer runs (or the pid now belongs to another one).
    Dead,
    /// Its heartbeat is this many seconds old.
    Stale { secs: u64 },
}

impl Owner {
    /// `None` while the owner holds the lock at `now_ms`, else why not.
    pub fn gone(&self, now_ms: i64) -> Option<Gone> {
        if !self.process.is_alive() {
            return Some(Gone::Dead);
        }
        let age = now_ms.saturating_sub(self.heartbeat_ms);
        (age > STALE_AFTER.as_millis() as i64).then_some(Gone::Stale {
            secs: (age / 1000) as u64,
        })
    }
}

/// Where a queued message is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    Pending,
    /// Taken by the owner, not yet stored in the session.
    Taken,
    /// Stored in the session as message `message_id`.
    Delivered {
        message_id: String,
    },
    /// The turn it started ended at session message `head` (none if the
    /// owner stopped first), the way `outcome` says (`done`, `aborted`, …).
    Answered {
        message_id: Option<String>,
        head: Option<String>,
        outcome: String,
    },
    /// Never delivered; `reason` says why.
    Dropped {
        reason: String,
    },
}

/// The result of [`Queue::enqueue`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Enqueued {
    /// Queued as message `id` for `owner`.
    Queued { id: i64, owner: Owner },
    /// A live ah holds the session but is not taking messages now.
    NotAccepting(Owner),
    /// No live ah holds the session.
    NoOwner,
}

/// The queue file of the session database `session_db`: `x.db` →
/// `x.queue.db`.
pub fn queue_path(session_db: &Path) -> PathBuf {
    let stem = session_db
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    session_db.with_file_name(format!("{stem}.queue.db"))
}

/// Unix time in milliseconds.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A session's queue as a sender sees it: enqueue a message for the live
/// owner, and follow what became of it.
#[derive(Debug)]
pub struct Queue {
    conn: Connection,
    path: PathBuf,
}

impl Queue {
    /// Opens (creating if needed) the queue of the session database
    /// `session_db`.
    pub fn open(session_db: &Path) -> Result<Queue> {
        let path = queue_path(session_db);
        Ok(Queue {
            conn: open_db(&path)?,
            path,
        })
    }

    /// The queue file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Queues `text` for the live ah holding the session. The check and the
    /// insert are one transaction, so a message never lands after its owner
    /// has stopped taking messages.
    pub fn enqueue(&mut self, kind: QueueKind, text: &str) -> Result<Enqueued> {
        let path = self.path.clone();
        let sql = |e| classify(&path, e);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql)?;
        let owner = match read_owner(&tx).map_err(sql)? {
            Some(owner) if owner.gone(now_ms()).is_none() => owner,
            _ => return Ok(Enqueued::NoOwner),
        };
        if !owner.accepting {
            return Ok(Enqueued::NotAccepting(owner));
        }
        tx.execute(
            "INSERT INTO queue (kind, text, sender_pid, created_at, status)
             VALUES (?1, ?2, ?3, ?4, 'pending')",
            params![kind.as_str(), text, std::process::id(), now_rfc3339()],
        )
        .map_err(sql)?;
        let id = tx.last_insert_rowid();
        tx.commit().map_err(sql)?;
        Ok(Enqueued::Queued { id, owner })
    }

    /// What became of message `id`; `None` if there is no such message.
    pub fn status(&self, id: i64) -> Result<Option<Status>> {
        self.conn
            .query_row(
                "SELECT status, message_id, answer_head, outcome FROM queue WHERE id = ?1",
                [id],
                |row| {
                    let status: String = row.get(0)?;
                    let message_id: Option<String> = row.get(1)?;
                    let head: Option<String> = row.get(2)?;
                    let outcome: Option<String> = row.get(3)?;
                    Ok((status, message_id, head, outcome))
                },
            )
            .optional()
            .map_err(|e| classify(&self.path, e))?
            .map(
                |(status, message_id, head, outcome)| match status.as_str() {
                    "pending" => Ok(Status::Pending),
                    "taken" => Ok(Status::Taken),
                    "delivered" => message_id
                        .map(|message_id| Status::Delivered { message_id })
                        .ok_or_else(|| self.corrupt(id, "delivered without a message")),
                    "answered" => Ok(Status::Answered {
                        message_id,
                        head,
                        outcome: outcome.unwrap_or_default(),
                    }),
                    "dropped" => Ok(Status::Dropped {
                        reason: outcome.unwrap_or_default(),
                    }),
                    other => Err(self.corrupt(id, &format!("unknown status {other:?}"))),
                },
            )
            .transpose()
    }

    /// The process recorded as holding the lock, live or not.
    pub fn owner(&self) -> Result<Option<Owner>> {
        read_owner(&self.conn).map_err(|e| classify(&self.path, e))
    }

    fn corrupt(&self, id: i64, reason: &str) -> SessionError {
        SessionError::Corrupt {
            path: self.path.clone(),
            reason: format!("queued message {id}: {reason}"),
        }
    }
}

/// Opens the queue file at `path`. Commits are not synced one by one (see
/// `schema`): the queue is short-lived traffic between processes, and a
/// power cut loses at most the last messages, never the file.
fn open_db(path: &Path) -> Result<Connection> {
    schema::open_with(path, MIGRATIONS)
}

/// The lock row, if any.
fn read_owner(conn: &Connection) -> rusqlite::Result<Option<Owner>> {
    conn.query_row(
        "SELECT pid, started, heartbeat_ms, accepting FROM lock WHERE id = 1",
        [],
        |row| {
            Ok(Owner {
                process: ProcessId {
                    pid: row.get(0)?,
                    started: row.get::<_, i64>(1)? as u64,
                },
                heartbeat_ms: row.get(2)?,
                accepting: row.get(3)?,
            })
        },
    )
    .optional()
}

/// Reads a `RETURNING id, kind, text` row.
fn queued_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Queued> {
    let kind: String = row.get(1)?;
    Ok(Queued {
        id: row.get(0)?,
        kind: QueueKind::parse(&kind).ok_or_else(|| {
            rusqlite::Error::FromSqlConversionFailure(
                1,
                rusqlite::types::Type::Text,
                format!("unknown queue kind {kind:?}").into(),
            )
        })?,
        text: row.get(2)?,
    })
}
