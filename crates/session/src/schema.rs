//! Opening a session database (and its queue, `super::queue`): connection
//! settings (WAL without a sync per commit, foreign keys, busy timeout) and
//! schema migrations keyed by `PRAGMA user_version`.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, TransactionBehavior};

use super::{Result, SessionError};

/// How long to wait for another process that holds the database lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Migration `i` takes the schema from version `i` to version `i + 1`.
/// Append new migrations; never edit a released one.
pub(super) const MIGRATIONS: &[&str] = &[
    // 0 -> 1: messages tree, content blocks, context, events.
    "CREATE TABLE messages (
        id TEXT PRIMARY KEY,
        parent_id TEXT REFERENCES messages(id),
        role TEXT,
        seq INTEGER,
        created_at TEXT,
        input_tokens INTEGER,
        output_tokens INTEGER,
        stop_reason TEXT,
        model TEXT,
        api_latency_ms INTEGER
    );
    CREATE UNIQUE INDEX messages_seq ON messages(seq);
    CREATE INDEX messages_parent ON messages(parent_id);
    CREATE TABLE content_blocks (
        id TEXT PRIMARY KEY,
        message_id TEXT REFERENCES messages(id),
        block_type TEXT,
        seq INTEGER,
        content TEXT,
        tool_id TEXT,
        tool_name TEXT,
        tool_input TEXT,
        tool_output TEXT,
        is_error INTEGER,
        duration_ms INTEGER,
        details TEXT
    );
    CREATE UNIQUE INDEX content_blocks_message_seq ON content_blocks(message_id, seq);
    CREATE TABLE context (key TEXT PRIMARY KEY, value TEXT);
    CREATE TABLE events (
        id INTEGER PRIMARY KEY,
        message_id TEXT REFERENCES messages(id),
        event_type TEXT,
        created_at TEXT,
        details TEXT
    );
    CREATE INDEX events_message ON events(message_id);",
    // 1 -> 2: the agent that wrote a message (`ah org`), and the agents'
    // inboxes. Mail names messages without foreign keys: removing a run's
    // messages (a failed start) takes its mail along (`Session::remove_branch`).
    "ALTER TABLE messages ADD COLUMN agent TEXT;
    CREATE INDEX messages_agent ON messages(agent, seq);
    CREATE TABLE mail (
        id INTEGER PRIMARY KEY,
        recipient TEXT NOT NULL,
        sender TEXT NOT NULL,
        kind TEXT NOT NULL,
        text TEXT NOT NULL,
        source TEXT,
        created_at TEXT NOT NULL,
        delivered_in TEXT
    );
    CREATE INDEX mail_pending ON mail(recipient, id) WHERE delivered_in IS NULL;
    CREATE TABLE routed (message_id TEXT PRIMARY KEY);",
    // 2 -> 3: the part of `input_tokens` read from the prompt cache and the
    // part written to it, which are billed at prices of their own. Messages
    // stored before have them null: their input counts as uncached.
    "ALTER TABLE messages ADD COLUMN cache_read_tokens INTEGER;
    ALTER TABLE messages ADD COLUMN cache_write_tokens INTEGER;",
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Opens (creating if needed) the database at `path`, configures the
/// connection and brings the schema up to [`SCHEMA_VERSION`].
pub(crate) fn open(path: &Path) -> Result<Connection> {
    open_with(path, MIGRATIONS)
}

/// Opens (creating if needed) the database at `path` whose schema is built
/// by `migrations` (migration `i` takes it from version `i` to `i + 1`).
pub(super) fn open_with(path: &Path, migrations: &[&str]) -> Result<Connection> {
    let mut conn = Connection::open(path).map_err(|source| SessionError::Open {
        path: path.to_path_buf(),
        source,
    })?;
    configure(&conn, path)?;
    migrate(&mut conn, path, migrations)?;
    Ok(conn)
}

fn configure(conn: &Connection, path: &Path) -> Result<()> {
    let sql = |e| classify(path, e);
    conn.busy_timeout(BUSY_TIMEOUT).map_err(sql)?;
    // journal_mode answers with the mode now in effect; WAL persists in the file.
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
        .map_err(sql)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(SessionError::NoWal {
            path: path.to_path_buf(),
            mode,
        });
    }
    // Commits are not synced one by one, only at checkpoints (WAL with
    // `synchronous = NORMAL`). A crash of ah, SIGKILL mid-step included,
    // loses nothing committed: the WAL is in the kernel's cache. A power
    // cut may lose the last transactions, never the file's consistency.
    // SQLite's default (FULL) syncs every commit: about eight fsyncs per
    // tool round (a message, its tool results and the events are each a
    // transaction), for a durability against power loss that the rest of
    // the run's record (step files, shadow repo) does not have either.
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(sql)?;
    conn.pragma_update(None, "foreign_keys", true).map_err(sql)
}

/// Runs the migrations the file still lacks, in one transaction. A file that
/// is already current is only read, so opening it takes no write lock.
fn migrate(conn: &mut Connection, path: &Path, migrations: &[&str]) -> Result<()> {
    let sql = |e| classify(path, e);
    let current = migrations.len() as i64;
    if check_version(conn, path, current)? == current {
        return Ok(());
    }
    // Another process may migrate between the check and the lock: check again.
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql)?;
    let found = check_version(&tx, path, current)?;
    if found == 0 {
        // A fresh file has no tables; one with tables belongs to something else.
        let tables: i64 = tx
            .query_row("SELECT count(*) FROM sqlite_master", [], |row| row.get(0))
            .map_err(sql)?;
        if tables > 0 {
            return Err(SessionError::NotASession {
                path: path.to_path_buf(),
                reason: "it is a SQLite database with other tables".to_string(),
            });
        }
    }
    let start = usize::try_from(found).unwrap_or(migrations.len());
    for migration in &migrations[start..] {
        tx.execute_batch(migration).map_err(sql)?;
    }
    tx.pragma_update(None, "user_version", current)
        .map_err(sql)?;
    tx.commit().map_err(sql)
}

/// The file's schema version, refused when it is newer than `supported`,
/// this build's.
fn check_version(conn: &Connection, path: &Path, supported: i64) -> Result<i64> {
    let found: i64 = conn
        .pragma_query_one(None, "user_version")
        .map_err(|e| classify(path, e))?;
    if found > supported {
        return Err(SessionError::NewerSchema {
            path: path.to_path_buf(),
            found,
            supported,
        });
    }
    if found < 0 {
        return Err(SessionError::NotASession {
            path: path.to_path_buf(),
            reason: format!("user_version is {found}"),
        });
    }
    Ok(found)
}

/// Turns "not a database" and "corrupt" into a clear error; other SQLite
/// failures keep their message.
pub(super) fn classify(path: &Path, error: rusqlite::Error) -> SessionError {
    match error.sqlite_error_code() {
        Some(ErrorCode::NotADatabase) => SessionError::NotASession {
            path: path.to_path_buf(),
            reason: "the file is not a SQLite database".to_string(),
        },
        Some(ErrorCode::DatabaseCorrupt) => SessionError::NotASession {
            path: path.to_path_buf(),
            reason: format!("the database is damaged: {error}"),
        },
        _ => SessionError::Sqlite {
            path: path.to_path_buf(),
            source: error,
        },
    }
}
