//! Behaviour of the session store against real SQLite files in temp dirs.

mod files;
mod mail;
mod queries;
mod tree;

use std::path::Path;

use rusqlite::Connection;
use tempfile::TempDir;

use super::*;

fn new_session() -> (TempDir, Session) {
    let dir = tempfile::tempdir().unwrap();
    let session = Session::create(&dir.path().join(".ah")).unwrap();
    (dir, session)
}

fn text(text: &str) -> Vec<BlockRecord> {
    vec![BlockRecord::from(Block::Text { text: text.into() })]
}

fn say(session: &mut Session, parent: Option<&str>, role: Role, words: &str) -> StoredMessage {
    session
        .append(parent, role, &text(words), &MessageMeta::default())
        .unwrap()
}

/// A second connection to the same file, as another process would have.
fn raw(path: &Path) -> Connection {
    Connection::open(path).unwrap()
}

fn count(conn: &Connection, table: &str) -> i64 {
    conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
        .unwrap()
}
