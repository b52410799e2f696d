//! [`Session`]: one open session database. Appends messages (one transaction
//! each), walks a message's ancestry by recursive CTE, and keeps context
//! values and events.

use std::fs;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde_json::Value;
use ulid::Ulid;

use super::rows::{self, BlockRow, MessageRow, to_i64};
use super::schema::{self, classify};
use super::{BlockRecord, MessageMeta, Repairs, Result, SessionError, StoredMessage};
use ah_base::time::now_rfc3339;
use ah_llm::{Role, Usage};

/// The context key that names the message the conversation continues from.
pub(super) const HEAD_KEY: &str = "head";

/// A message and its ancestors, root first, in [`MessageRow::read`] column
/// order. Each step goes to the parent by primary key; a parent always has a
/// lower seq than its child, which also bounds the walk on a damaged file.
pub(super) const ANCESTRY_SQL: &str = "
    WITH RECURSIVE ancestry (id, parent_id, role, seq, created_at, input_tokens,
                             output_tokens, stop_reason, model, api_latency_ms,
                             agent) AS (
        SELECT id, parent_id, role, seq, created_at, input_tokens,
               output_tokens, stop_reason, model, api_latency_ms, agent
        FROM messages WHERE id = ?1
        UNION ALL
        SELECT m.id, m.parent_id, m.role, m.seq, m.created_at, m.input_tokens,
               m.output_tokens, m.stop_reason, m.model, m.api_latency_ms, m.agent
        FROM messages m JOIN ancestry a ON m.id = a.parent_id
        WHERE m.seq < a.seq
    )
    SELECT * FROM ancestry ORDER BY seq";

/// The blocks of one message, in order.
pub(super) const BLOCKS_SQL: &str = "
    SELECT block_type, content, tool_id, tool_name, tool_input, tool_output,
           is_error, duration_ms, details
    FROM content_blocks WHERE message_id = ?1 ORDER BY seq";

/// The blocks of one message without what can be large: a tool result's
/// whole output (`tool_output`) and an image's base64 (`content`, empty
/// here; `typeof` reads only its type, not the text).
const PATH_BLOCKS_SQL: &str = "
    SELECT block_type,
           CASE WHEN block_type = 'image' AND typeof(content) = 'text' THEN ''
                ELSE content END,
           tool_id, tool_name, tool_input, NULL, is_error, duration_ms, details
    FROM content_blocks WHERE message_id = ?1 ORDER BY seq";

/// The type of a message's block `?2` (its place, from 0) and, for an
/// image of at most `?3` bytes of base64, its base64. `octet_length` reads
/// only the size of a larger one, never its text.
const IMAGE_SQL: &str = "
    SELECT block_type, CASE WHEN octet_length(content) <= ?3 THEN content END
    FROM content_blocks WHERE message_id = ?1 ORDER BY seq LIMIT 1 OFFSET ?2";

/// An open session database.
#[derive(Debug)]
pub struct Session {
    pub(super) conn: Connection,
    pub(super) path: PathBuf,
    /// What opening the file found and repaired (see [`super::orphans`]).
    pub(super) repairs: Repairs,
    /// The agent that writes the messages appended now (`ah org`).
    pub(super) author: Option<String>,
}

impl Session {
    /// Starts a new session: `<project_ah_dir>/<ulid>.db`, creating the
    /// directory if needed.
    pub fn create(project_ah_dir: &Path) -> Result<Session> {
        fs::create_dir_all(project_ah_dir).map_err(|source| SessionError::Dir {
            path: project_ah_dir.to_path_buf(),
            source,
        })?;
        Session::open(&project_ah_dir.join(format!("{}.db", Ulid::generate())))
    }

    /// Opens the session database at `path`, creating it if it does not
    /// exist and migrating an older schema.
    /// Messages left without content blocks are removed on the way (see
    /// [`Session::repairs`]).
    pub fn open(path: &Path) -> Result<Session> {
        let mut session = Session {
            conn: schema::open(path)?,
            path: path.to_path_buf(),
            repairs: Repairs::default(),
            author: None,
        };
        session.repairs = session.remove_orphans()?;
        Ok(session)
    }

    /// What opening the file found and repaired.
    pub fn repairs(&self) -> &Repairs {
        &self.repairs
    }

    /// The most recently created session in `project_ah_dir`: the `<ulid>.db`
    /// with the highest ULID. Other files (queues, stray names) are ignored
    /// and no database is opened. `None` when there is no session yet.
    pub fn latest(project_ah_dir: &Path) -> Result<Option<PathBuf>> {
        Ok(super::session_files(project_ah_dir)?
            .into_iter()
            .next()
            .map(|file| file.path))
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The session's id: its file name without `.db` (a ULID for sessions
    /// made by [`Session::create`]).
    pub fn id(&self) -> String {
        self.path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// Stores a message under `parent_id` (`None` starts a new root) with
    /// all its blocks in one transaction, gives it the next `seq`, and makes
    /// it the head. The message is the author's ([`Session::set_author`]).
    pub fn append(
        &mut self,
        parent_id: Option<&str>,
        role: Role,
        blocks: &[BlockRecord],
        meta: &MessageMeta,
    ) -> Result<StoredMessage> {
        let path = self.path.clone();
        let author = self.author.clone();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| classify(&path, e))?;
        let message = NewMessage {
            parent_id,
            role,
            blocks,
            meta,
            agent: author.as_deref(),
        };
        let stored = insert_message(&tx, &path, &message)?;
        tx.commit().map_err(|e| classify(&path, e))?;
        Ok(stored)
    }

    /// Says which agent writes the messages appended from now on (`None`:
    /// no agent, the single-agent runs).
    pub fn set_author(&mut self, agent: Option<&str>) {
        self.author = agent.map(str::to_string);
    }

    /// The message the conversation continues from: context `head`, else the
    /// newest message. `None` for an empty session.
    pub fn head(&self) -> Result<Option<String>> {
        if let Some(head) = self.context(HEAD_KEY)? {
            return Ok(Some(head));
        }
        self.conn
            .prepare_cached("SELECT id FROM messages ORDER BY seq DESC LIMIT 1")
            .and_then(|mut stmt| stmt.query_row([], |row| row.get(0)).optional())
            .map_err(|e| self.sql(e))
    }

    /// The id of the message numbered `seq` (what users write as `@N`).
    pub fn message_id_at(&self, seq: i64) -> Result<Option<String>> {
        self.conn
            .prepare_cached("SELECT id FROM messages WHERE seq = ?1")
            .and_then(|mut stmt| stmt.query_row([seq], |row| row.get(0)).optional())
            .map_err(|e| self.sql(e))
    }

    /// The messages from the root down to `message_id`, inclusive, with
    /// their blocks as the model sees them, less what can be large: this is
    /// read before every model call, so tool results come without their
    /// whole output (`tool_output` is `None`; [`Session::message_at`] has
    /// it) and images without their base64 (`data` is empty; a request
    /// loads the few it sends with [`Session::image_data`]).
    pub fn path_to(&self, message_id: &str) -> Result<Vec<StoredMessage>> {
        let rows = self
            .conn
            .prepare_cached(ANCESTRY_SQL)
            .and_then(|mut stmt| {
                stmt.query_map([message_id], MessageRow::read)?
                    .collect::<rusqlite::Result<Vec<_>>>()
            })
            .map_err(|e| self.sql(e))?;
        match rows.first() {
            None => return Err(self.unknown(message_id)),
            Some(root) if root.parent_id.is_some() => {
                return Err(self.corrupt(format!(
                    "the ancestry of message {message_id} breaks at {}: its parent is missing or newer",
                    root.id
                )));
            }
            Some(_) => {}
        }
        rows.into_iter()
            .map(|row| {
                let blocks = self.read_blocks(PATH_BLOCKS_SQL, &row.id)?;
                row.into_stored(blocks)
                    .map_err(|reason| self.corrupt(reason))
            })
            .collect()
    }

    /// The base64 of the image at `index` among the blocks of message
    /// `message_id` (as [`Session::path_to`] lists them), if it is at most
    /// `max_len` bytes; `None`, and nothing read, when it is longer.
    pub fn image_data(
        &self,
        message_id: &str,
        index: usize,
        max_len: u64,
    ) -> Result<Option<String>> {
        let offset = to_i64(index as u64);
        let row: Option<(String, Option<String>)> = self
            .conn
            .prepare_cached(IMAGE_SQL)
            .and_then(|mut stmt| {
                stmt.query_row(params![message_id, offset, to_i64(max_len)], |row| {
                    Ok((row.get(0)?, row.get(1)?))
                })
                .optional()
            })
            .map_err(|e| self.sql(e))?;
        match row {
            Some((kind, data)) if kind == "image" => Ok(data),
            _ => Err(self.corrupt(format!(
                "message {message_id}: no image block at place {index}"
            ))),
        }
    }

    /// Sets a context value (e.g. `head`, the model, the run directory).
    pub fn set_context(&self, key: &str, value: &str) -> Result<()> {
        put_context(&self.conn, key, value).map_err(|e| self.sql(e))
    }

    /// Removes a context value (nothing happens when it is not set).
    pub fn remove_context(&self, key: &str) -> Result<()> {
        self.conn
            .prepare_cached("DELETE FROM context WHERE key = ?1")
            .and_then(|mut stmt| stmt.execute([key]))
            .map(drop)
            .map_err(|e| self.sql(e))
    }

    /// A context value, if set.
    pub fn context(&self, key: &str) -> Result<Option<String>> {
        self.conn
            .prepare_cached("SELECT value FROM context WHERE key = ?1")
            .and_then(|mut stmt| stmt.query_row([key], |row| row.get(0)).optional())
            .map_err(|e| self.sql(e))
    }

    /// Records something that happened (a retry, a violation, a compaction…),
    /// optionally tied to a message.
    pub fn record_event(
        &self,
        message_id: Option<&str>,
        event_type: &str,
        details: &Value,
    ) -> Result<()> {
        if let Some(id) = message_id {
            require_message(&self.conn, &self.path, id)?;
        }
        let mut details = details.clone();
        ah_base::redact::json(&mut details);
        self.conn
            .prepare_cached(
                "INSERT INTO events (message_id, event_type, created_at, details)
                 VALUES (?1, ?2, ?3, ?4)",
            )
            .and_then(|mut stmt| {
                stmt.execute(params![
                    message_id,
                    event_type,
                    now_rfc3339(),
                    details.to_string()
                ])
            })
            .map(drop)
            .map_err(|e| self.sql(e))
    }

    /// The details of the latest event of `event_type`, if any. Read from
    /// the newest event back, so it costs the events after that one.
    pub fn last_event(&self, event_type: &str) -> Result<Option<Value>> {
        let details: Option<Option<String>> = self
            .conn
            .prepare_cached(
                "SELECT details FROM events WHERE event_type = ?1 ORDER BY id DESC LIMIT 1",
            )
            .and_then(|mut stmt| stmt.query_row([event_type], |row| row.get(0)).optional())
            .map_err(|e| self.sql(e))?;
        Ok(details
            .flatten()
            .and_then(|text| serde_json::from_str(&text).ok()))
    }

    /// The blocks of one message, whole.
    pub(super) fn blocks_of(&self, message_id: &str) -> Result<Vec<BlockRecord>> {
        self.read_blocks(BLOCKS_SQL, message_id)
    }

    /// The blocks of one message, read with `sql` (columns of [`BLOCKS_SQL`]).
    fn read_blocks(&self, sql: &str, message_id: &str) -> Result<Vec<BlockRecord>> {
        let rows = self
            .conn
            .prepare_cached(sql)
            .and_then(|mut stmt| {
                stmt.query_map([message_id], BlockRow::read)?
                    .collect::<rusqlite::Result<Vec<_>>>()
            })
            .map_err(|e| self.sql(e))?;
        rows.into_iter()
            .map(|row| {
                rows::block_from_row(row)
                    .map_err(|reason| self.corrupt(format!("message {message_id}: {reason}")))
            })
            .collect()
    }

    pub(super) fn sql(&self, error: rusqlite::Error) -> SessionError {
        classify(&self.path, error)
    }

    pub(super) fn unknown(&self, id: &str) -> SessionError {
        SessionError::UnknownMessage {
            path: self.path.clone(),
            id: id.to_string(),
        }
    }

    pub(super) fn corrupt(&self, reason: String) -> SessionError {
        SessionError::Corrupt {
            path: self.path.clone(),
            reason,
        }
    }
}

/// Fails with [`SessionError::UnknownMessage`] unless message `id` exists.
fn require_message(conn: &Connection, path: &Path, id: &str) -> Result<()> {
    let exists = conn
        .prepare_cached("SELECT 1 FROM messages WHERE id = ?1")
        .and_then(|mut stmt| stmt.exists([id]))
        .map_err(|e| classify(path, e))?;
    if exists {
        Ok(())
    } else {
        Err(SessionError::UnknownMessage {
            path: path.to_path_buf(),
            id: id.to_string(),
        })
    }
}

pub(super) fn put_context(conn: &Connection, key: &str, value: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO context (key, value) VALUES (?1, ?2)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
    )?
    .execute([key, value])
    .map(drop)
}

/// A message to store.
pub(super) struct NewMessage<'a> {
    pub(super) parent_id: Option<&'a str>,
    pub(super) role: Role,
    pub(super) blocks: &'a [BlockRecord],
    pub(super) meta: &'a MessageMeta,
    pub(super) agent: Option<&'a str>,
}

/// Stores `message` with all its blocks in `tx`, gives it the next `seq`,
/// and makes it the head.
pub(super) fn insert_message(
    tx: &rusqlite::Transaction<'_>,
    path: &Path,
    message: &NewMessage<'_>,
) -> Result<StoredMessage> {
    let NewMessage {
        parent_id,
        role,
        blocks,
        meta,
        agent,
    } = *message;
    let id = Ulid::generate().to_string();
    let created_at = now_rfc3339();
    // As it reads back: cached input counted as input (the cache's parts
    // are stored apart, from `meta`).
    let usage = meta.usage.map(|usage| Usage {
        input_tokens: usage.input_tokens
            + usage.cache_creation_input_tokens
            + usage.cache_read_input_tokens,
        output_tokens: usage.output_tokens,
        ..Usage::default()
    });
    let sql = |e| classify(path, e);
    if let Some(parent) = parent_id {
        require_message(tx, path, parent)?;
    }
    let seq: i64 = tx
        .prepare_cached("SELECT COALESCE(MAX(seq), 0) + 1 FROM messages")
        .and_then(|mut stmt| stmt.query_row([], |row| row.get(0)))
        .map_err(sql)?;
    tx.prepare_cached(
        "INSERT INTO messages (id, parent_id, role, seq, created_at, input_tokens,
             output_tokens, stop_reason, model, api_latency_ms, agent, cache_read_tokens,
             cache_write_tokens)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
    )
    .and_then(|mut stmt| {
        stmt.execute(params![
            id,
            parent_id,
            role.as_str(),
            seq,
            created_at,
            usage.map(|u| to_i64(u.input_tokens)),
            usage.map(|u| to_i64(u.output_tokens)),
            meta.stop_reason,
            meta.model,
            meta.api_latency_ms.map(to_i64),
            agent,
            meta.usage.map(|u| to_i64(u.cache_read_input_tokens)),
            meta.usage.map(|u| to_i64(u.cache_creation_input_tokens)),
        ])
    })
    .map_err(sql)?;
    let mut insert = tx
        .prepare_cached(
            "INSERT INTO content_blocks (id, message_id, block_type, seq, content,
                 tool_id, tool_name, tool_input, tool_output, is_error, duration_ms, details)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
        )
        .map_err(sql)?;
    // One row at a time: a message's pictures are not copied all at once.
    for (block_seq, block) in (1_i64..).zip(blocks) {
        let row = rows::block_to_row(block).map_err(|reason| SessionError::Invalid {
            path: path.to_path_buf(),
            reason,
        })?;
        insert
            .execute(params![
                Ulid::generate().to_string(),
                id,
                row.block_type,
                block_seq,
                row.content,
                row.tool_id,
                row.tool_name,
                row.tool_input,
                row.tool_output,
                row.is_error,
                row.duration_ms,
                row.details,
            ])
            .map_err(sql)?;
    }
    put_context(tx, HEAD_KEY, &id).map_err(sql)?;
    Ok(StoredMessage {
        id,
        parent_id: parent_id.map(str::to_string),
        role,
        seq,
        created_at,
        meta: MessageMeta {
            usage,
            ..meta.clone()
        },
        agent: agent.map(str::to_string),
        blocks: blocks.to_vec(),
    })
}
