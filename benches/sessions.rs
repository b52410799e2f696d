//! Listing sessions (`ah sessions`, also behind `--name` and `-S`) over
//! 10 000 sessions of 20 messages: with the summary cache versus the
//! baseline that opens every database (the cache removed), in the same run
//! so the ratio means something on any machine. Fails when the cache is not
//! at least `MIN_SPEEDUP` times faster.
//!
//! Run with `cargo bench --bench sessions`.

// The workspace denies unwrap and expect outside tests; a bench is a test
// harness of its own (clippy does not count it as a test), where a failure
// should stop the measurement with the message it panics with.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use ah_llm::{Block, Role, Usage};
use ah_session::{BlockRecord, CATALOG_FILE, MessageMeta, Session, list_sessions};
use ulid::Ulid;

const SESSIONS: usize = 10_000;
const MESSAGES: usize = 20;
const MIN_SPEEDUP: f64 = 5.0;

fn main() {
    let project = tempfile::tempdir().expect("temp dir");
    let ah_dir = project.path().join(".ah");
    let template = template(&ah_dir);
    for _ in 1..SESSIONS {
        std::fs::copy(&template, ah_dir.join(format!("{}.db", Ulid::generate())))
            .expect("copy a session");
    }
    let cold = timed(&ah_dir);
    let warm = (0..3).map(|_| timed(&ah_dir)).min().unwrap_or(cold);
    let _ = std::fs::remove_file(ah_dir.join(CATALOG_FILE));
    let cold_again = timed(&ah_dir);
    let baseline = cold.min(cold_again);
    let speedup = baseline.as_secs_f64() / warm.as_secs_f64().max(1e-9);
    println!(
        "{SESSIONS} sessions x {MESSAGES} messages: every database opened {baseline:.2?}, \
         with the cache {warm:.2?} ({speedup:.0}x)"
    );
    if speedup < MIN_SPEEDUP {
        eprintln!("sessions bench: the cache is only {speedup:.1}x faster (want {MIN_SPEEDUP}x)");
        std::process::exit(1);
    }
}

/// One session of `MESSAGES` messages; its file is copied for the others.
fn template(ah_dir: &Path) -> std::path::PathBuf {
    let mut session = Session::create(ah_dir).expect("create a session");
    let mut parent: Option<String> = None;
    for i in 0..MESSAGES {
        let (role, meta) = if i % 2 == 0 {
            (Role::User, MessageMeta::default())
        } else {
            let usage = Usage {
                input_tokens: 1000,
                output_tokens: 100,
                ..Usage::default()
            };
            let meta = MessageMeta {
                usage: Some(usage),
                model: Some("claude-sonnet-4-5".into()),
                ..MessageMeta::default()
            };
            (Role::Assistant, meta)
        };
        let text = format!("message {i}: {}", "some words ".repeat(50));
        let block = BlockRecord::from(Block::Text { text });
        let stored = session
            .append(parent.as_deref(), role, &[block], &meta)
            .expect("append");
        parent = Some(stored.id);
    }
    session.path().to_path_buf()
}

/// One listing; checks it saw every session.
fn timed(ah_dir: &Path) -> Duration {
    let started = Instant::now();
    let listed = list_sessions(ah_dir).expect("list sessions");
    let took = started.elapsed();
    assert_eq!(listed.len(), SESSIONS);
    took
}
