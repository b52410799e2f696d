//! The models of an `ah org` run, through the real binary with `--backend
//! none`: every agent's model is recorded (the run line, the session, the
//! manifest, each agent's `agent_start`), and `ah compact` on an org
//! session summarises with the model and provider of the agent whose
//! conversation holds the session's head. Here every agent runs on an
//! OpenAI-compatible provider at the mock's `/v1` and no Anthropic key is
//! set: nothing may ask Anthropic.

use crate::support::host::{Host, describe, events, json_file, query};
use crate::support::mock::{MockServer, Reply, Turn};
use crate::support::org::{agents_of, call, say, session_id};
use serde_json::json;

const SUMMARY: &str = "## Goal\nWrite the notes. SUMMARY-MARKER";

#[test]
fn an_org_on_another_provider_records_its_agents_models_and_compacts_through_them() {
    let host = Host::git(&[("README.md", "hello\n")]);
    let echo = |id: &str, word: &str| call(id, "bash", json!({"command": format!("echo {word}")}));
    let mock = MockServer::start_agents(vec![
        ("lead", vec![say("@@coder please write the notes.")]),
        (
            "coder",
            vec![
                echo("c1", "FIRST"),
                echo("c2", "SECOND"),
                echo("c3", "THIRD"),
                say("Written."),
            ],
        ),
    ]);
    let agents = "lead:openai:gpt-4.1,coder:openai:gpt-4o";
    let out = host
        .ah_openai(&mock.openai_url())
        .env_remove("ANTHROPIC_API_KEY")
        .args(["org", "--backend", "none", "--review", "never"])
        .args(["--agents", agents, "Write the notes."])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(
        agents_of(&mock),
        ["lead", "coder", "coder", "coder", "coder"]
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("(none backend, models lead openai:gpt-4.1, coder openai:gpt-4o)"),
        "{stderr}"
    );
    let manifest = json_file(&host.run().join("manifest.json"));
    assert_eq!(manifest["model"], json!(agents));
    let db = &host.sessions()[0];
    let model = query(db, "SELECT value FROM context WHERE key = 'model'");
    assert_eq!(model, [[json!(agents)]]);
    let started: Vec<_> = events(db, "agent_start")
        .iter()
        .map(|event| event["model"].clone())
        .collect();
    assert_eq!(started, [json!("gpt-4.1"), json!("gpt-4o")]);

    // The head is the coder's last message: its model writes the summary,
    // and the summary goes on the coder's conversation.
    mock.push(Turn::reply(Reply::new().text(SUMMARY)));
    let id = session_id(&host);
    let out = host
        .ah_openai(&mock.openai_url())
        .env_remove("ANTHROPIC_API_KEY")
        .args(["compact", "-S", &id])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains(&format!("compacted session {id} (coder's conversation)")),
        "{said}"
    );
    let requests = mock.requests();
    assert_eq!(requests.len(), 6);
    assert!(
        requests
            .iter()
            .all(|request| request.path == "/v1/chat/completions"),
        "no request went to Anthropic's API"
    );
    let summary = &requests[5];
    assert_eq!(summary.body["model"], json!("gpt-4o"));
    assert!(summary.body.get("tools").is_none(), "{}", summary.body);
    let stored = query(
        db,
        "SELECT agent FROM messages WHERE seq = (SELECT MAX(seq) FROM messages)",
    );
    assert_eq!(stored, [[json!("coder")]]);
}
