//! [`SessionLock`]: the owner's side of the queue. Acquiring takes the lock
//! when it is free, or when its holder died or stopped refreshing it, in
//! one IMMEDIATE transaction; a tokio task refreshes the heartbeat; the
//! owner takes queued messages, says where it stored them, and settles
//! what is left when it stops taking messages and when it lets go.
//! Dropping the last handle releases the lock.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use rusqlite::{Connection, Transaction, TransactionBehavior, params};
use tokio::task::JoinHandle;

use super::{
    Gone, HEARTBEAT_INTERVAL, Owner, ProcessId, QueueKind, Queued, now_ms, open_db, queue_path,
    queued_row, read_owner,
};
use crate::schema::classify;
use crate::{Result, SessionError};
use ah_base::time::now_rfc3339;

/// The result of [`SessionLock::acquire`].
#[derive(Debug)]
pub enum Acquire {
    /// This process holds the lock now; `took_over` says whose it was.
    Acquired {
        lock: SessionLock,
        took_over: Option<Takeover>,
    },
    /// Another live ah holds it.
    Held(Owner),
}

/// A lock taken from an owner that was gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Takeover {
    pub previous: Owner,
    pub why: Gone,
    /// Its messages that were never delivered (now `dropped`).
    pub dropped: Vec<Queued>,
}

/// The lock on one session, held by this process. Clones share it.
#[derive(Debug, Clone)]
pub struct SessionLock {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    conn: Mutex<Connection>,
    path: PathBuf,
    me: ProcessId,
    heartbeat: Mutex<Option<JoinHandle<()>>>,
    /// Held for the whole of a release: a second caller (a signal's exit
    /// at once) waits until the first has let go, rather than exit while
    /// the first's write is under way.
    released: Mutex<bool>,
}

impl SessionLock {
    /// Takes the lock of the session database `session_db` unless another
    /// live ah holds it (a lock this process holds already is taken again,
    /// as a second handle). `accepting` says whether steering and
    /// follow-ups may be queued for this process.
    pub fn acquire(session_db: &Path, accepting: bool) -> Result<Acquire> {
        let path = queue_path(session_db);
        let mut conn = open_db(&path)?;
        let me = ProcessId::current();
        let sql = |e| classify(&path, e);
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql)?;
        let now = now_ms();
        let mut took_over = None;
        if let Some(owner) = read_owner(&tx).map_err(sql)?
            && owner.process != me
        {
            let Some(why) = owner.gone(now) else {
                return Ok(Acquire::Held(owner));
            };
            let reason = format!(
                "ah process {} stopped before delivering it",
                owner.process.pid
            );
            let dropped = settle(&tx, None, "interrupted", &reason).map_err(sql)?;
            took_over = Some(Takeover {
                previous: owner,
                why,
                dropped,
            });
        }
        tx.execute(
            "INSERT OR REPLACE INTO lock (id, pid, started, heartbeat_ms, accepting, acquired_at)
             VALUES (1, ?1, ?2, ?3, ?4, ?5)",
            params![me.pid, me.started as i64, now, accepting, now_rfc3339()],
        )
        .map_err(sql)?;
        tx.commit().map_err(sql)?;
        let lock = SessionLock {
            inner: Arc::new(Inner {
                conn: Mutex::new(conn),
                path,
                me,
                heartbeat: Mutex::new(None),
                released: Mutex::new(false),
            }),
        };
        Ok(Acquire::Acquired { lock, took_over })
    }

    /// The queue file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Starts the tokio task that refreshes the heartbeat every
    /// [`HEARTBEAT_INTERVAL`] until the lock is released. If another
    /// process took the lock meanwhile (this one had stopped refreshing
    /// it for too long), the task calls `on_lost` with the new owner and
    /// stops. Must be called inside a tokio runtime.
    pub fn start_heartbeat(&self, on_lost: impl FnOnce(Option<Owner>) + Send + 'static) {
        self.heartbeat_every(HEARTBEAT_INTERVAL, on_lost);
    }

    pub(super) fn heartbeat_every(
        &self,
        interval: Duration,
        on_lost: impl FnOnce(Option<Owner>) + Send + 'static,
    ) {
        let weak: Weak<Inner> = Arc::downgrade(&self.inner);
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval);
            tick.tick().await;
            loop {
                tick.tick().await;
                let Some(inner) = weak.upgrade() else { return };
                let refreshed = tokio::task::spawn_blocking(move || inner.refresh()).await;
                match refreshed {
                    Ok(Ok(Refresh::Held)) => {}
                    Ok(Ok(Refresh::Lost(owner))) => return on_lost(owner),
                    // A busy or failing database: try again at the next tick;
                    // only 3 missed ticks in a row make the lock stale.
                    Ok(Err(_)) | Err(_) => {}
                }
            }
        });
        *lock(&self.inner.heartbeat) = Some(task);
    }

    /// Takes the pending messages of `kind`, oldest first; each message is
    /// taken by one reader only. Nothing is taken once this process no
    /// longer holds the lock.
    pub fn take(&self, kind: QueueKind) -> Result<Vec<Queued>> {
        self.inner.write(|tx, me| {
            if !owns(tx, me)? {
                return Ok(Vec::new());
            }
            take_pending(tx, Some(kind))
        })
    }

    /// Message `ids`, taken, are stored in the session as `message_id`.
    pub fn delivered(&self, ids: &[i64], message_id: &str) -> Result<()> {
        self.inner.write(|tx, _| {
            let mut update = tx.prepare_cached(
                "UPDATE queue SET status = 'delivered', message_id = ?2
                 WHERE id = ?1 AND status = 'taken'",
            )?;
            for id in ids {
                update.execute(params![id, message_id])?;
            }
            Ok(())
        })
    }

    /// The model ended its turn at session message `head`: what was
    /// delivered is answered there, and every pending message (steering or
    /// follow-up, oldest first) is taken to start the next turn. When there
    /// is none, this process stops taking messages, in the same
    /// transaction, so none can arrive unseen.
    pub fn turn_ended(&self, head: &str) -> Result<Vec<Queued>> {
        self.inner.write(|tx, me| {
            if !owns(tx, me)? {
                return Ok(Vec::new());
            }
            answer(tx, Some(head), "done")?;
            let taken = take_pending(tx, None)?;
            if taken.is_empty() {
                tx.execute("UPDATE lock SET accepting = 0", [])?;
            }
            Ok(taken)
        })
    }

    /// Stops taking messages: what was delivered is answered at `head` with
    /// `outcome` (`done`, `aborted`, …), and what was not is dropped and
    /// returned, so the caller can say so.
    pub fn close(&self, head: Option<&str>, outcome: &str) -> Result<Vec<Queued>> {
        let pid = self.inner.me.pid;
        self.inner.write(|tx, me| {
            if !owns(tx, me)? {
                return Ok(Vec::new());
            }
            let reason = format!("ah process {pid} stopped ({outcome}) before delivering it");
            let dropped = settle(tx, head, outcome, &reason)?;
            tx.execute("UPDATE lock SET accepting = 0", [])?;
            Ok(dropped)
        })
    }

    /// Lets go of the lock (if this process still holds it) and stops the
    /// heartbeat; messages not delivered are dropped and returned. Only the
    /// first call does anything.
    pub fn release(&self) -> Result<Vec<Queued>> {
        self.inner.release()
    }
}

/// What a heartbeat found.
enum Refresh {
    Held,
    /// Someone else holds the lock now, or no one.
    Lost(Option<Owner>),
}

impl Inner {
    /// Runs `work` in one IMMEDIATE transaction on the queue.
    fn write<T>(
        &self,
        work: impl FnOnce(&Transaction<'_>, ProcessId) -> rusqlite::Result<T>,
    ) -> Result<T> {
        let sql = |e| classify(&self.path, e);
        let mut conn = lock(&self.conn);
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql)?;
        let value = work(&tx, self.me).map_err(sql)?;
        tx.commit().map_err(sql)?;
        Ok(value)
    }

    fn refresh(&self) -> Result<Refresh> {
        self.write(|tx, me| {
            let changed = tx.execute(
                "UPDATE lock SET heartbeat_ms = ?1 WHERE pid = ?2 AND started = ?3",
                params![now_ms(), me.pid, me.started as i64],
            )?;
            Ok(if changed == 1 {
                Refresh::Held
            } else {
                Refresh::Lost(read_owner(tx)?)
            })
        })
    }

    fn release(&self) -> Result<Vec<Queued>> {
        let mut released = lock(&self.released);
        if *released {
            return Ok(Vec::new());
        }
        *released = true;
        if let Some(task) = lock(&self.heartbeat).take() {
            task.abort();
        }
        let pid = self.me.pid;
        self.write(|tx, me| {
            if !owns(tx, me)? {
                return Ok(Vec::new());
            }
            let reason = format!("ah process {pid} exited before delivering it");
            let dropped = settle(tx, None, "exited", &reason)?;
            tx.execute("DELETE FROM lock", [])?;
            Ok(dropped)
        })
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The last handle is gone (an early return, an error): let go. A
        // failure leaves the row, which the next ah takes over once this
        // process has exited.
        let _: Result<Vec<Queued>, SessionError> = self.release();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A thread that panicked holding the connection left no transaction
    // open (rusqlite rolls back on drop): the connection is usable.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Whether `me` holds the lock.
fn owns(tx: &Transaction<'_>, me: ProcessId) -> rusqlite::Result<bool> {
    Ok(read_owner(tx)?.is_some_and(|owner| owner.process == me))
}

/// Marks pending messages (of `kind`, or all) taken and returns them,
/// oldest first.
fn take_pending(tx: &Transaction<'_>, kind: Option<QueueKind>) -> rusqlite::Result<Vec<Queued>> {
    let mut stmt = tx.prepare_cached(
        "UPDATE queue SET status = 'taken', taken_at = ?1
         WHERE status = 'pending' AND (?2 IS NULL OR kind = ?2)
         RETURNING id, kind, text",
    )?;
    let mut taken = stmt
        .query_map(
            params![now_rfc3339(), kind.map(QueueKind::as_str)],
            queued_row,
        )?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    // RETURNING gives no order.
    taken.sort_by_key(|queued| queued.id);
    Ok(taken)
}

/// Delivered messages are answered at `head` with `outcome`.
fn answer(tx: &Transaction<'_>, head: Option<&str>, outcome: &str) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "UPDATE queue SET status = 'answered', answer_head = ?1, outcome = ?2, finished_at = ?3
         WHERE status = 'delivered'",
    )?
    .execute(params![head, outcome, now_rfc3339()])
    .map(drop)
}

/// Delivered messages are answered; the ones never delivered are dropped
/// for `reason` and returned, oldest first.
fn settle(
    tx: &Transaction<'_>,
    head: Option<&str>,
    outcome: &str,
    reason: &str,
) -> rusqlite::Result<Vec<Queued>> {
    answer(tx, head, outcome)?;
    let mut stmt = tx.prepare_cached(
        "UPDATE queue SET status = 'dropped', outcome = ?1, finished_at = ?2
         WHERE status IN ('pending', 'taken')
         RETURNING id, kind, text",
    )?;
    let mut dropped = stmt
        .query_map(params![reason, now_rfc3339()], queued_row)?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    dropped.sort_by_key(|queued| queued.id);
    Ok(dropped)
}
