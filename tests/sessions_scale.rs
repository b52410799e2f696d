//! How long `ah sessions` takes over 10 000 sessions of 20 messages each,
//! first without the summary cache (every database is opened) and then
//! with it. A measurement, not a check of behaviour, so it is ignored by
//! default; run it in release mode:
//! `cargo test --release --test sessions_scale -- --ignored --nocapture`.

use std::process::Command;
use std::time::Instant;

use ah::llm::{Block, Role, Usage};
use ah::session::{BlockRecord, CATALOG_FILE, MessageMeta, Session};
use ulid::Ulid;

const SESSIONS: usize = 10_000;
const MESSAGES: usize = 20;

#[test]
#[ignore = "a measurement: run in release mode with --ignored --nocapture"]
fn listing_ten_thousand_sessions() {
    let project = tempfile::tempdir().unwrap();
    let ah_dir = project.path().join(".ah");
    let template = {
        let mut session = Session::create(&ah_dir).unwrap();
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
                .unwrap();
            parent = Some(stored.id);
        }
        session.path().to_path_buf()
    };
    for _ in 1..SESSIONS {
        std::fs::copy(&template, ah_dir.join(format!("{}.db", Ulid::generate()))).unwrap();
    }

    let list = || {
        let started = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_ah"))
            .args(["sessions", "-C"])
            .arg(project.path())
            .output()
            .unwrap();
        assert!(out.status.success());
        let lines = String::from_utf8_lossy(&out.stdout).lines().count();
        assert_eq!(lines, SESSIONS);
        started.elapsed()
    };
    let cold = list();
    assert!(ah_dir.join(CATALOG_FILE).is_file());
    let warm = list();
    let warm_again = list();
    println!(
        "ah sessions over {SESSIONS} sessions of {MESSAGES} messages: \
         {cold:.2?} without the cache, {warm:.2?} and {warm_again:.2?} with it"
    );
}
