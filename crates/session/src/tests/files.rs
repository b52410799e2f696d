//! Session files: creation, `latest`, WAL and schema version, reopening,
//! refusing files that are not ours, damaged rows, query plans.

use std::path::PathBuf;

use ulid::Ulid;

use super::*;
use crate::store::{ANCESTRY_SQL, BLOCKS_SQL};

#[test]
fn latest_picks_the_highest_ulid_and_ignores_other_files() {
    let dir = tempfile::tempdir().unwrap();
    let ah = dir.path();
    let name = |ms: u64| Ulid::from_parts(ms, 7).to_string();
    let old = ah.join(format!("{}.db", name(1_000)));
    let new = ah.join(format!("{}.db", name(2_000)));
    // Not valid SQLite: proves `latest` does not open the files it ranks.
    for path in [&old, &new] {
        std::fs::write(path, "not a database").unwrap();
    }
    for other in [
        format!("{}.queue.db", name(3_000)),
        format!("{}.db-wal", name(3_000)),
        "zzzz.db".to_string(),
        "notes.txt".to_string(),
    ] {
        std::fs::write(ah.join(other), "x").unwrap();
    }
    std::fs::create_dir(ah.join(format!("{}.db", name(4_000)))).unwrap();

    assert_eq!(Session::latest(ah).unwrap(), Some(new));
    assert_eq!(Session::latest(&ah.join("missing")).unwrap(), None);
}

#[test]
fn latest_finds_a_created_session() {
    let dir = tempfile::tempdir().unwrap();
    let ah = dir.path().join(".ah");
    let first = Session::create(&ah).unwrap().path().to_path_buf();
    std::thread::sleep(std::time::Duration::from_millis(2));
    let second = Session::create(&ah).unwrap().path().to_path_buf();
    assert_ne!(first, second);
    assert_eq!(Session::latest(&ah).unwrap(), Some(second));
}

#[test]
fn database_uses_wal_and_records_its_schema_version() {
    let (_dir, session) = new_session();
    let conn = raw(session.path());
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    assert_eq!(SCHEMA_VERSION, 3);
}

#[test]
fn reopening_keeps_messages_and_head() {
    let (_dir, mut session) = new_session();
    let first = say(&mut session, None, Role::User, "one");
    let second = say(&mut session, Some(&first.id), Role::Assistant, "two");
    let path = session.path().to_path_buf();
    drop(session);

    let mut reopened = Session::open(&path).unwrap();
    assert_eq!(reopened.head().unwrap(), Some(second.id.clone()));
    assert_eq!(
        reopened.path_to(&second.id).unwrap(),
        vec![first, second.clone()]
    );
    assert_eq!(
        say(&mut reopened, Some(&second.id), Role::User, "three").seq,
        3
    );
}

#[test]
fn newer_schema_is_refused() {
    let (_dir, session) = new_session();
    let path = session.path().to_path_buf();
    drop(session);
    raw(&path)
        .pragma_update(None, "user_version", SCHEMA_VERSION + 1)
        .unwrap();

    let error = Session::open(&path).unwrap_err();
    assert!(
        matches!(error, SessionError::NewerSchema { found, .. } if found == SCHEMA_VERSION + 1)
    );
    let message = error.to_string();
    assert!(message.contains("upgrade ah"), "{message}");
    assert!(message.contains(&path.display().to_string()), "{message}");
}

#[test]
fn files_that_are_not_sessions_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let text_file = dir.path().join("notes.db");
    std::fs::write(
        &text_file,
        "just some text, certainly not a SQLite header\n".repeat(50),
    )
    .unwrap();
    let error = Session::open(&text_file).unwrap_err();
    assert!(matches!(error, SessionError::NotASession { .. }), "{error}");
    assert!(error.to_string().contains("notes.db"), "{error}");

    let foreign = dir.path().join("other.db");
    raw(&foreign)
        .execute_batch("CREATE TABLE people (name TEXT)")
        .unwrap();
    let error = Session::open(&foreign).unwrap_err();
    assert!(error.to_string().contains("other tables"), "{error}");
}

#[test]
fn open_in_a_missing_directory_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let path: PathBuf = dir.path().join("no/such/dir/s.db");
    let error = Session::open(&path).unwrap_err();
    assert!(matches!(error, SessionError::Open { .. }), "{error}");
    assert!(error.to_string().contains("directory exists"), "{error}");
}

#[test]
fn damaged_rows_are_reported_with_the_path() {
    let (_dir, mut session) = new_session();
    let message = say(&mut session, None, Role::User, "hi");
    raw(session.path())
        .execute("UPDATE content_blocks SET block_type = 'image'", [])
        .unwrap();
    let error = session.path_to(&message.id).unwrap_err();
    assert!(matches!(error, SessionError::Corrupt { .. }), "{error}");
    assert!(error.to_string().contains("image"), "{error}");
}

#[test]
fn hot_queries_use_indexes_not_table_scans() {
    let (_dir, mut session) = new_session();
    let root = say(&mut session, None, Role::User, "root");
    say(&mut session, Some(&root.id), Role::Assistant, "child");
    let conn = raw(session.path());
    for sql in [ANCESTRY_SQL, BLOCKS_SQL] {
        let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        let plan: Vec<String> = stmt
            .query_map([&root.id], |r| r.get(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        // Scanning the CTE's own rows ("SCAN a", "SCAN ancestry") is the walk
        // itself; scanning a table (or its alias `m`) would read every message.
        let scans: Vec<&String> = plan
            .iter()
            .filter(|step| {
                let words: Vec<&str> = step.split_whitespace().collect();
                matches!(
                    words.as_slice(),
                    ["SCAN", "messages" | "m" | "content_blocks", ..]
                )
            })
            .collect();
        assert!(scans.is_empty(), "table scan in {sql}: {plan:?}");
    }
}

#[test]
fn commits_are_synced_at_checkpoints_not_one_by_one() {
    let (_dir, session) = new_session();
    let synchronous: i64 = session
        .conn
        .query_row("PRAGMA synchronous", [], |r| r.get(0))
        .unwrap();
    assert_eq!(synchronous, 1, "synchronous = NORMAL");
}
