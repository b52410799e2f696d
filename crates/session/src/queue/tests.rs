//! The lock and the queue against real SQLite files and real processes.

use std::collections::BTreeSet;
use std::process::{Child, Command};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use tempfile::TempDir;

use super::*;

/// A temp dir and the path of a session database in it (the queue needs
/// no session file).
fn db() -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("01J0000000000000000000000.db");
    (dir, path)
}

fn sleeper() -> Child {
    Command::new("sleep").arg("60").spawn().unwrap()
}

/// Records `child` as the lock's holder, as a running ah would.
fn claim(session_db: &Path, child: &Child, heartbeat_ms: i64, accepting: bool) -> Owner {
    // Opening creates the schema.
    drop(Queue::open(session_db).unwrap());
    let process = ProcessId::of(child.id());
    let conn = Connection::open(queue_path(session_db)).unwrap();
    conn.execute(
        "INSERT OR REPLACE INTO lock VALUES (1, ?1, ?2, ?3, ?4, 'then')",
        params![process.pid, process.started as i64, heartbeat_ms, accepting],
    )
    .unwrap();
    Owner {
        process,
        heartbeat_ms,
        accepting,
    }
}

fn acquired(result: Acquire) -> (SessionLock, Option<Takeover>) {
    match result {
        Acquire::Acquired { lock, took_over } => (lock, took_over),
        Acquire::Held(owner) => panic!("held by {owner:?}"),
    }
}

fn queued(result: Enqueued) -> i64 {
    match result {
        Enqueued::Queued { id, .. } => id,
        other => panic!("not queued: {other:?}"),
    }
}

#[test]
fn the_queue_file_sits_beside_the_session() {
    assert_eq!(
        queue_path(Path::new("/p/.ah/01ABC.db")),
        Path::new("/p/.ah/01ABC.queue.db")
    );
    let (_dir, path) = db();
    let queue = Queue::open(&path).unwrap();
    let conn = Connection::open(queue.path()).unwrap();
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, QUEUE_SCHEMA_VERSION);
    let mode: String = conn
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}

#[test]
fn a_live_owner_holds_the_lock_and_a_dead_one_is_taken_over() {
    let (_dir, path) = db();
    let mut child = sleeper();
    let owner = claim(&path, &child, now_ms(), true);
    match SessionLock::acquire(&path, true).unwrap() {
        Acquire::Held(held) => assert_eq!(held, owner),
        Acquire::Acquired { .. } => panic!("a live owner's lock was taken"),
    }
    let mut queue = Queue::open(&path).unwrap();
    let id = queued(queue.enqueue(QueueKind::Followup, "later").unwrap());

    child.kill().unwrap();
    child.wait().unwrap();
    let (lock, took_over) = acquired(SessionLock::acquire(&path, true).unwrap());
    let took_over = took_over.expect("the dead owner is named");
    assert_eq!(took_over.previous.process, owner.process);
    assert_eq!(took_over.why, Gone::Dead);
    assert_eq!(
        took_over.dropped,
        vec![Queued {
            id,
            kind: QueueKind::Followup,
            text: "later".into()
        }]
    );
    assert!(matches!(
        queue.status(id).unwrap(),
        Some(Status::Dropped { reason }) if reason.contains(&owner.process.pid.to_string())
    ));
    assert_eq!(
        queue.owner().unwrap().map(|o| o.process),
        Some(ProcessId::current())
    );
    drop(lock);
}

#[test]
fn a_stale_heartbeat_frees_the_lock_even_while_the_process_lives() {
    let (_dir, path) = db();
    let mut child = sleeper();
    let stale = now_ms() - STALE_AFTER.as_millis() as i64 - 5_000;
    claim(&path, &child, stale, true);
    let mut queue = Queue::open(&path).unwrap();
    assert_eq!(
        queue.enqueue(QueueKind::Steer, "x").unwrap(),
        Enqueued::NoOwner,
        "a stale owner takes no messages"
    );
    let (_lock, took_over) = acquired(SessionLock::acquire(&path, true).unwrap());
    match took_over.unwrap().why {
        Gone::Stale { secs } => assert!((35..40).contains(&secs), "{secs}"),
        Gone::Dead => panic!("the process lives"),
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn messages_are_queued_only_for_a_live_owner_that_accepts_them() {
    let (_dir, path) = db();
    let mut queue = Queue::open(&path).unwrap();
    assert_eq!(
        queue.enqueue(QueueKind::Steer, "x").unwrap(),
        Enqueued::NoOwner
    );
    let mut child = sleeper();
    let owner = claim(&path, &child, now_ms(), false);
    assert_eq!(
        queue.enqueue(QueueKind::Steer, "x").unwrap(),
        Enqueued::NotAccepting(owner)
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let (lock, _) = acquired(SessionLock::acquire(&path, true).unwrap());
    let id = queued(queue.enqueue(QueueKind::Steer, "turn left").unwrap());
    assert_eq!(queue.status(id).unwrap(), Some(Status::Pending));
    assert_eq!(lock.take(QueueKind::Followup).unwrap(), vec![]);
    let taken = lock.take(QueueKind::Steer).unwrap();
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].text, "turn left");
    assert_eq!(queue.status(id).unwrap(), Some(Status::Taken));
    assert_eq!(lock.take(QueueKind::Steer).unwrap(), vec![], "taken once");
}

#[test]
fn two_readers_take_every_message_exactly_once() {
    const SENT: usize = 200;
    let (_dir, path) = db();
    // Two connections of the owner process, each with its own handle.
    let (first, _) = acquired(SessionLock::acquire(&path, true).unwrap());
    let (second, _) = acquired(SessionLock::acquire(&path, true).unwrap());
    let sender_path = path.clone();
    let sender = std::thread::spawn(move || {
        let mut queue = Queue::open(&sender_path).unwrap();
        (0..SENT)
            .map(|i| queued(queue.enqueue(QueueKind::Steer, &format!("m{i}")).unwrap()))
            .collect::<BTreeSet<i64>>()
    });
    let total = Arc::new(AtomicUsize::new(0));
    let reader = |lock: SessionLock| {
        let total = Arc::clone(&total);
        std::thread::spawn(move || {
            let mut got = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(60);
            while total.load(Ordering::SeqCst) < SENT && Instant::now() < deadline {
                let taken = lock.take(QueueKind::Steer).unwrap();
                total.fetch_add(taken.len(), Ordering::SeqCst);
                got.extend(taken.into_iter().map(|q| q.id));
                std::thread::sleep(Duration::from_millis(1));
            }
            got
        })
    };
    let a = reader(first.clone());
    let b = reader(second.clone());
    let sent = sender.join().unwrap();
    let (a, b) = (a.join().unwrap(), b.join().unwrap());
    let mut all = a;
    all.extend(b);
    let unique: BTreeSet<i64> = all.iter().copied().collect();
    assert_eq!(all.len(), unique.len(), "a message was taken twice");
    assert_eq!(unique, sent, "every message was taken");
}

#[test]
fn a_delivered_message_is_answered_when_the_turn_ends_and_then_intake_closes() {
    let (_dir, path) = db();
    let (lock, _) = acquired(SessionLock::acquire(&path, true).unwrap());
    let mut queue = Queue::open(&path).unwrap();
    let first = queued(queue.enqueue(QueueKind::Followup, "and then?").unwrap());
    let taken = lock.turn_ended("m1").unwrap();
    assert_eq!(taken.iter().map(|q| q.id).collect::<Vec<_>>(), vec![first]);
    lock.delivered(&[first], "m2").unwrap();
    assert_eq!(
        queue.status(first).unwrap(),
        Some(Status::Delivered {
            message_id: "m2".into()
        })
    );
    // Still accepting while the follow-up's turn runs.
    let steer = queued(queue.enqueue(QueueKind::Steer, "shorter").unwrap());
    let taken = lock.turn_ended("m3").unwrap();
    assert_eq!(taken.iter().map(|q| q.id).collect::<Vec<_>>(), vec![steer]);
    assert_eq!(
        queue.status(first).unwrap(),
        Some(Status::Answered {
            message_id: Some("m2".into()),
            head: Some("m3".into()),
            outcome: "done".into()
        })
    );
    lock.delivered(&[steer], "m4").unwrap();
    assert_eq!(lock.turn_ended("m5").unwrap(), vec![]);
    assert!(matches!(
        queue.status(steer).unwrap(),
        Some(Status::Answered { head: Some(h), .. }) if h == "m5"
    ));
    assert!(matches!(
        queue.enqueue(QueueKind::Followup, "too late").unwrap(),
        Enqueued::NotAccepting(owner) if owner.process == ProcessId::current()
    ));
}

#[test]
fn closing_and_releasing_drop_what_was_not_delivered() {
    let (_dir, path) = db();
    let (lock, _) = acquired(SessionLock::acquire(&path, true).unwrap());
    let mut queue = Queue::open(&path).unwrap();
    let id = queued(queue.enqueue(QueueKind::Followup, "next").unwrap());
    let dropped = lock.close(Some("m9"), "aborted").unwrap();
    assert_eq!(dropped.iter().map(|q| q.id).collect::<Vec<_>>(), vec![id]);
    assert!(matches!(
        queue.status(id).unwrap(),
        Some(Status::Dropped { reason }) if reason.contains("aborted")
    ));
    assert!(!queue.owner().unwrap().unwrap().accepting);
    assert_eq!(lock.release().unwrap(), vec![]);
    assert_eq!(queue.owner().unwrap(), None, "released");
    assert_eq!(
        lock.release().unwrap(),
        vec![],
        "a second release is a no-op"
    );

    // Dropping the last handle releases too, and drops what is pending.
    let (lock, _) = acquired(SessionLock::acquire(&path, true).unwrap());
    let id = queued(queue.enqueue(QueueKind::Steer, "left").unwrap());
    let clone = lock.clone();
    drop(lock);
    assert!(queue.owner().unwrap().is_some(), "a clone still holds it");
    drop(clone);
    assert_eq!(queue.owner().unwrap(), None);
    assert!(matches!(
        queue.status(id).unwrap(),
        Some(Status::Dropped { reason }) if reason.contains("exited")
    ));
}

#[test]
fn a_lock_taken_over_by_another_process_is_not_touched_by_the_old_owner() {
    let (_dir, path) = db();
    let (lock, _) = acquired(SessionLock::acquire(&path, true).unwrap());
    let mut child = sleeper();
    let other = claim(&path, &child, now_ms(), true);
    let mut queue = Queue::open(&path).unwrap();
    let id = queued(
        queue
            .enqueue(QueueKind::Steer, "for the new owner")
            .unwrap(),
    );
    assert_eq!(lock.take(QueueKind::Steer).unwrap(), vec![]);
    assert_eq!(lock.turn_ended("m1").unwrap(), vec![]);
    assert_eq!(lock.release().unwrap(), vec![]);
    assert_eq!(queue.owner().unwrap(), Some(other));
    assert_eq!(queue.status(id).unwrap(), Some(Status::Pending));
    child.kill().unwrap();
    child.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_heartbeat_refreshes_the_lock_and_notices_when_it_was_taken() {
    let (_dir, path) = db();
    let (lock, _) = acquired(SessionLock::acquire(&path, true).unwrap());
    let conn = Connection::open(queue_path(&path)).unwrap();
    conn.execute("UPDATE lock SET heartbeat_ms = 1", [])
        .unwrap();
    let (lost_tx, lost_rx) = tokio::sync::oneshot::channel();
    lock.heartbeat_every(Duration::from_millis(20), move |owner| {
        let _ = lost_tx.send(owner);
    });
    let heartbeat = || -> i64 {
        conn.query_row("SELECT heartbeat_ms FROM lock", [], |r| r.get(0))
            .unwrap()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while heartbeat() == 1 {
        assert!(Instant::now() < deadline, "the heartbeat never ran");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(now_ms() - heartbeat() < 10_000);

    let mut child = sleeper();
    let other = claim(&path, &child, now_ms(), true);
    let lost = tokio::time::timeout(Duration::from_secs(10), lost_rx)
        .await
        .expect("the loss is noticed")
        .unwrap();
    assert_eq!(lost, Some(other));
    child.kill().unwrap();
    child.wait().unwrap();
}
