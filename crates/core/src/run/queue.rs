//! One session, several terminals: a run takes the session's lock (or, when
//! a live ah holds it, queues its prompt as a follow-up for that ah), `ah
//! compact` takes it without accepting messages, and `ah --steer MSG` /
//! `ah --followup MSG` queue a message for the ah working on the session.
//! With `--wait`, a queued follow-up is followed until its turn is answered.

mod wait;

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

use super::{Outcome, RunOptions, resolve_project};
use ah_record::safe_text::terminal_safe;
use ah_session::Session;
use ah_session::queue::{
    Acquire, Enqueued, Gone, Owner, Queue, QueueKind, Queued, SessionLock, Takeover,
};

/// What became of a run's claim on its session.
pub(crate) enum Claim {
    /// This process holds the session; the run goes on.
    Owner(SessionLock),
    /// Another ah holds it; the prompt was queued for it.
    Queued(Outcome),
}

/// Takes `session`'s lock for a run, accepting steering and follow-ups, and
/// starts its heartbeat. When a live ah holds the session, `task` is queued
/// for it as a follow-up instead (and, with `wait`, followed to its answer).
pub(crate) async fn claim_for_run(session: &Session, task: &str, wait: bool) -> Result<Claim> {
    match SessionLock::acquire(session.path(), true)? {
        Acquire::Acquired { lock, took_over } => {
            hold(&lock, &session.id(), took_over.as_ref());
            Ok(Claim::Owner(lock))
        }
        Acquire::Held(owner) => {
            let answered =
                send_to(session.path(), QueueKind::Followup, task, wait, Some(owner)).await?;
            Ok(Claim::Queued(Outcome::Queued { answered }))
        }
    }
}

/// Takes `session`'s lock, or says who holds it: for work that takes no
/// messages (`ah compact`: `accepting` false) or that takes steering and
/// follow-ups but whose own prompt cannot be queued (`ah work`).
pub fn claim_exclusive(session: &Session, accepting: bool) -> Result<SessionLock> {
    match SessionLock::acquire(session.path(), accepting)? {
        Acquire::Acquired { lock, took_over } => {
            hold(&lock, &session.id(), took_over.as_ref());
            Ok(lock)
        }
        Acquire::Held(owner) => bail!(
            "session {} is in use by ah process {}: wait for it to finish (or send it a \
             message with --steer or --followup)",
            session.id(),
            owner.process.pid
        ),
    }
}

/// Queues `text` as steering for the run that holds the session at `db`
/// (a live key's message), as `ah --steer` does; the message's id.
pub fn steer(db: &Path, text: &str) -> Result<i64> {
    match Queue::open(db)?.enqueue(QueueKind::Steer, text)? {
        Enqueued::Queued { id, .. } => Ok(id),
        Enqueued::NotAccepting(_) | Enqueued::NoOwner => {
            bail!("the run takes no more messages (its agent loop is over)")
        }
    }
}

/// What was not delivered when a lock was closed, released or taken over:
/// one line per message.
pub(crate) fn dropped_lines(dropped: &[Queued]) -> impl Iterator<Item = String> + '_ {
    dropped.iter().map(|message| {
        format!(
            "queued {} #{} was not delivered: {}",
            kind_name(message.kind),
            message.id,
            terminal_safe(&message.text)
        )
    })
}

/// `ah --steer MSG` and `ah --followup MSG [--wait]`: queues MSG for the
/// ah working on the project's latest session (or `--db`).
pub async fn send(args: &RunOptions) -> Result<Outcome> {
    let (kind, text) = match (&args.steer, &args.followup) {
        (Some(text), _) => (QueueKind::Steer, text),
        (None, Some(text)) => (QueueKind::Followup, text),
        (None, None) => bail!("nothing to send: pass --steer MSG or --followup MSG"),
    };
    if text.trim().is_empty() {
        return Err(super::UsageError::Message(format!(
            "the {} is empty: say what the running ah should know",
            kind_name(kind)
        ))
        .into());
    }
    let db = session_path(args)?;
    match send_to(&db, kind, text, args.wait, None).await {
        Err(err) if err.downcast_ref::<NoOwner>().is_some() => bail!(
            "{err}: to send this as a prompt of its own, run: {}",
            prompt_command(args, text)
        ),
        result => result.map(|answered| Outcome::Queued { answered }),
    }
}

/// Nobody holds the session a steering message or follow-up was sent to.
#[derive(Debug, thiserror::Error)]
#[error("no ah is working on session {session}, so there is nothing to {what}")]
struct NoOwner {
    session: String,
    what: &'static str,
}

/// The command that runs `text` as a prompt on the session `args` aimed at:
/// the same `-C` and session flag, every word quoted for a shell.
fn prompt_command(args: &RunOptions, text: &str) -> String {
    let mut words = vec!["ah".to_string()];
    if let Some(project) = &args.project {
        words.push("-C".into());
        words.push(shell_word(&project.to_string_lossy()));
    }
    let which = &args.session;
    let flag = match (&which.db, &which.name, &which.session) {
        (Some(db), _, _) => Some(("--db", db.to_string_lossy().into_owned())),
        (None, Some(name), _) => Some(("--name", name.clone())),
        (None, None, Some(prefix)) => Some(("-S", prefix.clone())),
        (None, None, None) => None,
    };
    if let Some((flag, value)) = flag {
        words.push(flag.into());
        words.push(shell_word(&value));
    }
    // A prompt that starts like a flag must not be read as one.
    if text.starts_with('-') {
        words.push("--".into());
    }
    words.push(shell_quote(text));
    words.join(" ")
}

/// Queues `text` for the live ah holding the session `db`. `seen` is the
/// owner a caller already found (a run that could not take the lock): if it
/// is gone by now, the caller is told to run again rather than queue.
/// With `wait`, whether the turn it started ended well; else true.
async fn send_to(
    db: &Path,
    kind: QueueKind,
    text: &str,
    wait: bool,
    seen: Option<Owner>,
) -> Result<bool> {
    let mut queue = Queue::open(db)?;
    let session = session_id(db);
    match queue.enqueue(kind, text)? {
        Enqueued::Queued { id, owner } => {
            let pid = owner.process.pid;
            let when = match kind {
                QueueKind::Steer => {
                    "it reaches the model at the next tool round (the turn's tool calls not \
                     yet run are skipped)"
                }
                QueueKind::Followup => "it starts a turn when the current one ends",
            };
            let what = if seen.is_some() {
                format!(
                    "session {session} is in use by ah process {pid}: your prompt is queued as follow-up #{id}"
                )
            } else {
                format!(
                    "queued {} #{id} for ah process {pid} (session {session})",
                    kind_name(kind)
                )
            };
            if wait {
                eprintln!("{what}; {when}. Waiting for its answer…");
                return wait::answer(&mut queue, db, id, owner).await;
            }
            let hint = if kind == QueueKind::Followup {
                " (pass --wait to wait for its answer)"
            } else {
                ""
            };
            eprintln!("{what}; {when}{hint}");
            Ok(true)
        }
        Enqueued::NotAccepting(owner) => bail!(
            "session {session} is in use by ah process {}, which is finishing its run \
             (reviewing the patch) or compacting and takes no messages now: wait for it, or \
             start a new session with -n",
            owner.process.pid
        ),
        Enqueued::NoOwner if seen.is_some() => bail!(
            "the ah that held session {session} stopped while this one started: run the \
             prompt again"
        ),
        Enqueued::NoOwner => Err(NoOwner {
            session,
            what: match kind {
                QueueKind::Steer => "steer",
                QueueKind::Followup => "follow up",
            },
        }
        .into()),
    }
}

/// Starts the heartbeat of a lock just taken, and says whose it was.
fn hold(lock: &SessionLock, session: &str, took_over: Option<&Takeover>) {
    if let Some(takeover) = took_over {
        let pid = takeover.previous.process.pid;
        let why = match takeover.why {
            Gone::Dead => "is no longer running".to_string(),
            Gone::Stale { secs } => format!("has not refreshed its lock for {secs} s"),
        };
        eprintln!("taking over session {session} from ah process {pid}, which {why}");
        for line in dropped_lines(&takeover.dropped) {
            eprintln!("{line}");
        }
    }
    let session = session.to_string();
    lock.start_heartbeat(move |owner| {
        let now = match owner {
            Some(owner) => format!("ah process {} holds it now", owner.process.pid),
            None => "no process holds it now".to_string(),
        };
        eprintln!(
            "warning: this ah lost its lock on session {session} ({now}): messages sent with \
             --steer or --followup reach the other process, not this one"
        );
    });
}

/// The session `--steer`/`--followup` talk to: the one `--db`, `--name` or
/// `-S` names, else the project's latest.
fn session_path(args: &RunOptions) -> Result<PathBuf> {
    let ah_dir = resolve_project(args.project.as_deref())?.join(".ah");
    let session = super::resolve::open_existing(&ah_dir, &args.session)?;
    Ok(session.path().to_path_buf())
}

fn session_id(db: &Path) -> String {
    db.file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn kind_name(kind: QueueKind) -> &'static str {
    match kind {
        QueueKind::Steer => "steering message",
        QueueKind::Followup => "follow-up",
    }
}

/// `text` as one shell word.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// `text` as one shell word, quoted only when a shell would read it otherwise.
pub(super) fn shell_word(text: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./:@%+=,".contains(c);
    if !text.is_empty() && text.chars().all(plain) {
        text.to_string()
    } else {
        shell_quote(text)
    }
}
