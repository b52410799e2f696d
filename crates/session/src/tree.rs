//! The conversation as a tree: the whole tree of one session loaded in two
//! queries ([`Tree`]), one message by its `@N`, moving the head, removing a
//! branch.

use std::collections::{HashMap, HashSet};

use rusqlite::{OptionalExtension, TransactionBehavior};

use super::rows::{self, BlockRow, MessageRow};
use super::store::{HEAD_KEY, put_context};
use super::{Result, Session, StoredMessage};

/// The context key that tells the next run which message's workspace to
/// start from (set by checkout and fork, read by the run).
pub const WORKSPACE_AT_KEY: &str = "workspace_at";

const MESSAGES_SQL: &str = "
    SELECT id, parent_id, role, seq, created_at, input_tokens, output_tokens,
           stop_reason, model, api_latency_ms, agent
    FROM messages";

/// Every block, in [`super::store::BLOCKS_SQL`] column order plus the
/// message id.
const ALL_BLOCKS_SQL: &str = "
    SELECT block_type, content, tool_id, tool_name, tool_input, tool_output,
           is_error, duration_ms, details, message_id
    FROM content_blocks ORDER BY message_id, seq";

/// `branch`: message `?1` and all its descendants. A child always has a
/// higher seq than its parent, which also bounds the walk on a damaged file.
const BRANCH_CTE: &str = "
    WITH RECURSIVE branch (id, seq) AS (
        SELECT id, seq FROM messages WHERE id = ?1
        UNION ALL
        SELECT m.id, m.seq FROM messages m JOIN branch b ON m.parent_id = b.id
        WHERE m.seq > b.seq
    )";

/// A whole session tree, messages in `seq` order.
#[derive(Debug)]
pub struct Tree {
    messages: Vec<StoredMessage>,
    by_id: HashMap<String, usize>,
    children: Vec<Vec<usize>>,
    head: Option<usize>,
}

impl Tree {
    /// Builds the tree; fails on a parent that is missing or not older than
    /// its child (which is what keeps walks finite).
    fn new(messages: Vec<StoredMessage>, head: Option<&str>) -> Result<Tree, String> {
        let by_id: HashMap<String, usize> = messages
            .iter()
            .enumerate()
            .map(|(i, m)| (m.id.clone(), i))
            .collect();
        let mut children = vec![Vec::new(); messages.len()];
        for (i, message) in messages.iter().enumerate() {
            let Some(parent) = &message.parent_id else {
                continue;
            };
            match by_id.get(parent) {
                Some(&p) if messages[p].seq < message.seq => children[p].push(i),
                _ => {
                    return Err(format!(
                        "message @{} has parent {parent}, which is missing or newer",
                        message.seq
                    ));
                }
            }
        }
        let head = head.and_then(|id| by_id.get(id).copied());
        Ok(Tree {
            messages,
            by_id,
            children,
            head,
        })
    }

    /// Every message, oldest first.
    pub fn messages(&self) -> &[StoredMessage] {
        &self.messages
    }

    /// The message numbered `seq` (`@N`).
    pub fn at(&self, seq: i64) -> Option<&StoredMessage> {
        self.messages
            .binary_search_by_key(&seq, |m| m.seq)
            .ok()
            .map(|i| &self.messages[i])
    }

    /// The message the conversation continues from.
    pub fn head(&self) -> Option<&StoredMessage> {
        self.head.map(|i| &self.messages[i])
    }

    /// The messages that answer `message`, oldest first.
    pub fn children(&self, message: &StoredMessage) -> Vec<&StoredMessage> {
        self.index(message)
            .map(|i| {
                self.children[i]
                    .iter()
                    .map(|&c| &self.messages[c])
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Messages without a parent, oldest first.
    pub fn roots(&self) -> Vec<&StoredMessage> {
        self.messages
            .iter()
            .filter(|m| m.parent_id.is_none())
            .collect()
    }

    /// Messages without children (the ends of branches), oldest first.
    pub fn tips(&self) -> Vec<&StoredMessage> {
        (0..self.messages.len())
            .filter(|&i| self.children[i].is_empty())
            .map(|i| &self.messages[i])
            .collect()
    }

    /// The messages from the root down to `message`, inclusive.
    pub fn path(&self, message: &StoredMessage) -> Vec<&StoredMessage> {
        let mut path = Vec::new();
        let mut at = self.index(message);
        while let Some(i) = at {
            path.push(&self.messages[i]);
            at = self.messages[i]
                .parent_id
                .as_ref()
                .and_then(|p| self.by_id.get(p).copied());
        }
        path.reverse();
        path
    }

    /// The newest message both `a` and `b` descend from (or are); `None`
    /// when they lie under different roots.
    pub fn common_ancestor(&self, a: &StoredMessage, b: &StoredMessage) -> Option<&StoredMessage> {
        let on_a: HashSet<&str> = self.path(a).iter().map(|m| m.id.as_str()).collect();
        self.path(b)
            .into_iter()
            .rev()
            .find(|m| on_a.contains(m.id.as_str()))
    }

    fn index(&self, message: &StoredMessage) -> Option<usize> {
        self.by_id.get(&message.id).copied()
    }
}

/// What [`Session::remove_branch`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BranchRemoval {
    /// The head is the message or below it, and moving it was not allowed;
    /// nothing was removed.
    HeadInside { head_seq: i64 },
    /// The messages removed (by seq) and, when the head was among them,
    /// the seq it moved to (`None`: no message is left above the branch).
    Removed {
        seqs: Vec<i64>,
        head_moved_to: Option<Option<i64>>,
    },
}

impl Session {
    /// The whole tree, with every block (for the tree commands; a run
    /// reads only its ancestry).
    pub fn tree(&self) -> Result<Tree> {
        let sql = |e| self.sql(e);
        let mut blocks: HashMap<String, Vec<BlockRow>> = HashMap::new();
        let mut stmt = self.conn.prepare_cached(ALL_BLOCKS_SQL).map_err(sql)?;
        let mut rows = stmt.query([]).map_err(sql)?;
        while let Some(row) = rows.next().map_err(sql)? {
            let message_id: String = row.get(9).map_err(sql)?;
            blocks
                .entry(message_id)
                .or_default()
                .push(BlockRow::read(row).map_err(sql)?);
        }
        let rows = self
            .conn
            .prepare_cached(&format!("{MESSAGES_SQL} ORDER BY seq"))
            .and_then(|mut stmt| {
                stmt.query_map([], MessageRow::read)?
                    .collect::<rusqlite::Result<Vec<_>>>()
            })
            .map_err(sql)?;
        let mut messages = Vec::with_capacity(rows.len());
        for row in rows {
            let id = row.id.clone();
            let records = blocks
                .remove(&id)
                .unwrap_or_default()
                .into_iter()
                .map(rows::block_from_row)
                .collect::<Result<Vec<_>, String>>()
                .map_err(|reason| self.corrupt(format!("message {id}: {reason}")))?;
            messages.push(row.into_stored(records).map_err(|r| self.corrupt(r))?);
        }
        let head = self.head()?;
        Tree::new(messages, head.as_deref()).map_err(|reason| self.corrupt(reason))
    }

    /// The message numbered `seq` (`@N`) with its blocks.
    pub fn message_at(&self, seq: i64) -> Result<Option<StoredMessage>> {
        let row = self
            .conn
            .prepare_cached(&format!("{MESSAGES_SQL} WHERE seq = ?1"))
            .and_then(|mut stmt| stmt.query_row([seq], MessageRow::read).optional())
            .map_err(|e| self.sql(e))?;
        let Some(row) = row else {
            return Ok(None);
        };
        let blocks = self.blocks_of(&row.id)?;
        row.into_stored(blocks)
            .map(Some)
            .map_err(|reason| self.corrupt(reason))
    }

    /// The highest `@N` in the session (0 when it is empty).
    pub fn last_seq(&self) -> Result<i64> {
        self.conn
            .prepare_cached("SELECT COALESCE(MAX(seq), 0) FROM messages")
            .and_then(|mut stmt| stmt.query_row([], |row| row.get(0)))
            .map_err(|e| self.sql(e))
    }

    /// Makes message `id` the head: the next prompt goes under it.
    pub fn set_head(&self, id: &str) -> Result<()> {
        if self.message_seq(id)?.is_none() {
            return Err(self.unknown(id));
        }
        self.set_context(HEAD_KEY, id)
    }

    /// Removes message `id` and all its descendants, with their blocks and
    /// events, in one transaction. When the head is among them it moves to
    /// the message's parent if `move_head`, else nothing is removed. A
    /// `workspace_at` inside the branch is cleared.
    pub fn remove_branch(&mut self, id: &str, move_head: bool) -> Result<BranchRemoval> {
        let path = self.path.clone();
        let sql = |e| super::schema::classify(&path, e);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql)?;
        let branch: Vec<(String, i64)> = tx
            .prepare_cached(&format!(
                "{BRANCH_CTE} SELECT id, seq FROM branch ORDER BY seq"
            ))
            .and_then(|mut stmt| {
                stmt.query_map([id], |row| Ok((row.get(0)?, row.get(1)?)))?
                    .collect()
            })
            .map_err(sql)?;
        if branch.is_empty() {
            return Err(super::SessionError::UnknownMessage {
                path: path.clone(),
                id: id.to_string(),
            });
        }
        let context = |key: &str| {
            tx.query_row("SELECT value FROM context WHERE key = ?1", [key], |row| {
                row.get::<_, String>(0)
            })
            .optional()
        };
        let in_branch = |value: &Option<String>| {
            value
                .as_ref()
                .and_then(|v| branch.iter().find(|(id, _)| id == v))
                .map(|(_, seq)| *seq)
        };
        let head = context(HEAD_KEY).map_err(sql)?;
        let workspace_at = context(WORKSPACE_AT_KEY).map_err(sql)?;
        let head_inside = in_branch(&head);
        if let (Some(head_seq), false) = (head_inside, move_head) {
            return Ok(BranchRemoval::HeadInside { head_seq });
        }
        let parent: Option<(String, i64)> = tx
            .query_row(
                "SELECT p.id, p.seq FROM messages m JOIN messages p ON p.id = m.parent_id
                 WHERE m.id = ?1",
                [id],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()
            .map_err(sql)?;
        // Messages go in one statement, so the foreign keys between them are
        // checked once they are all gone.
        for table in ["events", "content_blocks"] {
            tx.execute(
                &format!(
                    "{BRANCH_CTE} DELETE FROM {table} WHERE message_id IN (SELECT id FROM branch)"
                ),
                [id],
            )
            .map_err(sql)?;
        }
        // Mail sent from the branch goes with it; mail delivered into it is
        // pending again.
        for statement in [
            "DELETE FROM mail WHERE source IN (SELECT id FROM branch)",
            "UPDATE mail SET delivered_in = NULL WHERE delivered_in IN (SELECT id FROM branch)",
            "DELETE FROM routed WHERE message_id IN (SELECT id FROM branch)",
        ] {
            tx.execute(&format!("{BRANCH_CTE} {statement}"), [id])
                .map_err(sql)?;
        }
        tx.execute(
            &format!("{BRANCH_CTE} DELETE FROM messages WHERE id IN (SELECT id FROM branch)"),
            [id],
        )
        .map_err(sql)?;
        let head_moved_to = match (head_inside, &parent) {
            (None, _) => None,
            (Some(_), Some((parent_id, parent_seq))) => {
                put_context(&tx, HEAD_KEY, parent_id).map_err(sql)?;
                Some(Some(*parent_seq))
            }
            (Some(_), None) => {
                tx.execute("DELETE FROM context WHERE key = ?1", [HEAD_KEY])
                    .map_err(sql)?;
                Some(None)
            }
        };
        if in_branch(&workspace_at).is_some() {
            tx.execute("DELETE FROM context WHERE key = ?1", [WORKSPACE_AT_KEY])
                .map_err(sql)?;
        }
        tx.commit().map_err(sql)?;
        Ok(BranchRemoval::Removed {
            seqs: branch.into_iter().map(|(_, seq)| seq).collect(),
            head_moved_to,
        })
    }

    fn message_seq(&self, id: &str) -> Result<Option<i64>> {
        self.conn
            .prepare_cached("SELECT seq FROM messages WHERE id = ?1")
            .and_then(|mut stmt| stmt.query_row([id], |row| row.get(0)).optional())
            .map_err(|e| self.sql(e))
    }
}
