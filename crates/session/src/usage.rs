//! What a session's model calls cost, defined once for every report of it
//! (`ah sessions`, `ah usage`, a run's end line and its `run_end` event), so
//! they cannot disagree.
//!
//! Every billed model call leaves its tokens on the message it produced: an
//! answer (an assistant message) or a compaction summary (a user message
//! that carries usage; no other user message does). Input counts every token
//! the call read, cached ones included (see [`super::MessageMeta`]); the
//! parts read from and written to the prompt cache are counted apart too,
//! since they are billed at prices of their own.

use serde::Serialize;

use super::{Result, Session};

/// Which kind of model call a message records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CallKind {
    /// An answer in the conversation.
    Answer,
    /// A summary written to compact the conversation.
    Compaction,
}

/// The calls of one kind that one model made, and their tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelUsage {
    /// `None` for messages stored without a model.
    pub model: Option<String>,
    pub kind: CallKind,
    pub calls: u64,
    /// Every token the calls read, the cached ones included.
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// The part of `input_tokens` read from the prompt cache (0 for
    /// messages stored before ah counted it).
    pub cache_read_tokens: u64,
    /// The part of `input_tokens` written to the prompt cache.
    pub cache_write_tokens: u64,
}

/// Tokens read and written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Tokens {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// The sum of `rows`.
pub fn total(rows: &[ModelUsage]) -> Tokens {
    Tokens {
        input_tokens: rows.iter().map(|u| u.input_tokens).sum(),
        output_tokens: rows.iter().map(|u| u.output_tokens).sum(),
    }
}

impl Session {
    /// The session's model calls (all branches) by model and kind, most
    /// output first.
    pub fn usage(&self) -> Result<Vec<ModelUsage>> {
        self.usage_after(0)
    }

    /// The model calls of the messages after `@seq`: a run's own, given the
    /// last `@N` before it started.
    pub fn usage_after(&self, seq: i64) -> Result<Vec<ModelUsage>> {
        self.usage_where(
            "WITH kept(id) AS (SELECT id FROM messages WHERE seq > ?1 AND ?2 IS NULL)",
            seq,
            None,
        )
    }

    /// The model calls of the messages after `@seq` on the branches that
    /// end at `heads` (each message counted once): a run's own when several
    /// runs of one session went on side by side, each on branches of its
    /// own (an agent's one; a work loop's one per phase).
    pub fn usage_on_branches(&self, heads: &[String], seq: i64) -> Result<Vec<ModelUsage>> {
        let heads = serde_json::to_string(heads).unwrap_or_else(|_| "[]".to_string());
        self.usage_where(
            "WITH RECURSIVE kept(id) AS (
                 SELECT id FROM messages
                 WHERE id IN (SELECT value FROM json_each(?2)) AND seq > ?1
                 UNION
                 SELECT m.parent_id FROM messages m JOIN kept ON m.id = kept.id
                 JOIN messages p ON p.id = m.parent_id WHERE p.seq > ?1)",
            seq,
            Some(&heads),
        )
    }

    /// The usage of the messages `kept` lists (a `WITH` clause over `?1`, a
    /// `@seq`, and `?2`, a JSON list of message ids or null), by model and kind.
    fn usage_where(&self, kept: &str, seq: i64, head: Option<&str>) -> Result<Vec<ModelUsage>> {
        let sql = format!(
            "{kept}
             SELECT model, role = 'user', count(*), COALESCE(SUM(input_tokens), 0),
                    COALESCE(SUM(output_tokens), 0), COALESCE(SUM(cache_read_tokens), 0),
                    COALESCE(SUM(cache_write_tokens), 0)
             FROM messages
             WHERE id IN (SELECT id FROM kept) AND (role = 'assistant'
                   OR input_tokens IS NOT NULL OR output_tokens IS NOT NULL)
             GROUP BY 1, 2 ORDER BY 5 DESC, 1, 2"
        );
        let count = |n: i64| u64::try_from(n).unwrap_or(0);
        self.conn
            .prepare_cached(&sql)
            .and_then(|mut stmt| {
                stmt.query_map(rusqlite::params![seq, head], |row| {
                    Ok(ModelUsage {
                        model: row.get(0)?,
                        kind: match row.get(1)? {
                            true => CallKind::Compaction,
                            false => CallKind::Answer,
                        },
                        calls: count(row.get(2)?),
                        input_tokens: count(row.get(3)?),
                        output_tokens: count(row.get(4)?),
                        cache_read_tokens: count(row.get(5)?),
                        cache_write_tokens: count(row.get(6)?),
                    })
                })?
                .collect()
            })
            .map_err(|e| self.sql(e))
    }
}
