//! Which session a command works on: `--db PATH`, `--name NAME`,
//! `-S/--session PREFIX`, `-n/--new` (runs only; with `--name`, a new session
//! of that name), else the project's most recent session. Runs may create
//! the session; the other commands need one that exists.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

use super::{SessionChoice, UsageError};
use ah_record::safe_text::terminal_safe;
use ah_session::{NAME_KEY, Session, SessionSummary, list_sessions, session_files};

/// A resolved session: one that exists, or one a run is to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Existing(PathBuf),
    /// A new session: at `path` (`--db` of a missing file) or as a new
    /// `<ulid>.db`, named `name` when `--name` asked for it.
    Create {
        path: Option<PathBuf>,
        name: Option<String>,
    },
}

impl Target {
    /// Opens the session, creating it when it is new, and warns about what
    /// opening it repaired.
    pub fn open(self, ah_dir: &Path) -> Result<Session> {
        let session = match self {
            Target::Existing(path) => Session::open(&path)?,
            Target::Create { path, name } => {
                let session = match path {
                    Some(path) => Session::open(&path)?,
                    None => Session::create(ah_dir)?,
                };
                if let Some(name) = name {
                    session.set_context(NAME_KEY, &name)?;
                }
                session
            }
        };
        warn_repairs(&session);
        Ok(session)
    }
}

/// Resolves the session flags in `ah_dir`. `new` is `-n` (runs only).
pub fn resolve(ah_dir: &Path, args: &SessionChoice, new: bool) -> Result<Target> {
    // `-n --name X` is one choice: a new session named X.
    let chosen = [
        args.db.is_some(),
        args.name.is_some() || new,
        args.session.is_some(),
    ];
    if chosen.iter().filter(|&&c| c).count() > 1 {
        return Err(UsageError::Message(
            "--db, -S/--session and -n/--new or --name each choose the session: give only one \
             (-n with --name starts a new session of that name)"
                .into(),
        )
        .into());
    }
    if let Some(db) = &args.db {
        return Ok(if db.is_file() {
            Target::Existing(db.clone())
        } else {
            Target::Create {
                path: Some(db.clone()),
                name: None,
            }
        });
    }
    if let Some(prefix) = &args.session {
        return by_prefix(ah_dir, prefix).map(Target::Existing);
    }
    if let Some(name) = &args.name {
        return by_name(ah_dir, name, new);
    }
    if !new && let Some(latest) = Session::latest(ah_dir)? {
        return Ok(Target::Existing(latest));
    }
    Ok(Target::Create {
        path: None,
        name: None,
    })
}

/// Opens the session the flags name, which must exist (every command but a
/// run).
pub fn open_existing(ah_dir: &Path, args: &SessionChoice) -> Result<Session> {
    match resolve(ah_dir, args, false)? {
        target @ Target::Existing(_) => target.open(ah_dir),
        Target::Create {
            path: Some(path), ..
        } => bail!(
            "session database {} not found: pass the path of an existing session to --db",
            path.display()
        ),
        Target::Create {
            name: Some(name), ..
        } => bail!(
            "no session in {} is named {:?}: `ah sessions` lists them; a run with --name creates one",
            ah_dir.display(),
            terminal_safe(&name)
        ),
        Target::Create { .. } => bail!("no session in {} yet: run a task first", ah_dir.display()),
    }
}

fn by_prefix(ah_dir: &Path, prefix: &str) -> Result<PathBuf> {
    let wanted = prefix.to_ascii_uppercase();
    let mut matches: Vec<_> = session_files(ah_dir)?
        .into_iter()
        .filter(|file| file.id.to_string().starts_with(&wanted))
        .collect();
    match matches.len() {
        1 => Ok(matches.remove(0).path),
        0 => Err(UsageError::Message(format!(
            "no session in {} has an id starting with {:?}: `ah sessions` lists them",
            ah_dir.display(),
            terminal_safe(prefix)
        ))
        .into()),
        _ => {
            let ids: Vec<String> = matches.iter().map(|f| f.id.to_string()).collect();
            let found: Vec<SessionSummary> = list_sessions(ah_dir)?
                .into_iter()
                .filter(|s| ids.contains(&s.id))
                .collect();
            Err(UsageError::Message(format!(
                "{:?} matches {} sessions; give more of the id:\n{}",
                terminal_safe(prefix),
                found.len(),
                listing(&found)
            ))
            .into())
        }
    }
}

/// The session named `name`, or a new one so named; with `new` (`-n`), only
/// a new one.
fn by_name(ah_dir: &Path, name: &str, new: bool) -> Result<Target> {
    let named: Vec<SessionSummary> = list_sessions(ah_dir)?
        .into_iter()
        .filter(|s| s.name.as_deref() == Some(name))
        .collect();
    match named.as_slice() {
        [] => Ok(Target::Create {
            path: None,
            name: Some(name.to_string()),
        }),
        _ if new => Err(UsageError::Message(format!(
            "a session named {quoted} exists already ({}): `--name {quoted}` without -n \
             continues it; for a new session, choose another name",
            named
                .iter()
                .map(|s| s.id.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            quoted = format!("{:?}", terminal_safe(name)),
        ))
        .into()),
        [one] => Ok(Target::Existing(ah_dir.join(format!("{}.db", one.id)))),
        many => bail!(
            "{} sessions are named {:?}; choose one with -S:\n{}",
            many.len(),
            terminal_safe(name),
            listing(many)
        ),
    }
}

/// One indented line per session: id and the start of its first prompt.
fn listing(sessions: &[SessionSummary]) -> String {
    sessions
        .iter()
        .map(|s| {
            let line = match s.first_prompt {
                Some(_) => s.prompt_line(60),
                None => "(no prompt)".to_string(),
            };
            format!("  {}  {}", s.id, terminal_safe(&line))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Tells the user what opening the session repaired, and what it could not.
fn warn_repairs(session: &Session) {
    let repairs = session.repairs();
    let seqs = |seqs: &[i64]| {
        seqs.iter()
            .map(|s| format!("@{s}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !repairs.removed.is_empty() {
        eprintln!(
            "note: session {}: removed empty messages {} (left by an interrupted writer or a hand edit)",
            session.id(),
            seqs(&repairs.removed)
        );
    }
    if !repairs.kept.is_empty() {
        eprintln!(
            "warning: session {}: messages {} have no content but later messages follow them; \
             the API refuses a conversation through them: fork from an earlier message with `ah @N \"prompt\"`",
            session.id(),
            seqs(&repairs.kept)
        );
    }
}
