//! The list of a project's sessions (`ah sessions`, and finding a session
//! by name or id prefix) without opening every database each time.
//!
//! A summary costs a few indexed queries, but opening a SQLite file in WAL
//! mode is what dominates, and a project can hold thousands of sessions. So
//! summaries are kept in `<project>/.ah/sessions.json`, each with the size
//! and modification time of its `.db` and `.db-wal` files: listing is one
//! directory read and two `stat`s per session, and only sessions whose files
//! changed since (or are new) are opened again. The file is only a cache:
//! it is rewritten whole (temporary file and rename), a damaged or missing
//! one is rebuilt, and failing to write it only costs speed.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use serde::{Deserialize, Serialize};
use ulid::Ulid;

use super::{Result, Session, SessionError};
use ah_base::time::format_rfc3339;

/// The cache file in the project's `.ah/`.
pub const CATALOG_FILE: &str = "sessions.json";

/// The context key that holds a session's name (`--name`).
pub const NAME_KEY: &str = "name";

/// How much of the first prompt a summary keeps, in characters.
const PROMPT_CHARS: i64 = 200;

/// Bumped when [`SessionSummary`] changes, so old caches are rebuilt.
const CATALOG_VERSION: u32 = 1;

/// What `ah sessions` shows of one session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionSummary {
    /// The file name without `.db` (a ULID).
    pub id: String,
    /// The context key `name`, if set.
    pub name: Option<String>,
    /// When the session was created (from its ULID), RFC 3339 UTC.
    pub created_at: String,
    pub messages: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// The start of the first prompt (at most 200 characters).
    pub first_prompt: Option<String>,
    /// Why the session could not be read (then the counts are 0). Such a
    /// summary is not cached: the file is tried again next time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl SessionSummary {
    /// The first line of the first prompt, at most `chars` characters
    /// (empty when there is no prompt), for one-line listings.
    pub fn prompt_line(&self, chars: usize) -> String {
        let prompt = self.first_prompt.as_deref().unwrap_or_default();
        let first = prompt.lines().next().unwrap_or_default();
        first.chars().take(chars).collect()
    }

    /// A summary with only what the file name tells, and `error`.
    fn unreadable(id: &str, error: Option<String>) -> SessionSummary {
        let created_at = Ulid::from_string(id)
            .map(|ulid| format_rfc3339(ulid.datetime()))
            .unwrap_or_default();
        SessionSummary {
            id: id.to_string(),
            name: None,
            created_at,
            messages: 0,
            input_tokens: 0,
            output_tokens: 0,
            first_prompt: None,
            error,
        }
    }
}

/// A session file found in `.ah/`.
#[derive(Debug, Clone)]
pub struct SessionFile {
    pub id: Ulid,
    pub path: PathBuf,
}

/// The cache on disk.
#[derive(Default, Serialize, Deserialize)]
struct Catalog {
    version: u32,
    entries: HashMap<String, Entry>,
}

#[derive(Clone, Serialize, Deserialize)]
struct Entry {
    stamp: Stamp,
    summary: SessionSummary,
}

/// Size and modification time (ns) of the `.db` and `.db-wal` files.
type Stamp = [u64; 4];

impl Session {
    /// This session's summary: a count, its usage and one block of text.
    pub fn summary(&self) -> Result<SessionSummary> {
        let sql = |e| self.sql(e);
        let messages: i64 = self
            .conn
            .query_row("SELECT count(*) FROM messages", [], |row| row.get(0))
            .map_err(sql)?;
        let tokens = super::usage::total(&self.usage()?);
        let first_prompt: Option<String> =
            rusqlite::OptionalExtension::optional(self.conn.query_row(
                "SELECT substr(b.content, 1, ?1)
                 FROM messages m JOIN content_blocks b ON b.message_id = m.id
                 WHERE m.role = 'user' AND b.block_type = 'text'
                 ORDER BY m.seq, b.seq LIMIT 1",
                [PROMPT_CHARS],
                |row| row.get(0),
            ))
            .map_err(sql)?;
        let count = |n: i64| u64::try_from(n).unwrap_or(0);
        Ok(SessionSummary {
            name: self.context(NAME_KEY)?,
            messages: count(messages),
            input_tokens: tokens.input_tokens,
            output_tokens: tokens.output_tokens,
            first_prompt,
            ..SessionSummary::unreadable(&self.id(), None)
        })
    }
}

/// The `<ulid>.db` files in `ah_dir`, newest first. A missing directory has
/// none.
pub fn session_files(ah_dir: &Path) -> Result<Vec<SessionFile>> {
    let dir_err = |source| SessionError::Dir {
        path: ah_dir.to_path_buf(),
        source,
    };
    let entries = match fs::read_dir(ah_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(dir_err(e)),
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(dir_err)?;
        let name = entry.file_name();
        let Some(id) = name
            .to_str()
            .and_then(|name| name.strip_suffix(".db"))
            .and_then(|stem| Ulid::from_string(stem).ok())
        else {
            continue;
        };
        let path = entry.path();
        // The entry's type needs no stat; a symlink is followed.
        let is_file = match entry.file_type() {
            Ok(kind) if kind.is_symlink() => path.is_file(),
            Ok(kind) => kind.is_file(),
            Err(_) => false,
        };
        if is_file {
            files.push(SessionFile { id, path });
        }
    }
    files.sort_by_key(|f| std::cmp::Reverse(f.id));
    Ok(files)
}

/// Summaries of every session in `ah_dir`, newest first, from the cache
/// where the files have not changed.
pub fn list_sessions(ah_dir: &Path) -> Result<Vec<SessionSummary>> {
    let files = session_files(ah_dir)?;
    let cache_path = ah_dir.join(CATALOG_FILE);
    let mut cache = fs::read(&cache_path)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Catalog>(&bytes).ok())
        .filter(|catalog| catalog.version == CATALOG_VERSION)
        .unwrap_or_default();
    // Stamps are taken before a file is opened: a write after that changes
    // the stamp, so a cached summary is never older than its stamp says.
    let stamps: Vec<Stamp> = files.iter().map(|file| stamp(&file.path)).collect();
    let mut stale = Vec::new();
    let mut summaries: Vec<Option<SessionSummary>> = Vec::with_capacity(files.len());
    for (i, file) in files.iter().enumerate() {
        let cached = cache
            .entries
            .get(&file.id.to_string())
            .filter(|entry| entry.stamp == stamps[i]);
        match cached {
            Some(entry) => summaries.push(Some(entry.summary.clone())),
            None => {
                summaries.push(None);
                stale.push(i);
            }
        }
    }
    if stale.is_empty() && cache.entries.len() == files.len() {
        return Ok(summaries.into_iter().flatten().collect());
    }
    for (i, fresh) in summarise_all(&files, &stale) {
        summaries[i] = Some(fresh);
    }
    let summaries: Vec<SessionSummary> = summaries.into_iter().flatten().collect();
    cache = Catalog {
        version: CATALOG_VERSION,
        entries: stamps
            .into_iter()
            .zip(&summaries)
            .filter(|(_, summary)| summary.error.is_none())
            .map(|(stamp, summary)| {
                let entry = Entry {
                    stamp,
                    summary: summary.clone(),
                };
                (summary.id.clone(), entry)
            })
            .collect(),
    };
    save(ah_dir, &cache);
    Ok(summaries)
}

/// Opens the sessions at `which` (indexes into `files`) and summarises
/// them, one thread per core. A session that cannot be read gets a summary
/// that says why.
fn summarise_all(files: &[SessionFile], which: &[usize]) -> Vec<(usize, SessionSummary)> {
    let summarise = |file: &SessionFile| {
        Session::open(&file.path)
            .and_then(|session| session.summary())
            .unwrap_or_else(|e| {
                SessionSummary::unreadable(&file.id.to_string(), Some(e.to_string()))
            })
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = which.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let workers: Vec<_> = which
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .map(|&i| (i, summarise(&files[i])))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut all = Vec::with_capacity(which.len());
        for worker in workers {
            match worker.join() {
                Ok(part) => all.extend(part),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        all
    })
}

/// Size and modification time of the database and its WAL (zeros for a
/// file that is missing). Reading a session leaves both as they were, unless
/// closing it checkpoints a WAL another process left behind: that costs one
/// more reading next time, never a stale summary.
fn stamp(db: &Path) -> Stamp {
    let of = |path: &Path| {
        fs::metadata(path).map_or((0, 0), |meta| {
            let mtime = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
            (meta.len(), mtime)
        })
    };
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    let (db_len, db_time) = of(db);
    let (wal_len, wal_time) = of(Path::new(&wal));
    [db_len, db_time, wal_len, wal_time]
}

/// Writes the cache whole through a temporary file, so readers never see
/// half of it. A failure only means the next listing opens more files.
fn save(ah_dir: &Path, catalog: &Catalog) {
    let Ok(json) = serde_json::to_vec(catalog) else {
        return;
    };
    let Ok(mut file) = tempfile::NamedTempFile::new_in(ah_dir) else {
        return;
    };
    if io::Write::write_all(&mut file, &json).is_ok() {
        let _ = file.persist(ah_dir.join(CATALOG_FILE));
    }
}
