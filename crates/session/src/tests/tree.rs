//! The message tree: block round trips, branches, seq, head, atomicity,
//! events.

use serde_json::json;

use super::*;
use ah_llm::{Message, Usage};

#[test]
fn every_block_type_round_trips() {
    let (_dir, mut session) = new_session();
    let input = json!({"command": "cargo test -- --nocapture", "timeout": 1.5,
                       "env": {"Z": null, "A": [1, "ünï", true]}});
    let user = say(&mut session, None, Role::User, "fix the tests");
    let assistant = session
        .append(
            Some(&user.id),
            Role::Assistant,
            &[
                BlockRecord::from(Block::Thinking {
                    thinking: "Let me look.".into(),
                    signature: "EqQBCkYIARgC…sig".into(),
                }),
                BlockRecord::from(Block::RedactedThinking {
                    data: "opaque-redacted".into(),
                }),
                BlockRecord::from(Block::Text {
                    text: "Running them.".into(),
                }),
                BlockRecord::from(Block::ToolUse {
                    id: "toolu_01".into(),
                    name: "bash".into(),
                    input: input.clone(),
                }),
            ],
            &MessageMeta {
                usage: Some(Usage {
                    input_tokens: 1200,
                    output_tokens: 80,
                    cache_creation_input_tokens: 0,
                    cache_read_input_tokens: 0,
                }),
                stop_reason: Some("tool_use".into()),
                model: Some("claude-sonnet-4-5".into()),
                api_latency_ms: Some(2345),
            },
        )
        .unwrap();
    let failed = BlockRecord {
        block: Block::ToolResult {
            tool_use_id: "toolu_01".into(),
            content: "exit 101\n[output truncated]".into(),
            is_error: true,
        },
        tool_name: Some("bash".into()),
        tool_output: Some("full output\n".repeat(1000)),
        duration_ms: Some(4210),
        details: Some(json!({"run": "01RUN", "step": 3, "commit": "abc123", "exit": 101})),
    };
    let plain = BlockRecord::from(Block::ToolResult {
        tool_use_id: "toolu_02".into(),
        content: "ok".into(),
        is_error: false,
    });
    let results = session
        .append(
            Some(&assistant.id),
            Role::User,
            &[failed.clone(), plain.clone()],
            &MessageMeta::default(),
        )
        .unwrap();

    let stored = session.path_to(&results.id).unwrap();
    assert_eq!(stored[..2], [user.clone(), assistant.clone()]);
    // The path is what the model sees: a result's whole output stays in the
    // store, and the message read on its own has it.
    let told = BlockRecord {
        tool_output: None,
        ..failed.clone()
    };
    assert_eq!(stored[2].blocks, vec![told, plain.clone()]);
    let whole = session.message_at(results.seq).unwrap().unwrap();
    assert_eq!(whole.blocks, vec![failed, plain]);
    assert_eq!(stored[1].meta.usage.unwrap().input_tokens, 1200);
    assert!(stored[1].created_at.ends_with('Z'));

    let api: Vec<Message> = stored.iter().map(StoredMessage::to_message).collect();
    assert_eq!(api.len(), 3);
    assert_eq!(api[0], Message::user_text("fix the tests"));
    assert_eq!(api[1].role, Role::Assistant);
    assert_eq!(
        api[1].content[0],
        Block::Thinking {
            thinking: "Let me look.".into(),
            signature: "EqQBCkYIARgC…sig".into(),
        }
    );
    assert_eq!(
        api[1].content[3],
        Block::ToolUse {
            id: "toolu_01".into(),
            name: "bash".into(),
            input,
        }
    );
    assert!(matches!(
        api[2].content[0],
        Block::ToolResult { is_error: true, .. }
    ));
    assert!(matches!(
        api[2].content[1],
        Block::ToolResult {
            is_error: false,
            ..
        }
    ));
}

#[test]
fn a_path_leaves_images_out_and_a_request_loads_the_ones_it_sends() {
    let (_dir, mut session) = new_session();
    let data = "iVBORw0KGgo=".repeat(1000);
    let image = BlockRecord {
        details: Some(json!({"path": "/work/a.png", "step": 2})),
        ..BlockRecord::from(Block::Image {
            source: ah_llm::ImageSource {
                kind: "base64".into(),
                media_type: "image/png".into(),
                data: data.clone(),
            },
        })
    };
    let blocks = [text("look").remove(0), image.clone()];
    let stored = session
        .append(None, Role::User, &blocks, &MessageMeta::default())
        .unwrap();
    let path = session.path_to(&stored.id).unwrap();
    let Block::Image { source } = &path[0].blocks[1].block else {
        panic!("{:?}", path[0].blocks);
    };
    assert_eq!(
        (source.data.as_str(), source.media_type.as_str()),
        ("", "image/png")
    );
    assert_eq!(path[0].blocks[1].details, image.details);
    let len = data.len() as u64;
    assert_eq!(session.image_data(&stored.id, 1, len).unwrap(), Some(data));
    assert_eq!(session.image_data(&stored.id, 1, len - 1).unwrap(), None);
    let error = session.image_data(&stored.id, 0, len).unwrap_err();
    assert!(matches!(error, SessionError::Corrupt { .. }), "{error}");
    // The whole message still has it.
    let whole = session.message_at(stored.seq).unwrap().unwrap();
    assert_eq!(whole.blocks[1], image);
}

#[test]
fn cached_input_is_stored_as_input() {
    let (_dir, mut session) = new_session();
    let meta = MessageMeta {
        usage: Some(Usage {
            input_tokens: 10,
            output_tokens: 20,
            cache_creation_input_tokens: 30,
            cache_read_input_tokens: 40,
        }),
        ..MessageMeta::default()
    };
    let stored = session
        .append(None, Role::Assistant, &text("hi"), &meta)
        .unwrap();
    let expected = Usage {
        input_tokens: 80,
        output_tokens: 20,
        ..Usage::default()
    };
    assert_eq!(stored.meta.usage, Some(expected));
    assert_eq!(
        session.path_to(&stored.id).unwrap()[0].meta.usage,
        Some(expected)
    );
}

#[test]
fn branches_share_ancestry_and_seq_runs_across_them() {
    let (_dir, mut session) = new_session();
    let root = say(&mut session, None, Role::User, "root");
    let answer = say(&mut session, Some(&root.id), Role::Assistant, "answer");
    let left = say(&mut session, Some(&answer.id), Role::User, "left");
    let right = say(&mut session, Some(&answer.id), Role::User, "right");
    let left_tip = say(&mut session, Some(&left.id), Role::Assistant, "left tip");

    let seqs: Vec<i64> = [&root, &answer, &left, &right, &left_tip]
        .iter()
        .map(|m| m.seq)
        .collect();
    assert_eq!(seqs, vec![1, 2, 3, 4, 5]);

    let ids = |path: Vec<StoredMessage>| path.into_iter().map(|m| m.id).collect::<Vec<_>>();
    assert_eq!(
        ids(session.path_to(&left_tip.id).unwrap()),
        vec![
            root.id.clone(),
            answer.id.clone(),
            left.id.clone(),
            left_tip.id.clone()
        ]
    );
    assert_eq!(
        ids(session.path_to(&right.id).unwrap()),
        vec![root.id.clone(), answer.id.clone(), right.id.clone()]
    );
    assert_eq!(session.message_id_at(4).unwrap(), Some(right.id));
    assert_eq!(session.message_id_at(6).unwrap(), None);
}

#[test]
fn consecutive_messages_of_one_role_are_stored() {
    let (_dir, mut session) = new_session();
    let first = say(&mut session, None, Role::User, "one");
    let second = say(&mut session, Some(&first.id), Role::User, "two");
    let api: Vec<Message> = session
        .path_to(&second.id)
        .unwrap()
        .iter()
        .map(StoredMessage::to_message)
        .collect();
    assert_eq!(
        api,
        vec![Message::user_text("one"), Message::user_text("two")]
    );
}

#[test]
fn head_follows_appends_and_context() {
    let (_dir, mut session) = new_session();
    assert_eq!(session.head().unwrap(), None);
    let first = say(&mut session, None, Role::User, "one");
    assert_eq!(session.head().unwrap(), Some(first.id.clone()));
    let second = say(&mut session, Some(&first.id), Role::Assistant, "two");
    assert_eq!(session.head().unwrap(), Some(second.id.clone()));

    session.set_context("head", &first.id).unwrap();
    assert_eq!(session.head().unwrap(), Some(first.id.clone()));
    assert_eq!(session.context("head").unwrap(), Some(first.id.clone()));
    assert_eq!(session.context("model").unwrap(), None);

    // Without a recorded head, the newest message is the head.
    raw(session.path())
        .execute("DELETE FROM context WHERE key = 'head'", [])
        .unwrap();
    assert_eq!(session.head().unwrap(), Some(second.id));

    // A removed value is gone; removing it again is no error.
    session.set_context("workspace_at", &first.id).unwrap();
    session.remove_context("workspace_at").unwrap();
    assert_eq!(session.context("workspace_at").unwrap(), None);
    session.remove_context("workspace_at").unwrap();
}

#[test]
fn a_failing_block_insert_leaves_nothing_behind() {
    let (_dir, mut session) = new_session();
    let first = say(&mut session, None, Role::User, "one");
    raw(session.path())
        .execute_batch(
            "CREATE TRIGGER refuse BEFORE INSERT ON content_blocks
             WHEN NEW.content = 'explode'
             BEGIN SELECT RAISE(ABORT, 'refused by test trigger'); END",
        )
        .unwrap();

    let blocks = [
        BlockRecord::from(Block::Text {
            text: "fine".into(),
        }),
        BlockRecord::from(Block::Text {
            text: "explode".into(),
        }),
    ];
    let error = session
        .append(
            Some(&first.id),
            Role::Assistant,
            &blocks,
            &MessageMeta::default(),
        )
        .unwrap_err();
    assert!(
        error.to_string().contains("refused by test trigger"),
        "{error}"
    );

    let conn = raw(session.path());
    assert_eq!(count(&conn, "messages"), 1);
    assert_eq!(count(&conn, "content_blocks"), 1);
    assert_eq!(session.head().unwrap(), Some(first.id.clone()));
    assert_eq!(
        say(&mut session, Some(&first.id), Role::Assistant, "ok").seq,
        2
    );
}

#[test]
fn invalid_records_and_unknown_ids_are_refused() {
    let (_dir, mut session) = new_session();
    let bad = [BlockRecord {
        duration_ms: Some(5),
        ..BlockRecord::from(Block::Text { text: "x".into() })
    }];
    let error = session
        .append(None, Role::User, &bad, &MessageMeta::default())
        .unwrap_err();
    assert!(matches!(error, SessionError::Invalid { .. }), "{error}");

    let error = session
        .append(
            Some("01NOPE"),
            Role::User,
            &text("x"),
            &MessageMeta::default(),
        )
        .unwrap_err();
    assert!(
        matches!(error, SessionError::UnknownMessage { .. }),
        "{error}"
    );
    assert!(matches!(
        session.path_to("01NOPE").unwrap_err(),
        SessionError::UnknownMessage { .. }
    ));
    assert_eq!(count(&raw(session.path()), "messages"), 0);
}

#[test]
fn events_are_recorded() {
    let (_dir, mut session) = new_session();
    let message = say(&mut session, None, Role::User, "go");
    session
        .record_event(None, "retry", &json!({"attempt": 1, "delay_ms": 500}))
        .unwrap();
    session
        .record_event(
            Some(&message.id),
            "violation",
            &json!({"paths": [".git/config"]}),
        )
        .unwrap();
    let error = session
        .record_event(Some("01NOPE"), "violation", &json!({}))
        .unwrap_err();
    assert!(
        matches!(error, SessionError::UnknownMessage { .. }),
        "{error}"
    );

    let conn = raw(session.path());
    let mut stmt = conn
        .prepare("SELECT message_id, event_type, created_at, details FROM events ORDER BY id")
        .unwrap();
    let rows: Vec<(Option<String>, String, String, String)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!((rows[0].0.as_deref(), rows[0].1.as_str()), (None, "retry"));
    assert_eq!(rows[1].0.as_deref(), Some(message.id.as_str()));
    assert_eq!(rows[1].1, "violation");
    assert!(rows[1].2.ends_with('Z'));
    let details: serde_json::Value = serde_json::from_str(&rows[1].3).unwrap();
    assert_eq!(details, json!({"paths": [".git/config"]}));
}

#[test]
fn two_handles_on_one_file_keep_seq_unique() {
    let (_dir, mut first) = new_session();
    let mut second = Session::open(first.path()).unwrap();
    let a = say(&mut first, None, Role::User, "a");
    let b = say(&mut second, Some(&a.id), Role::Assistant, "b");
    let c = say(&mut first, Some(&b.id), Role::User, "c");
    assert_eq!((a.seq, b.seq, c.seq), (1, 2, 3));
    assert_eq!(first.path_to(&c.id).unwrap().len(), 3);
}
