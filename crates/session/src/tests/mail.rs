//! The agents' inboxes and authors (`ah org`): posting, delivering in one
//! transaction, a branch removed with its mail, and a session file of the
//! schema before them opened and migrated.

use super::*;

fn letter(to: &str, from: &str, text: &str) -> Letter {
    Letter {
        recipient: to.into(),
        sender: from.into(),
        kind: MailKind::Direct,
        text: text.into(),
    }
}

#[test]
fn mail_waits_in_order_and_one_delivery_takes_it() {
    let (_dir, mut session) = new_session();
    let root = say(&mut session, None, Role::User, "task");
    session
        .post(
            None,
            &[
                letter("coder", "lead", "one"),
                letter("tester", "lead", "x"),
            ],
            &[("k", "v")],
        )
        .unwrap();
    session
        .post(None, &[letter("coder", "user", "two")], &[])
        .unwrap();
    let mail = session.pending_mail("coder").unwrap();
    let texts: Vec<&str> = mail.iter().map(|m| m.text.as_str()).collect();
    assert_eq!(texts, ["one", "two"]);
    assert_eq!(session.context("k").unwrap().as_deref(), Some("v"));

    let opened = session
        .deliver(
            "coder",
            Some(&root.id),
            (&mail, &text("one, two")),
            &[("s", "1")],
        )
        .unwrap();
    assert_eq!(opened.agent.as_deref(), Some("coder"));
    assert!(session.pending_mail("coder").unwrap().is_empty());
    assert_eq!(session.pending_mail("tester").unwrap().len(), 1);
    assert_eq!(
        session.agent_head("coder").unwrap(),
        Some(opened.id.clone())
    );
    // The same letters again: refused, and nothing is stored.
    let before = session.last_seq().unwrap();
    let again = session.deliver(
        "coder",
        Some(&root.id),
        (&mail, &text("again")),
        &[("s", "2")],
    );
    assert!(again.is_err());
    assert_eq!(session.last_seq().unwrap(), before);
    assert_eq!(session.context("s").unwrap().as_deref(), Some("1"));
    // Mail posted after a point can be taken back.
    let mark = session.last_mail_id().unwrap();
    session
        .post(None, &[letter("coder", "lead", "later")], &[])
        .unwrap();
    session.remove_mail_after(mark).unwrap();
    assert!(session.pending_mail("coder").unwrap().is_empty());
    assert_eq!(session.pending_mail("tester").unwrap().len(), 1);
}

#[test]
fn the_author_marks_messages_and_a_routed_message_is_known() {
    let (_dir, mut session) = new_session();
    let root = say(&mut session, None, Role::User, "task");
    session.set_author(Some("lead"));
    let answer = say(&mut session, Some(&root.id), Role::Assistant, "@@coder go");
    session.set_author(None);
    assert_eq!(answer.agent.as_deref(), Some("lead"));
    let read = session.path_to(&answer.id).unwrap();
    assert_eq!(read[0].agent, None);
    assert_eq!(read[1].agent.as_deref(), Some("lead"));
    assert!(!session.is_routed(&answer.id).unwrap());
    session
        .post(Some(&answer.id), &[letter("coder", "lead", "go")], &[])
        .unwrap();
    assert!(session.is_routed(&answer.id).unwrap());
    assert_eq!(session.newest_step_message().unwrap(), None);
    // Only a result that recorded the files after its step counts.
    let step = |head: Option<&str>| BlockRecord {
        details: Some(serde_json::json!({ "head": head })),
        ..BlockRecord::tool_result("t", "bash", "out".into(), false)
    };
    let ran = session
        .append(
            Some(&answer.id),
            Role::User,
            &[step(Some("c1"))],
            &MessageMeta::default(),
        )
        .unwrap();
    session
        .append(
            Some(&ran.id),
            Role::User,
            &[step(None)],
            &MessageMeta::default(),
        )
        .unwrap();
    assert_eq!(session.newest_step_message().unwrap(), Some(ran.id));
}

#[test]
fn removing_a_branch_takes_its_mail_along() {
    let (_dir, mut session) = new_session();
    let root = say(&mut session, None, Role::User, "task");
    session
        .post(None, &[letter("a", "user", "task")], &[])
        .unwrap();
    let mail = session.pending_mail("a").unwrap();
    let opened = session
        .deliver("a", Some(&root.id), (&mail, &text("task")), &[])
        .unwrap();
    session.set_author(Some("a"));
    let sent = say(&mut session, Some(&opened.id), Role::Assistant, "@@b hi");
    session.set_author(None);
    session
        .post(Some(&sent.id), &[letter("b", "a", "hi")], &[])
        .unwrap();
    session.remove_branch(&opened.id, true).unwrap();
    // The letter delivered into the branch waits again; the one sent from
    // it is gone, and so is its routing.
    assert_eq!(session.pending_mail("a").unwrap().len(), 1);
    assert!(session.pending_mail("b").unwrap().is_empty());
    assert!(!session.is_routed(&sent.id).unwrap());
}

#[test]
fn a_file_of_the_first_schema_is_migrated() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    {
        let conn = crate::schema::open_with(&path, &crate::schema::MIGRATIONS[..1]).unwrap();
        conn.execute(
            "INSERT INTO messages (id, role, seq, created_at) VALUES ('m1', 'user', 1, 'now')",
            [],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO content_blocks (id, message_id, block_type, seq, content)
             VALUES ('b1', 'm1', 'text', 1, 'hello')",
            [],
        )
        .unwrap();
    }
    let mut session = Session::open(&path).unwrap();
    let version: i64 = raw(&path)
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    let old = session.path_to("m1").unwrap();
    assert_eq!(old[0].agent, None);
    session.set_author(Some("lead"));
    let new = say(&mut session, Some("m1"), Role::Assistant, "hi");
    assert_eq!(
        session.path_to(&new.id).unwrap()[1].agent.as_deref(),
        Some("lead")
    );
    assert_eq!(count(&raw(&path), "mail"), 0);
}
