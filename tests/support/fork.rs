//! Forking a session the way `ah @N` does, straight in its database, for
//! tests of what a run does with a fork point: the conversation continues
//! from a message (context `head`) with the files of that point (context
//! `workspace_at`).

use std::path::Path;

use rusqlite::{Connection, OptionalExtension};

/// Continues the conversation in `db` from `message_id`, files included.
pub(crate) fn fork_at(db: &Path, message_id: &str) {
    let conn = Connection::open(db).expect("open the session db");
    for key in ["head", "workspace_at"] {
        conn.execute(
            "INSERT INTO context (key, value) VALUES (?1, ?2)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [key, message_id],
        )
        .expect("set a context value");
    }
}

/// The session's context value `key`, if set.
pub(crate) fn context(db: &Path, key: &str) -> Option<String> {
    Connection::open(db)
        .expect("open the session db")
        .query_row("SELECT value FROM context WHERE key = ?1", [key], |row| {
            row.get(0)
        })
        .optional()
        .expect("read the context")
}

/// The id of the message holding the result of tool call `tool_use_id`.
pub(crate) fn result_message(db: &Path, tool_use_id: &str) -> String {
    Connection::open(db)
        .expect("open the session db")
        .query_row(
            "SELECT message_id FROM content_blocks
             WHERE block_type = 'tool_result' AND tool_id = ?1",
            [tool_use_id],
            |row| row.get(0),
        )
        .unwrap_or_else(|e| panic!("no result of {tool_use_id}: {e}"))
}

/// The id of message `@seq`.
pub(crate) fn message_at(db: &Path, seq: i64) -> String {
    Connection::open(db)
        .expect("open the session db")
        .query_row("SELECT id FROM messages WHERE seq = ?1", [seq], |row| {
            row.get(0)
        })
        .unwrap_or_else(|e| panic!("no message @{seq}: {e}"))
}
