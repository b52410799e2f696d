//! The tree queries: the loaded tree, one message by @N, moving the head,
//! removing a branch, usage by model, summaries and the cached listing,
//! and the removal of empty messages on open.

use serde_json::json;

use super::*;
use ah_llm::Usage;

/// @1 user, @2 assistant, @3 user, @4 assistant (first branch);
/// @5 user under @2, @6 assistant (second branch, the head).
fn forked() -> (TempDir, Session, Vec<StoredMessage>) {
    let (dir, mut session) = new_session();
    let m1 = say(&mut session, None, Role::User, "first prompt");
    let m2 = say(&mut session, Some(&m1.id), Role::Assistant, "first answer");
    let m3 = say(&mut session, Some(&m2.id), Role::User, "go left");
    let m4 = say(&mut session, Some(&m3.id), Role::Assistant, "went left");
    let m5 = say(&mut session, Some(&m2.id), Role::User, "go right");
    let m6 = say(&mut session, Some(&m5.id), Role::Assistant, "went right");
    (dir, session, vec![m1, m2, m3, m4, m5, m6])
}

fn seqs(messages: &[&StoredMessage]) -> Vec<i64> {
    messages.iter().map(|m| m.seq).collect()
}

#[test]
fn the_tree_knows_children_tips_paths_and_common_ancestors() {
    let (_dir, session, m) = forked();
    let tree = session.tree().unwrap();
    assert_eq!(tree.messages(), &m[..]);
    assert_eq!(seqs(&tree.roots()), [1]);
    assert_eq!(seqs(&tree.children(&m[1])), [3, 5]);
    assert_eq!(seqs(&tree.tips()), [4, 6]);
    assert_eq!(seqs(&tree.path(&m[5])), [1, 2, 5, 6]);
    assert_eq!(tree.common_ancestor(&m[3], &m[5]).unwrap().seq, 2);
    assert_eq!(tree.common_ancestor(&m[1], &m[3]).unwrap().seq, 2);
    assert_eq!(tree.head().unwrap().seq, 6);
    assert_eq!(tree.at(3), Some(&m[2]));
    assert_eq!(tree.at(9), None);
}

#[test]
fn a_broken_parent_link_is_reported() {
    let (_dir, session, m) = forked();
    raw(session.path())
        .execute(
            "UPDATE messages SET parent_id = ?1 WHERE id = ?2",
            [&m[5].id, &m[1].id],
        )
        .unwrap();
    let err = session.tree().unwrap_err();
    assert!(matches!(err, SessionError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("@2"), "{err}");
}

#[test]
fn one_message_by_number_and_the_head_moves_to_any_message() {
    let (_dir, session, m) = forked();
    assert_eq!(session.message_at(4).unwrap(), Some(m[3].clone()));
    assert_eq!(session.message_at(7).unwrap(), None);
    assert_eq!(session.last_seq().unwrap(), 6);
    session.set_head(&m[3].id).unwrap();
    assert_eq!(session.head().unwrap(), Some(m[3].id.clone()));
    let err = session.set_head("01NOPE").unwrap_err();
    assert!(matches!(err, SessionError::UnknownMessage { .. }));
    assert_eq!(session.head().unwrap(), Some(m[3].id.clone()));
}

#[test]
fn removing_a_branch_takes_its_blocks_and_events_and_guards_the_head() {
    let (_dir, mut session, m) = forked();
    session
        .record_event(Some(&m[5].id), "note", &json!({}))
        .unwrap();
    session
        .record_event(Some(&m[3].id), "note", &json!({}))
        .unwrap();
    session.set_context(WORKSPACE_AT_KEY, &m[5].id).unwrap();

    // The head (@6) is under @5: refused, nothing removed.
    assert_eq!(
        session.remove_branch(&m[4].id, false).unwrap(),
        BranchRemoval::HeadInside { head_seq: 6 }
    );
    assert_eq!(count(&raw(session.path()), "messages"), 6);

    // A branch without the head goes alone.
    assert_eq!(
        session.remove_branch(&m[2].id, false).unwrap(),
        BranchRemoval::Removed {
            seqs: vec![3, 4],
            head_moved_to: None
        }
    );
    // Forced: the head moves to the parent, workspace_at is cleared.
    assert_eq!(
        session.remove_branch(&m[4].id, true).unwrap(),
        BranchRemoval::Removed {
            seqs: vec![5, 6],
            head_moved_to: Some(Some(2))
        }
    );
    let conn = raw(session.path());
    assert_eq!(count(&conn, "messages"), 2);
    assert_eq!(count(&conn, "content_blocks"), 2);
    let events: i64 = conn
        .query_row(
            "SELECT count(*) FROM events WHERE message_id IS NOT NULL",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(events, 0);
    assert_eq!(session.head().unwrap(), Some(m[1].id.clone()));
    assert_eq!(session.context(WORKSPACE_AT_KEY).unwrap(), None);

    // The root with the head in it, forced: no head is left.
    assert_eq!(
        session.remove_branch(&m[0].id, true).unwrap(),
        BranchRemoval::Removed {
            seqs: vec![1, 2],
            head_moved_to: Some(None)
        }
    );
    assert_eq!(session.head().unwrap(), None);
    assert!(matches!(
        session.remove_branch(&m[0].id, true).unwrap_err(),
        SessionError::UnknownMessage { .. }
    ));
}

#[test]
fn cached_input_is_counted_as_input_and_apart() {
    let (_dir, mut session) = new_session();
    let meta = MessageMeta {
        usage: Some(Usage {
            input_tokens: 10,
            output_tokens: 5,
            cache_creation_input_tokens: 20,
            cache_read_input_tokens: 70,
        }),
        model: Some("opus".into()),
        ..MessageMeta::default()
    };
    let answer = session
        .append(None, Role::Assistant, &text("a"), &meta)
        .unwrap();
    assert_eq!(
        session.usage().unwrap(),
        [ModelUsage {
            model: Some("opus".into()),
            kind: CallKind::Answer,
            calls: 1,
            input_tokens: 100,
            output_tokens: 5,
            cache_read_tokens: 70,
            cache_write_tokens: 20,
        }]
    );
    // Read back, the message's usage is what the conversation's size needs.
    let stored = session.path_to(&answer.id).unwrap();
    assert_eq!(
        stored[0].meta.usage,
        Some(Usage {
            input_tokens: 100,
            output_tokens: 5,
            ..Usage::default()
        })
    );
}

#[test]
fn usage_and_the_summary_count_every_branch() {
    let (_dir, mut session) = new_session();
    let meta = |model: &str, input, output| MessageMeta {
        usage: Some(Usage {
            input_tokens: input,
            output_tokens: output,
            ..Usage::default()
        }),
        model: Some(model.into()),
        ..MessageMeta::default()
    };
    let prompt = session
        .append(
            None,
            Role::User,
            &[
                BlockRecord::from(Block::Text {
                    text: format!("fix it {}", "x".repeat(300)),
                }),
                BlockRecord::from(Block::Text {
                    text: "second block".into(),
                }),
            ],
            &MessageMeta::default(),
        )
        .unwrap();
    for (model, input, output) in [("opus", 100, 10), ("haiku", 5, 1), ("opus", 200, 20)] {
        session
            .append(
                Some(&prompt.id),
                Role::Assistant,
                &text("a"),
                &meta(model, input, output),
            )
            .unwrap();
    }
    // A compaction summary is a user message that carries its call's usage.
    let summary = session
        .append(
            Some(&prompt.id),
            Role::User,
            &text("summary"),
            &meta("haiku", 50, 8),
        )
        .unwrap();
    session
        .append(
            Some(&summary.id),
            Role::User,
            &text("steer"),
            &MessageMeta::default(),
        )
        .unwrap();
    let usage = session.usage().unwrap();
    let row = |model: &str, kind, calls, input_tokens, output_tokens| ModelUsage {
        model: Some(model.into()),
        kind,
        calls,
        input_tokens,
        output_tokens,
        cache_read_tokens: 0,
        cache_write_tokens: 0,
    };
    assert_eq!(
        usage,
        [
            row("opus", CallKind::Answer, 2, 300, 30),
            row("haiku", CallKind::Compaction, 1, 50, 8),
            row("haiku", CallKind::Answer, 1, 5, 1),
        ]
    );
    // A run's own calls: those after the last message before it.
    assert_eq!(
        session.usage_after(summary.seq - 1).unwrap(),
        [row("haiku", CallKind::Compaction, 1, 50, 8)]
    );
    // Two runs side by side from one message: each counts its own branch.
    let fork = session.last_seq().unwrap();
    let mut answer = |parent: &str, model: &str, input| {
        session
            .append(
                Some(parent),
                Role::Assistant,
                &text("a"),
                &meta(model, input, 2),
            )
            .unwrap()
    };
    let one = answer(&summary.id, "opus", 10);
    let two = answer(&summary.id, "sonnet", 20);
    let one = answer(&one.id, "opus", 11);
    assert_eq!(
        session
            .usage_on_branches(std::slice::from_ref(&one.id), fork)
            .unwrap(),
        [row("opus", CallKind::Answer, 2, 21, 4)]
    );
    assert_eq!(
        session
            .usage_on_branches(std::slice::from_ref(&two.id), fork)
            .unwrap(),
        [row("sonnet", CallKind::Answer, 1, 20, 2)]
    );
    // Two branches of one run (a work loop's phases), and a head named
    // twice: each message once.
    let both = [one.id.clone(), two.id.clone(), one.id.clone()];
    assert_eq!(
        session.usage_on_branches(&both, fork).unwrap(),
        [
            row("opus", CallKind::Answer, 2, 21, 4),
            row("sonnet", CallKind::Answer, 1, 20, 2)
        ]
    );
    assert_eq!(session.usage_after(fork).unwrap().len(), 2);
    session.set_context(NAME_KEY, "fixer").unwrap();
    let summary = session.summary().unwrap();
    assert_eq!(summary.id, session.id());
    assert_eq!(summary.name.as_deref(), Some("fixer"));
    assert_eq!(summary.messages, 9);
    assert_eq!((summary.input_tokens, summary.output_tokens), (396, 45));
    let first = summary.first_prompt.unwrap();
    assert!(first.starts_with("fix it xxx") && first.chars().count() == 200);
    let ulid = ulid::Ulid::from_string(&summary.id).unwrap();
    assert_eq!(summary.created_at, format_rfc3339(ulid.datetime()));
}

#[test]
fn the_listing_is_newest_first_and_reopens_only_changed_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let ah_dir = dir.path().join(".ah");
    assert!(list_sessions(&ah_dir).unwrap().is_empty());
    let mut old = Session::create(&ah_dir).unwrap();
    say(&mut old, None, Role::User, "old one");
    let mut new = Session::create(&ah_dir).unwrap();
    say(&mut new, None, Role::User, "new one");
    std::fs::write(ah_dir.join("notes.db"), "not a session").unwrap();

    let listed = list_sessions(&ah_dir).unwrap();
    let ids: Vec<&str> = listed.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, [new.id(), old.id()]);
    assert_eq!(listed[1].first_prompt.as_deref(), Some("old one"));

    // An unchanged session's summary comes from the cache: doctor it there
    // and the listing shows the doctored one.
    let cache = ah_dir.join(CATALOG_FILE);
    let doctored = std::fs::read_to_string(&cache)
        .unwrap()
        .replace("\"old one\"", "\"from the cache\"");
    std::fs::write(&cache, doctored).unwrap();
    let listed = list_sessions(&ah_dir).unwrap();
    assert_eq!(listed[1].first_prompt.as_deref(), Some("from the cache"));

    // A change to the file makes it read again.
    old.set_context(NAME_KEY, "renamed").unwrap();
    drop(old);
    let listed = list_sessions(&ah_dir).unwrap();
    assert_eq!(listed[1].first_prompt.as_deref(), Some("old one"));
    assert_eq!(listed[1].name.as_deref(), Some("renamed"));

    // Reading a closed session leaves its files as they were: the next
    // listing takes it from the cache.
    drop(new);
    list_sessions(&ah_dir).unwrap();
    let doctored = std::fs::read_to_string(&cache)
        .unwrap()
        .replace("\"new one\"", "\"cached again\"");
    std::fs::write(&cache, doctored).unwrap();
    let listed = list_sessions(&ah_dir).unwrap();
    assert_eq!(listed[0].first_prompt.as_deref(), Some("cached again"));

    // A damaged cache is rebuilt.
    std::fs::write(&cache, "{").unwrap();
    assert_eq!(list_sessions(&ah_dir).unwrap().len(), 2);

    // A file that is no session is listed as such, not cached, and does
    // not hide the others.
    let junk = ulid::Ulid::generate().to_string();
    std::fs::write(ah_dir.join(format!("{junk}.db")), "junk").unwrap();
    for _ in 0..2 {
        let listed = list_sessions(&ah_dir).unwrap();
        assert_eq!(listed.len(), 3);
        assert_eq!(listed[0].id, junk);
        let error = listed[0].error.as_deref().unwrap();
        assert!(error.contains("not an ah session"), "{error}");
        assert_eq!(listed[1].error, None);
    }
    assert!(!std::fs::read_to_string(&cache).unwrap().contains(&junk));
}

#[test]
fn opening_removes_empty_childless_messages_and_keeps_the_rest() {
    let (_dir, session, m) = forked();
    let path = session.path().to_path_buf();
    let conn = raw(&path);
    let insert = |id: &str, parent: &str, seq: i64| {
        conn.execute(
            "INSERT INTO messages (id, parent_id, role, seq, created_at) VALUES (?1, ?2, 'user', ?3, 'x')",
            rusqlite::params![id, parent, seq],
        )
        .unwrap();
    };
    // @7: empty, no children, with an event → removed.
    insert("EMPTY7", &m[3].id, 7);
    conn.execute(
        "INSERT INTO events (message_id, event_type, created_at, details) VALUES ('EMPTY7', 'x', 'x', '{}')",
        [],
    )
    .unwrap();
    // @8 (empty) → @9 (empty): both go, the parent once its child is gone.
    insert("EMPTY8", &m[3].id, 8);
    insert("EMPTY9", "EMPTY8", 9);
    // @10: empty, but @11 answers it → kept.
    insert("EMPTY10", &m[5].id, 10);
    insert("CHILD11", "EMPTY10", 11);
    conn.execute(
        "INSERT INTO content_blocks (id, message_id, block_type, seq, content)
         VALUES ('B11', 'CHILD11', 'text', 1, 'after an empty one')",
        [],
    )
    .unwrap();
    // The head is never removed: make an empty head to check.
    insert("EMPTY12", &m[0].id, 12);
    conn.execute(
        "UPDATE context SET value = 'EMPTY12' WHERE key = 'head'",
        [],
    )
    .unwrap();
    drop(session);

    let session = Session::open(&path).unwrap();
    assert_eq!(
        session.repairs(),
        &Repairs {
            removed: vec![7, 8, 9],
            kept: vec![10],
        }
    );
    let left: Vec<i64> = session
        .tree()
        .unwrap()
        .messages()
        .iter()
        .map(|m| m.seq)
        .collect();
    assert_eq!(left, [1, 2, 3, 4, 5, 6, 10, 11, 12]);
    assert_eq!(count(&conn, "events"), 0);
    // Nothing left to do: the next open changes nothing.
    drop(session);
    let again = Session::open(&path).unwrap();
    assert_eq!(again.repairs().removed, Vec::<i64>::new());
}
