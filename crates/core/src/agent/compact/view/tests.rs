//! Tests of the compacted view: which messages a request carries after a
//! summary, and how the summary marker reads.

use serde_json::json;

use super::*;
use ah_llm::Usage;
use ah_session::{BlockRecord, MessageMeta};

fn message(id: &str, role: Role, blocks: Vec<BlockRecord>) -> StoredMessage {
    StoredMessage {
        id: id.to_string(),
        parent_id: None,
        role,
        seq: 0,
        created_at: String::new(),
        meta: MessageMeta::default(),
        agent: None,
        blocks,
    }
}

fn prompt(id: &str, text: &str) -> StoredMessage {
    message(
        id,
        Role::User,
        vec![BlockRecord::from(Block::Text { text: text.into() })],
    )
}

fn call(id: &str, tool_id: &str) -> StoredMessage {
    message(
        id,
        Role::Assistant,
        vec![BlockRecord::from(Block::ToolUse {
            id: tool_id.into(),
            name: "bash".into(),
            input: json!({"command": "true"}),
        })],
    )
}

fn results(id: &str, tool_id: &str, output: &str) -> StoredMessage {
    message(
        id,
        Role::User,
        vec![BlockRecord::tool_result(
            tool_id,
            "bash",
            output.into(),
            false,
        )],
    )
}

fn answer(id: &str, text: &str) -> StoredMessage {
    message(
        id,
        Role::Assistant,
        vec![BlockRecord::from(Block::Text { text: text.into() })],
    )
}

fn summary(id: &str, kept_from: &str) -> StoredMessage {
    quoting_summary(id, kept_from, None)
}

/// A summary that quotes the user's request beside it.
fn quoting_summary(id: &str, kept_from: &str, request: Option<&str>) -> StoredMessage {
    let mut block = BlockRecord::from(Block::Text {
        text: format!("summary {id}"),
    });
    block.details = Some(marker_details(kept_from, 1000, request));
    message(id, Role::User, vec![block])
}

fn ids(messages: &[&StoredMessage]) -> Vec<String> {
    messages.iter().map(|m| m.id.clone()).collect()
}

/// A prompt and `n` tool exchanges: p, a1, r1, a2, r2, …
fn agentic(n: usize) -> Vec<StoredMessage> {
    let mut path = vec![prompt("p", "fix the build")];
    for i in 1..=n {
        path.push(call(&format!("a{i}"), &format!("t{i}")));
        path.push(results(&format!("r{i}"), &format!("t{i}"), "ok"));
    }
    path
}

#[test]
fn without_compaction_the_view_is_the_path() {
    let path = agentic(2);
    let view = view(&path);
    assert_eq!(ids(&view.messages), ["p", "a1", "r1", "a2", "r2"]);
    assert_eq!(view.fresh_from, 0);
}

#[test]
fn the_latest_summary_replaces_everything_before_its_kept_point() {
    let mut path = agentic(3);
    path.push(summary("s1", "a2"));
    path.push(call("a4", "t4"));
    path.push(results("r4", "t4", "ok"));
    let view = view(&path);
    assert_eq!(
        ids(&view.messages),
        ["s1", "a2", "r2", "a3", "r3", "a4", "r4"]
    );
    assert_eq!(view.fresh_from, 5, "a4 is the first message after s1");
    let sent = view.messages[0].to_message();
    assert_eq!(sent.role, Role::User);
    assert_eq!(
        sent.content,
        vec![Block::Text {
            text: "summary s1".into()
        }]
    );
}

#[test]
fn an_older_summary_inside_the_kept_part_is_left_out() {
    let mut path = agentic(2);
    path.push(summary("s1", "a1"));
    path.push(call("a3", "t3"));
    path.push(results("r3", "t3", "ok"));
    path.push(summary("s2", "a2"));
    let view = view(&path);
    assert_eq!(ids(&view.messages), ["s2", "a2", "r2", "a3", "r3"]);
    assert_eq!(view.fresh_from, 5);
}

#[test]
fn a_kept_point_missing_from_the_path_keeps_only_what_follows_the_summary() {
    let mut path = agentic(1);
    path.push(summary("s1", "elsewhere"));
    path.push(prompt("p2", "next"));
    assert_eq!(ids(&view(&path).messages), ["s1", "p2"]);
}

#[test]
fn the_size_is_the_last_reported_usage_after_the_summary_plus_what_followed() {
    let mut path = agentic(2);
    path[3].meta.usage = Some(Usage {
        input_tokens: 150_000,
        output_tokens: 100,
        cache_read_input_tokens: 20_000,
        ..Usage::default()
    });
    // r2 holds 400 characters: about 100 tokens.
    path[4] = results("r2", "t2", &"x".repeat(400));
    assert_eq!(
        context_tokens(&view(&path), 0),
        150_000 + 20_000 + 100 + 100
    );

    // After a summary, the old report no longer measures the request.
    path.push(summary("s1", "a2"));
    let estimated = context_tokens(&view(&path), 4_000);
    assert!(estimated < 2_000, "{estimated}");
    assert!(estimated >= 1_000, "the overhead counts: {estimated}");
}

#[test]
fn the_cut_keeps_the_last_exchanges_and_never_splits_a_call_from_its_result() {
    let path = agentic(3);
    let view = view(&path);
    let cut = cut_point(&view.messages, 2, u64::MAX).unwrap();
    assert_eq!(view.messages[cut].id, "a2");
    for keep in 1..=3 {
        let cut = cut_point(&view.messages, keep, u64::MAX).unwrap();
        assert_eq!(view.messages[cut].role, Role::Assistant, "keep {keep}");
        assert!(cut > 0);
    }
}

#[test]
fn a_new_request_is_kept_with_the_exchanges_before_it() {
    // p, a1, r1, done, p2, a3, r3
    let mut path = agentic(1);
    path.push(answer("done", "fixed"));
    path.push(prompt("p2", "now the docs"));
    path.push(call("a3", "t3"));
    path.push(results("r3", "t3", "ok"));
    let view = view(&path);
    let kept = |turns| {
        view.messages[cut_point(&view.messages, turns, u64::MAX).unwrap()]
            .id
            .clone()
    };
    assert_eq!(
        kept(1),
        "p2",
        "one answer kept: a3, with the request it answers"
    );
    assert_eq!(kept(2), "done");
    assert_eq!(kept(3), "a1");
}

#[test]
fn the_token_budget_shortens_the_kept_part_but_the_last_exchange_stays() {
    let mut path = agentic(3);
    path[4] = results("r2", "t2", &"x".repeat(40_000));
    path[6] = results("r3", "t3", &"y".repeat(40_000));
    let view = view(&path);
    let cut = cut_point(&view.messages, 3, 15_000).unwrap();
    assert_eq!(view.messages[cut].id, "a3");
    let cut = cut_point(&view.messages, 3, 1).unwrap();
    assert_eq!(
        view.messages[cut].id, "a3",
        "the last exchange is kept whatever it costs"
    );
}

#[test]
fn nothing_is_cut_when_nothing_would_be_summarised() {
    let path = vec![prompt("p", "hello")];
    assert_eq!(cut_point(&view(&path).messages, 2, u64::MAX), None);
    let mut path = agentic(1);
    path.push(summary("s1", "p"));
    // s1, p, a1, r1: cutting at p would summarise s1 alone; a1 is the cut.
    let view = view(&path);
    assert_eq!(cut_point(&view.messages, 2, u64::MAX), Some(2));
    let only_results = [results("r0", "t0", "orphan")];
    assert_eq!(
        cut_point(&only_results.iter().collect::<Vec<_>>(), 2, u64::MAX),
        None
    );
}

#[test]
fn the_request_is_quoted_only_when_the_cut_falls_inside_its_turn() {
    let path = agentic(3);
    let view = view(&path);
    assert_eq!(
        split_request(&view.messages, 3).as_deref(),
        Some("fix the build")
    );
    let mut path = agentic(1);
    path.push(prompt("p2", "second"));
    let view = super::view(&path);
    assert_eq!(split_request(&view.messages, 3), None, "p2 is kept");
}

#[test]
fn a_second_compaction_in_the_same_turn_carries_the_quoted_request_over() {
    // p, a1, r1, …, a5, r5; the first summary kept from a4 and quoted p.
    let request = "fix the build\n\nand keep `make check` green";
    let mut path = agentic(5);
    path[0] = prompt("p", request);
    path.push(quoting_summary("s1", "a4", Some(request)));
    for i in 6..=7 {
        path.push(call(&format!("a{i}"), &format!("t{i}")));
        path.push(results(&format!("r{i}"), &format!("t{i}"), "ok"));
    }
    let view = view(&path);
    assert_eq!(ids(&view.messages[..3]), ["s1", "a4", "r4"]);
    let cut = cut_point(&view.messages, 2, u64::MAX).unwrap();
    assert_eq!(view.messages[cut].id, "a6", "cut well into the turn");
    assert_eq!(split_request(&view.messages, cut).as_deref(), Some(request));

    // A request after the summary is quoted from its own message; a summary
    // without a quote (stored before quotes were recorded) has none to give.
    let mut path = agentic(3);
    path.push(summary("s1", "p"));
    let view = super::view(&path);
    assert_eq!(
        split_request(&view.messages, 4).as_deref(),
        Some("fix the build")
    );
    let mut path = agentic(3);
    path.push(summary("s1", "a2"));
    let view = super::view(&path);
    assert_eq!(split_request(&view.messages, 3), None);
}

#[test]
fn the_marker_records_the_quoted_request_only_when_there_is_one() {
    let quoted = marker_details("a4", 7, Some("fix it"));
    assert_eq!(
        quoted,
        json!({"compaction": {"kept_from": "a4", "tokens_before": 7, "request": "fix it"}})
    );
    let plain = marker_details("a4", 7, None);
    assert_eq!(
        plain,
        json!({"compaction": {"kept_from": "a4", "tokens_before": 7}})
    );
}
