//! The session layer: a conversation stored as a tree of messages in one
//! SQLite file per session (`<project>/.ah/<ulid>.db`).
//!
//! Every message has a parent (except roots), a per-session `seq` (1, 2, 3…
//! across the whole tree, so users can say `@N`) and its content blocks. Any
//! message can be continued, which forks the tree; the context key `head`
//! remembers where the conversation is. Beside each session, [`queue`]
//! holds the lock of the process working on it and the messages other
//! terminals send it. This layer only uses `ah_llm`.

#![forbid(unsafe_code)]

mod catalog;
mod mail;
mod orphans;
pub mod queue;
mod rows;
mod schema;
mod store;

mod tree;
mod usage;

#[cfg(test)]
mod tests;

use std::path::PathBuf;

use serde_json::Value;

use ah_llm::{Block, Message, Role, Usage};

pub use ah_base::format_rfc3339;
pub use catalog::{
    CATALOG_FILE, NAME_KEY, SessionFile, SessionSummary, list_sessions, session_files,
};
pub use mail::{Letter, Mail, MailKind};
pub use orphans::Repairs;
pub use schema::SCHEMA_VERSION;
pub use store::Session;
pub use tree::{BranchRemoval, Tree, WORKSPACE_AT_KEY};
pub use usage::{CallKind, ModelUsage, Tokens, total as total_usage};

/// One content block with what the store keeps beside it.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockRecord {
    pub block: Block,
    /// For a tool result: the name of the tool that produced it, if known.
    /// Only tool results carry this (a tool use has its name in the block).
    pub tool_name: Option<String>,
    /// For a tool result: the full, untruncated output (the block's
    /// `content` is what the model was told). Only tool results carry this.
    pub tool_output: Option<String>,
    /// For a tool result: how long the tool ran. Only tool results carry this.
    pub duration_ms: Option<u64>,
    /// Structured extras (run id, step, commit, exit code, …). For thinking
    /// blocks this must be `None` or a JSON object: the block's signature
    /// (or redacted data) is stored in it under `signature` (or `data`).
    pub details: Option<Value>,
}

impl BlockRecord {
    /// A tool result: `content` is what the model is told.
    pub fn tool_result(
        tool_use_id: &str,
        tool_name: &str,
        content: String,
        is_error: bool,
    ) -> BlockRecord {
        BlockRecord {
            block: Block::ToolResult {
                tool_use_id: tool_use_id.to_string(),
                content,
                is_error,
            },
            tool_name: Some(tool_name.to_string()),
            tool_output: None,
            duration_ms: None,
            details: None,
        }
    }
}

impl From<Block> for BlockRecord {
    fn from(block: Block) -> BlockRecord {
        BlockRecord {
            block,
            tool_name: None,
            tool_output: None,
            duration_ms: None,
            details: None,
        }
    }
}

/// What the API reported about a message. Input is stored with the cached
/// input in it, since the call read that too; the parts read from and
/// written to the prompt cache are stored apart as well, for what the call
/// cost (`Session::usage`). A stored `usage` reads back as input and output
/// only: its cache fields are 0.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MessageMeta {
    pub usage: Option<Usage>,
    pub stop_reason: Option<String>,
    pub model: Option<String>,
    pub api_latency_ms: Option<u64>,
}

/// A message as stored: its place in the tree, its metadata and its blocks.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredMessage {
    /// A ULID.
    pub id: String,
    pub parent_id: Option<String>,
    pub role: Role,
    /// 1, 2, 3… in order of creation across the whole session tree.
    pub seq: i64,
    /// RFC 3339 UTC.
    pub created_at: String,
    pub meta: MessageMeta,
    /// The agent whose conversation the message is part of (`ah org`).
    pub agent: Option<String>,
    pub blocks: Vec<BlockRecord>,
}

impl StoredMessage {
    /// The message as it is sent to the model.
    pub fn to_message(&self) -> Message {
        Message {
            role: self.role,
            content: self.blocks.iter().map(|b| b.block.clone()).collect(),
        }
    }
}

/// Why a session operation failed. Every message names the database file.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("cannot use session directory {path}: {source}; check that it exists and is writable")]
    Dir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "cannot open session database {path}: {source}; check that the directory exists and is writable"
    )]
    Open {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error(
        "{path} is not an ah session database ({reason}); pass another --db or move the file aside"
    )]
    NotASession { path: PathBuf, reason: String },
    #[error(
        "session database {path} cannot use WAL journaling (SQLite kept mode {mode}); put the .ah directory on a local file system"
    )]
    NoWal { path: PathBuf, mode: String },
    #[error(
        "session database {path} has schema version {found} but this ah supports up to {supported}: it was written by a newer ah; upgrade ah"
    )]
    NewerSchema {
        path: PathBuf,
        found: i64,
        supported: i64,
    },
    #[error(
        "session database {path} has no message {id}; list the session's messages to pick one that exists"
    )]
    UnknownMessage { path: PathBuf, id: String },
    #[error("cannot store this in session {path}: {reason}")]
    Invalid { path: PathBuf, reason: String },
    #[error(
        "session database {path} holds a bad row ({reason}); the file was modified outside ah or is damaged"
    )]
    Corrupt { path: PathBuf, reason: String },
    #[error(
        "session database {path}: {source}; if another ah is using this session, wait for it or pass another --db"
    )]
    Sqlite {
        path: PathBuf,
        source: rusqlite::Error,
    },
}

pub type Result<T, E = SessionError> = std::result::Result<T, E>;
