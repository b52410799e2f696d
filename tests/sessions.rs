//! The session tree through the real binary: runs and a fork against the
//! mock build a tree, then every tree command is checked on it; branch
//! removal and the removal of empty messages on open.

use std::process::Output;

use crate::support::host::{Host, describe, query};
use crate::support::mock::{MockServer, Reply, Turn};
use serde_json::{Value, json};

/// Two runs and a fork from @4:
///
/// ```text
/// @1 user "first task" → @2 assistant write a.txt → @3 user write: ok
///   → @4 assistant "wrote it"
///      ├─ @5 user "second task" → @6 assistant "second answer"
///      └─ @7 user "other way" → @8 assistant "forked answer"   (head)
/// ```
fn forked_session(host: &Host) -> MockServer {
    let mock = MockServer::start(vec![
        Turn::reply(
            Reply::new()
                .text("I'll write it.")
                .tool_use(
                    "toolu_1",
                    "write",
                    json!({"path": "a.txt", "content": "two\n"}),
                )
                .usage(100, 10),
        ),
        Turn::reply(Reply::new().text("wrote it").usage(200, 20)),
        Turn::reply(Reply::new().text("second answer").usage(300, 30)),
        Turn::reply(Reply::new().text("forked answer").usage(400, 40)),
    ]);
    for prompt in [
        &["first task"][..],
        &["second task"],
        &["@4", "other", "way"],
    ] {
        let out = host
            .ah(&mock.url())
            .args(["--backend", "none", "--review", "never"])
            .args(prompt)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    }
    mock
}

fn ah(host: &Host, args: &[&str]) -> Output {
    host.ah("http://127.0.0.1:9").args(args).output().unwrap()
}

/// Stdout of a command that must succeed.
fn stdout(host: &Host, args: &[&str]) -> String {
    let out = ah(host, args);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    String::from_utf8(out.stdout).unwrap()
}

fn lines(text: &str) -> Vec<&str> {
    text.lines().map(str::trim_end).collect()
}

#[test]
fn a_fork_sends_only_its_own_ancestry() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = forked_session(&host);
    let requests = mock.requests();
    assert_eq!(requests.len(), 4);
    let fork = &requests[3].body["messages"];
    let texts: Vec<&str> = fork
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            m["content"]
                .as_array()
                .unwrap()
                .iter()
                .find_map(|b| b["text"].as_str().or(b["type"].as_str()))
                .unwrap()
        })
        .collect();
    assert_eq!(
        texts,
        [
            "first task",
            "I'll write it.",
            "tool_result",
            "wrote it",
            "other way"
        ]
    );
    assert!(!fork.to_string().contains("second"), "{fork}");

    // The fork's prompt is @7, a child of @4; the head is its answer.
    let db = &host.sessions()[0];
    let parent = query(
        db,
        "SELECT p.seq FROM messages m JOIN messages p ON p.id = m.parent_id WHERE m.seq = 7",
    );
    assert_eq!(parent, [[json!(4)]]);
    let head = query(
        db,
        "SELECT m.seq FROM context c JOIN messages m ON m.id = c.value WHERE c.key = 'head'",
    );
    assert_eq!(head, [[json!(8)]]);

    // A fork from a message that does not exist says which ones do.
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "@42", "again"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    let id = db.file_stem().unwrap().to_string_lossy().into_owned();
    assert!(
        err.contains(&id) && err.contains("no message @42") && err.contains("@1 to @8"),
        "{err}"
    );
    assert_eq!(mock.requests().len(), 4);
}

#[test]
fn every_tree_command_shows_the_tree() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let _mock = forked_session(&host);

    assert_eq!(
        lines(&stdout(&host, &["scan"])),
        [
            "  @1    user       \"first task\"",
            "  @2    assistant  \"I'll write it.\" · write a.txt",
            "  @3    user       write: ok",
            "  @4    assistant  \"wrote it\"",
            "  @7    user       \"other way\"",
            "> @8    assistant  \"forked answer\"",
        ]
    );
    let scan: Value = serde_json::from_str(&stdout(&host, &["scan", "--json"])).unwrap();
    let seqs: Vec<i64> = scan
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["seq"].as_i64().unwrap())
        .collect();
    assert_eq!(seqs, [1, 2, 3, 4, 7, 8]);
    assert_eq!(
        scan[1]["summary"],
        json!(["\"I'll write it.\"", "write a.txt"])
    );
    assert_eq!(scan[5]["head"], json!(true));
    assert_eq!(scan[5]["output_tokens"], json!(40));

    assert_eq!(
        lines(&stdout(&host, &["tree"])),
        [
            "  @1    user       \"first task\"",
            "  @2    assistant  \"I'll write it.\" · write a.txt",
            "  @3    user       write: ok",
            "  @4    assistant  \"wrote it\"  [2 branches]",
            "  ├─ @5    user       \"second task\"",
            "  │  @6    assistant  \"second answer\"  [tip]",
            "  └─ @7    user       \"other way\"",
            ">    @8    assistant  \"forked answer\"  [tip]",
        ]
    );
    assert_eq!(
        lines(&stdout(&host, &["branches"])),
        [
            "  @6       6 messages  \"second answer\"",
            "> @8       6 messages  \"forked answer\"",
        ]
    );
    assert_eq!(
        lines(&stdout(&host, &["diff", "@6", "8"])),
        [
            "common ancestor: @4    assistant  \"wrote it\"",
            "",
            "@6: 2 messages after the common ancestor",
            "  @5    user       \"second task\"",
            "  @6    assistant  \"second answer\"",
            "",
            "@8: 2 messages after the common ancestor",
            "  @7    user       \"other way\"",
            "  @8    assistant  \"forked answer\"",
        ]
    );

    let call = stdout(&host, &["show", "@2"]);
    assert!(call.contains("parent:    @1"), "{call}");
    assert!(call.contains("tokens:    100 in, 10 out"), "{call}");
    assert!(call.contains("[2] tool call write  id toolu_1"), "{call}");
    assert!(call.contains("\"content\": \"two\\n\""), "{call}");
    let result = stdout(&host, &["show", "3"]);
    assert!(
        result.contains("[1] tool result write  id toolu_1  ok"),
        "{result}"
    );
    assert!(result.contains("told the model:"), "{result}");
    let out = ah(&host, &["show", "@9"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("@1 to @8"));

    let usage = stdout(&host, &["usage"]);
    let total = usage.lines().last().unwrap();
    assert!(total.starts_with("total"), "{usage}");
    let numbers: Vec<&str> = total.split_whitespace().collect();
    // opus at its list price: 1000 × $5 + 100 × $25 per million.
    assert_eq!(
        numbers,
        ["total", "4", "calls", "1000", "in", "100", "out", "$0.0075"]
    );

    let all = stdout(&host, &["usage", "--all"]);
    assert!(all.starts_with("1 session in "), "{all}");
    assert_eq!(all.lines().last(), usage.lines().last());

    let listed = stdout(&host, &["sessions"]);
    assert_eq!(listed.lines().count(), 1, "{listed}");
    assert!(
        listed.contains("8 msgs") && listed.contains("first task"),
        "{listed}"
    );
    let json: Value = serde_json::from_str(&stdout(&host, &["sessions", "--json"])).unwrap();
    assert_eq!(json[0]["messages"], json!(8));
    assert_eq!(json[0]["input_tokens"], json!(1000));
    assert_eq!(json[0]["first_prompt"], json!("first task"));
}

#[test]
fn checkout_moves_the_head_and_marks_the_workspace() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let _mock = forked_session(&host);
    let out = stdout(&host, &["checkout", "@6"]);
    assert!(out.contains("head is now @6"), "{out}");
    let db = &host.sessions()[0];
    let at = |key: &str| {
        query(
            db,
            &format!(
                "SELECT m.seq FROM context c JOIN messages m ON m.id = c.value WHERE c.key = '{key}'"
            ),
        )
    };
    assert_eq!(at("head"), [[json!(6)]]);
    assert_eq!(at("workspace_at"), [[json!(6)]]);
    assert_eq!(
        lines(&stdout(&host, &["branches"])),
        [
            "> @6       6 messages  \"second answer\"",
            "  @8       6 messages  \"forked answer\"",
        ]
    );
    let scan = stdout(&host, &["scan"]);
    assert!(
        scan.ends_with("> @6    assistant  \"second answer\"\n"),
        "{scan}"
    );
}

#[test]
fn branch_rm_guards_the_head_unless_forced() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let _mock = forked_session(&host);
    let db = &host.sessions()[0];
    let seqs = || -> Vec<i64> {
        query(db, "SELECT seq FROM messages ORDER BY seq")
            .iter()
            .map(|r| r[0].as_i64().unwrap())
            .collect()
    };

    let out = ah(&host, &["branch", "rm", "@7"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("head (@8)") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(seqs(), [1, 2, 3, 4, 5, 6, 7, 8]);

    let out = stdout(&host, &["branch", "rm", "@5"]);
    assert_eq!(out, "removed 2 messages: @5, @6\n");
    assert_eq!(seqs(), [1, 2, 3, 4, 7, 8]);

    let out = stdout(&host, &["branch", "rm", "@7", "--force"]);
    assert_eq!(out, "removed 2 messages: @7, @8\nhead moved to @4\n");
    assert_eq!(seqs(), [1, 2, 3, 4]);
    let dangling = query(
        db,
        "SELECT count(*) FROM events WHERE message_id IS NOT NULL
         AND message_id NOT IN (SELECT id FROM messages)",
    );
    assert_eq!(dangling, [[json!(0)]]);
    assert_eq!(
        query(db, "PRAGMA foreign_key_check"),
        Vec::<Vec<Value>>::new()
    );
    let blocks = query(
        db,
        "SELECT count(*) FROM content_blocks WHERE message_id NOT IN (SELECT id FROM messages)",
    );
    assert_eq!(blocks, [[json!(0)]]);
    assert!(stdout(&host, &["scan"]).ends_with("> @4    assistant  \"wrote it\"\n"));
}

#[test]
fn empty_messages_are_removed_on_open_unless_others_follow_them() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let _mock = forked_session(&host);
    let db = &host.sessions()[0];
    let conn = rusqlite::Connection::open(db).unwrap();
    let four: String = conn
        .query_row("SELECT id FROM messages WHERE seq = 4", [], |r| r.get(0))
        .unwrap();
    for (id, parent, seq) in [("EMPTY9", four.as_str(), 9), ("EMPTY10", four.as_str(), 10)] {
        conn.execute(
            "INSERT INTO messages (id, parent_id, role, seq, created_at) VALUES (?1, ?2, 'user', ?3, 'x')",
            rusqlite::params![id, parent, seq],
        )
        .unwrap();
    }
    conn.execute(
        "INSERT INTO events (message_id, event_type, created_at, details) VALUES ('EMPTY9', 'x', 'x', '{}')",
        [],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO messages (id, parent_id, role, seq, created_at) VALUES ('AFTER11', 'EMPTY10', 'assistant', 11, 'x')",
        [],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO content_blocks (id, message_id, block_type, seq, content) VALUES ('B', 'AFTER11', 'text', 1, 'hi')",
        [],
    )
    .unwrap();
    drop(conn);

    let out = ah(&host, &["tree"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("removed empty messages @9"), "{err}");
    assert!(err.contains("messages @10 have no content"), "{err}");
    let left = query(
        db,
        "SELECT id FROM messages WHERE id LIKE 'EMPTY%' OR id = 'AFTER11'",
    );
    assert_eq!(left, [[json!("AFTER11")], [json!("EMPTY10")]]);
    assert_eq!(
        query(
            db,
            "SELECT count(*) FROM events WHERE message_id = 'EMPTY9'"
        ),
        [[json!(0)]]
    );
    let tree = String::from_utf8_lossy(&out.stdout);
    assert!(tree.contains("@10   user       (empty)"), "{tree}");
}
