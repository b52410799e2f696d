//! Per-agent scripts: a request whose system prompt says "You are the agent
//! `NAME`" takes `NAME`'s next turn whatever order the agents ask in, any
//! other request the shared script's; an agent out of turns fails naming it;
//! and the recorded request tells whose it was, on either API.

use serde_json::{Value, json};

use super::client::{Seen, messages_body, post_body};
use crate::support::mock::{MockServer, Reply, Turn};

const MESSAGES: &str = "/v1/messages";
const CHAT: &str = "/v1/chat/completions";

/// A Messages API body whose `system` field is `system`.
fn anthropic(system: Value) -> Value {
    let mut body = messages_body();
    body["system"] = system;
    body
}

/// A Chat Completions body whose system message has `content`.
fn openai(content: Value) -> Value {
    json!({
        "model": "gpt-test-model",
        "stream": true,
        "messages": [
            {"role": "system", "content": content},
            {"role": "user", "content": "hi"},
        ],
    })
}

/// A Messages API request from agent `name`, as ah words it.
fn from_agent(name: &str) -> Value {
    anthropic(json!(format!(
        "You are ah, a coding agent.\nYou are the agent `{name}` of this org."
    )))
}

fn says(text: &str) -> Turn {
    Turn::reply(Reply::new().text(text))
}

/// The text a streamed reply carried, on either API.
fn reply_text(seen: &Seen) -> String {
    let body = String::from_utf8(seen.body()).expect("UTF-8 body");
    assert_eq!(seen.status, 200, "not a reply: {body}");
    body.lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .filter(|data| *data != "[DONE]")
        .filter_map(|data| {
            let event: Value = serde_json::from_str(data).expect("event data is JSON");
            let text = event["delta"]["text"]
                .as_str()
                .or(event["choices"][0]["delta"]["content"].as_str());
            text.map(str::to_string)
        })
        .collect()
}

/// The message of an error answer.
fn error_message(seen: &Seen) -> String {
    assert_eq!(seen.status, 400, "a client must not retry it");
    seen.json()["error"]["message"]
        .as_str()
        .expect("error message")
        .to_string()
}

#[test]
fn each_agent_gets_its_own_script_whatever_the_request_order() {
    let mock = MockServer::start_agents(vec![
        ("alpha", vec![says("alpha first"), says("alpha second")]),
        ("beta", vec![says("beta first")]),
    ]);
    let beta = post_body(&mock, MESSAGES, &from_agent("beta"));
    let alpha = post_body(&mock, MESSAGES, &from_agent("alpha"));
    let alpha_again = post_body(&mock, MESSAGES, &from_agent("alpha"));

    assert_eq!(reply_text(&beta), "beta first");
    assert_eq!(reply_text(&alpha), "alpha first");
    assert_eq!(reply_text(&alpha_again), "alpha second");
    assert_eq!(
        (
            mock.pending_turns_for("alpha"),
            mock.pending_turns_for("beta")
        ),
        (0, 0)
    );
    let agents: Vec<Option<String>> = mock.requests().iter().map(|r| r.agent()).collect();
    assert_eq!(
        agents,
        [
            Some("beta".into()),
            Some("alpha".into()),
            Some("alpha".into())
        ]
    );
}

#[test]
fn requests_without_the_marker_take_the_shared_script() {
    let mock = MockServer::start_agents(vec![("alpha", vec![says("alpha's")])]);
    mock.push(says("shared"));
    assert_eq!(mock.pending_turns(), 1);

    let plain = post_body(&mock, MESSAGES, &anthropic(json!("You are ah.")));
    assert_eq!(reply_text(&plain), "shared");
    assert_eq!(mock.pending_turns_for("alpha"), 1, "alpha's turn is kept");
    assert_eq!(
        reply_text(&post_body(&mock, MESSAGES, &from_agent("alpha"))),
        "alpha's"
    );
    assert_eq!(mock.pending_turns(), 0);
}

#[test]
fn an_agent_out_of_turns_fails_naming_it() {
    let mock = MockServer::start_agents(vec![("alpha", vec![says("only one")]), ("beta", vec![])]);
    mock.push(says("shared"));

    let beta = post_body(&mock, MESSAGES, &from_agent("beta"));
    assert_eq!(
        error_message(&beta),
        "mock script of agent `beta` exhausted: request 1 has no scripted turn \
         (0 turns were scripted for `beta`)"
    );
    assert_eq!(
        reply_text(&post_body(&mock, MESSAGES, &from_agent("alpha"))),
        "only one"
    );
    let alpha = post_body(&mock, MESSAGES, &from_agent("alpha"));
    assert!(
        error_message(&alpha).starts_with("mock script of agent `alpha` exhausted: request 3"),
        "{}",
        error_message(&alpha)
    );
    // A misspelt agent fails too, rather than taking a shared turn.
    let typo = post_body(&mock, CHAT, &openai(json!("You are the agent `alhpa`.")));
    assert_eq!(typo.json()["error"]["type"], "invalid_request_error");
    assert!(error_message(&typo).contains("agent `alhpa`"));
    assert_eq!(mock.pending_turns(), 1, "the shared turn is untouched");
}

#[test]
fn turns_pushed_for_an_agent_join_its_script_only() {
    let mock = MockServer::start_agents(vec![("alpha", vec![says("alpha first")])]);
    mock.push_for("alpha", says("alpha second"));
    mock.push_for("beta", says("beta first"));
    assert_eq!(
        (
            mock.pending_turns_for("alpha"),
            mock.pending_turns_for("beta"),
            mock.pending_turns_for("gamma"),
            mock.pending_turns(),
        ),
        (2, 1, 0, 0)
    );

    let texts: Vec<String> = ["beta", "alpha", "alpha"]
        .iter()
        .map(|agent| reply_text(&post_body(&mock, MESSAGES, &from_agent(agent))))
        .collect();
    assert_eq!(texts, ["beta first", "alpha first", "alpha second"]);
}

#[test]
fn start_ignores_the_marker_and_serves_the_shared_script() {
    let mock = MockServer::start(vec![says("shared")]);
    let seen = post_body(&mock, MESSAGES, &from_agent("alpha"));
    assert_eq!(reply_text(&seen), "shared");
    assert_eq!(mock.pending_turns_for("alpha"), 0);
    assert_eq!(mock.requests()[0].agent().as_deref(), Some("alpha"));
}

#[test]
fn the_agent_is_read_from_the_system_prompt_of_either_api() {
    let mock = MockServer::start_agents(vec![
        ("lead", vec![says("to lead")]),
        ("worker_2", vec![says("to worker")]),
        ("critic-a", vec![says("to critic")]),
        ("critic-b", vec![says("to critic b")]),
    ]);
    mock.push(says("shared one"));
    mock.push(says("shared two"));
    let sent = [
        (
            MESSAGES,
            anthropic(json!("You are the agent `lead`.")),
            "to lead",
        ),
        (
            MESSAGES,
            anthropic(json!([
                {"type": "text", "text": "You are ah."},
                {"type": "text", "text": "Mind the `tests`. You are the agent `worker_2`, a worker.",
                 "cache_control": {"type": "ephemeral"}},
            ])),
            "to worker",
        ),
        (
            CHAT,
            openai(json!("You are ah.\nYou are the agent `critic-a`.")),
            "to critic",
        ),
        (
            CHAT,
            openai(json!([
                {"type": "text", "text": "You are ah."},
                {"type": "text", "text": "You are the agent `critic-b`."},
            ])),
            "to critic b",
        ),
        // Not a system prompt, and not a well-formed name: no agent.
        (
            MESSAGES,
            json!({
                "model": "claude-test-model", "stream": true,
                "system": "You are the agent `not an agent`.",
                "messages": [{"role": "user", "content": "You are the agent `lead`."}],
            }),
            "shared one",
        ),
        (CHAT, openai(json!("You are ah.")), "shared two"),
    ];
    for (route, body, reply) in &sent {
        let seen = post_body(&mock, route, body);
        assert_eq!(reply_text(&seen), *reply, "{route} {body}");
    }

    let agents: Vec<Option<String>> = mock.requests().iter().map(|r| r.agent()).collect();
    let expected = [
        Some("lead"),
        Some("worker_2"),
        Some("critic-a"),
        Some("critic-b"),
        None,
        None,
    ];
    assert_eq!(agents, expected.map(|agent| agent.map(String::from)));
}
