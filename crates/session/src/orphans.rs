//! Messages without content blocks. ah stores a message and its blocks in
//! one transaction, so such a row comes from an older writer that crashed
//! between the two, or from a hand edit. The API refuses empty messages, so
//! opening a session removes them, with their events, when that loses
//! nothing:
//!
//! - a message that has children is kept: removing it would orphan its
//!   replies or force re-parenting them onto another message, which changes
//!   what the model was told. It is reported in [`Repairs::kept`] so the
//!   CLI can warn and point at a fork before it;
//! - the head is kept: it is where a live run continues (an empty model
//!   answer is stored as an empty message), and deleting it under that run
//!   would make its next append fail.
//!
//! Finding them is one query: one probe of the `content_blocks` index per
//! message, and one of the `messages(parent_id)` index per empty message.
//! The write lock is taken only when something is to be removed.

use rusqlite::{TransactionBehavior, params};

use super::store::HEAD_KEY;
use super::{Result, Session};

/// Messages with no blocks and whether another message answers them,
/// newest first.
const EMPTY_SQL: &str = "
    SELECT m.id, m.seq,
           EXISTS (SELECT 1 FROM messages c WHERE c.parent_id = m.id)
    FROM messages m
    WHERE NOT EXISTS (SELECT 1 FROM content_blocks b WHERE b.message_id = m.id)
    ORDER BY m.seq DESC";

/// What opening a session repaired, by `seq` (the `@N` users see).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Repairs {
    /// Empty messages that were removed, with their events.
    pub removed: Vec<i64>,
    /// Empty messages kept because other messages follow them (an empty
    /// head without children is kept silently: it is a live answer).
    pub kept: Vec<i64>,
}

/// One empty message.
struct Empty {
    id: String,
    seq: i64,
    has_children: bool,
}

impl Session {
    /// Removes empty, childless messages other than the head (see the
    /// module doc); removing one may leave its empty parent childless, so
    /// this repeats until nothing more goes. One transaction.
    pub(super) fn remove_orphans(&mut self) -> Result<Repairs> {
        let head = self.context(HEAD_KEY)?;
        let removable = |empties: &[Empty]| {
            empties
                .iter()
                .any(|e| !e.has_children && Some(&e.id) != head.as_ref())
        };
        let empties = self.empty_messages()?;
        if !removable(&empties) {
            return Ok(Repairs {
                removed: Vec::new(),
                kept: with_children(&empties),
            });
        }
        let path = self.path.clone();
        let sql = |e| super::schema::classify(&path, e);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql)?;
        let mut removed = Vec::new();
        let kept = loop {
            let empties = read_empties(&tx).map_err(sql)?;
            if !removable(&empties) {
                break with_children(&empties);
            }
            for empty in &empties {
                if empty.has_children || Some(&empty.id) == head.as_ref() {
                    continue;
                }
                tx.execute("DELETE FROM events WHERE message_id = ?1", [&empty.id])
                    .and_then(|_| tx.execute("DELETE FROM messages WHERE id = ?1", [&empty.id]))
                    .map_err(sql)?;
                removed.push(empty.seq);
            }
        };
        tx.commit().map_err(sql)?;
        removed.sort_unstable();
        Ok(Repairs { removed, kept })
    }

    fn empty_messages(&self) -> Result<Vec<Empty>> {
        read_empties(&self.conn).map_err(|e| self.sql(e))
    }
}

/// The seqs of the empty messages that others follow, oldest first.
fn with_children(empties: &[Empty]) -> Vec<i64> {
    empties
        .iter()
        .rev()
        .filter(|e| e.has_children)
        .map(|e| e.seq)
        .collect()
}

fn read_empties(conn: &rusqlite::Connection) -> rusqlite::Result<Vec<Empty>> {
    conn.prepare_cached(EMPTY_SQL)?
        .query_map(params![], |row| {
            Ok(Empty {
                id: row.get(0)?,
                seq: row.get(1)?,
                has_children: row.get(2)?,
            })
        })?
        .collect()
}
