//! `ah org` (`--backend none`, mock model answering per agent) across
//! processes and protocols: SIGKILL in the middle of a tick, then the
//! continued session delivers every letter and answers every tool call;
//! two agents editing one file in turn give one patch that applies; a
//! text-protocol agent works beside a tool-calling one; `--json` events
//! carry the agent's name and the org's own events.

use std::time::Duration;

use crate::support::host::{Host, describe, query, wait_until};
use crate::support::mock::{MockServer, Reply, Turn};
use crate::support::org::{
    Sleeper, agents_of, call, last_user_text, of, org, say, session_id, spawn_org,
};
use serde_json::{Value, json};

#[test]
fn sigkill_mid_tick_then_continue_loses_no_mail_and_answers_every_call() {
    let host = Host::git(&[("README.md", "hello\n")]);
    let sleeper = Sleeper::new(&host);
    let mock = MockServer::start_agents(vec![
        (
            "lead",
            vec![say("@@group coder writes it, tester checks it.")],
        ),
        (
            "coder",
            vec![
                call("t1", "bash", json!({"command": sleeper.command})),
                call("t2", "write", json!({"path": "f.txt", "content": "f\n"})),
                say("Written. @@tester please check."),
            ],
        ),
        ("tester", vec![say("Checked, fine.")]),
    ]);
    let mut child = spawn_org(
        &host,
        &mock,
        &["--agents", "lead:opus,coder:opus,tester:opus", "Make f."],
    );
    sleeper.wait();
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(agents_of(&mock), ["lead", "coder"]);
    let session = session_id(&host);
    let db = host.project.join(format!(".ah/{session}.db"));
    // The tester's letter from lead waits in its inbox.
    let waiting = query(
        &db,
        "SELECT recipient, sender, kind FROM mail WHERE delivered_in IS NULL ORDER BY id",
    );
    assert_eq!(
        waiting,
        [
            vec![json!("tester"), json!("user"), json!("task")],
            vec![json!("tester"), json!("lead"), json!("group")]
        ]
    );

    let out = org(&host, &mock, &["--review", "never", "-S", &session]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    // The cut tick goes on first: coder, with its call answered.
    assert_eq!(
        agents_of(&mock),
        ["lead", "coder", "coder", "coder", "tester"]
    );
    let resumed = &of(&mock, "coder")[1];
    assert!(resumed.told().contains("interrupted"), "{}", resumed.told());
    let tester = last_user_text(&of(&mock, "tester")[0]);
    for letter in [
        "Make f.\nThe task above is from the user, to every agent.",
        "Message from lead to the group:",
        "Message from coder to you:",
    ] {
        assert!(tester.contains(letter), "{letter}: {tester}");
    }
    // Every tool call of the session has its result, stored.
    let unanswered = query(
        &db,
        "SELECT u.tool_id FROM content_blocks u WHERE u.block_type = 'tool_use' AND NOT EXISTS
         (SELECT 1 FROM content_blocks r WHERE r.block_type = 'tool_result' AND r.tool_id = u.tool_id)",
    );
    assert!(unanswered.is_empty(), "{unanswered:?}");
    let pending = query(&db, "SELECT COUNT(*) FROM mail WHERE delivered_in IS NULL");
    assert_eq!(pending[0][0], json!(0));
}

#[test]
fn two_agents_editing_one_file_in_turn_give_one_patch_that_applies() {
    let host = Host::git(&[("story.txt", "one\ntwo\nthree\n")]);
    let edit = |id: &str, old: &str, new: &str| {
        call(
            id,
            "edit",
            json!({"path": "story.txt", "old_string": old, "new_string": new}),
        )
    };
    let mock = MockServer::start_agents(vec![
        (
            "first",
            vec![
                edit("t1", "one", "ONE"),
                say("Top done. @@second your part."),
            ],
        ),
        (
            "second",
            vec![edit("t2", "three", "THREE"), say("Bottom done.")],
        ),
    ]);
    let out = org(
        &host,
        &mock,
        &[
            "--review",
            "auto",
            "--agents",
            "first:opus,second:opus",
            "Shout.",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(host.read("story.txt"), "ONE\ntwo\nTHREE\n");
    let log = host.git_out(&["log", "--format=%s", "-1"]);
    assert!(log.contains("Shout."), "{log}");
}

#[test]
fn a_text_protocol_agent_works_beside_a_tool_calling_one() {
    let host = Host::git(&[("README.md", "hello\n")]);
    let config = host.home.join(".config/ah");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        "[models.local]\nprovider = \"ollama\"\nid = \"coder\"\ntool_protocol = \"text\"\n",
    )
    .unwrap();
    let mock = MockServer::start_agents(vec![
        (
            "lead",
            vec![
                call(
                    "t1",
                    "write",
                    json!({"path": "plan.txt", "content": "plan\n"}),
                ),
                say("@@helper write done.txt please."),
                say("Good."),
            ],
        ),
        (
            "helper",
            vec![
                say("Here it is.\n##file:done.txt\n```\ndone\n```\n"),
                say("Written. @@lead"),
            ],
        ),
    ]);
    let out = host
        .ah(&mock.url())
        .env("AH_OLLAMA_BASE_URL", mock.openai_url())
        .args(["org", "--backend", "none", "--review", "auto"])
        .args(["--agents", "lead:opus,helper:local", "Do it."])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(
        agents_of(&mock),
        ["lead", "lead", "helper", "helper", "lead"]
    );
    assert_eq!(host.read("plan.txt"), "plan\n");
    assert_eq!(host.read("done.txt"), "done\n");
    let helper = &of(&mock, "helper")[0];
    // The helper speaks OpenAI's API with no native tools.
    assert!(helper.body.get("tools").is_none(), "{}", helper.body);
    assert!(helper.body["messages"].is_array());
    let results = last_user_text(&of(&mock, "helper")[1]);
    assert!(results.contains("##file:done.txt: done"), "{results}");
}

#[test]
fn json_events_carry_the_agent_and_the_routing() {
    let host = Host::git(&[("README.md", "hello\n")]);
    let mock = MockServer::start_agents(vec![
        ("lead", vec![say("@@coder go")]),
        (
            "coder",
            vec![
                call("t1", "write", json!({"path": "a.txt", "content": "a\n"})),
                say("done"),
            ],
        ),
    ]);
    let out = org(
        &host,
        &mock,
        &["--json", "--agents", "lead:opus,coder:opus", "Go."],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let of_type = |kind: &str| -> Vec<&Value> {
        events.iter().filter(|e| e["type"] == json!(kind)).collect()
    };
    let ticks: Vec<&Value> = of_type("tick");
    assert_eq!(ticks.len(), 2);
    assert_eq!(ticks[0]["agent"], json!("lead"));
    assert_eq!(ticks[1]["agent"], json!("coder"));
    assert!(
        of_type("routed").iter().any(|e| e["from"] == json!("lead")
            && e["to"] == json!("coder")
            && e["kind"] == json!("direct")),
        "{events:?}"
    );
    for kind in ["agent_start", "text_delta", "tool_call_start", "agent_end"] {
        let seen = of_type(kind);
        assert!(!seen.is_empty(), "no {kind}");
        assert!(
            seen.iter().all(|e| e["agent"].is_string()),
            "{kind} without agent"
        );
    }
    let tool = of_type("tool_call_start")[0];
    assert_eq!(tool["agent"], json!("coder"));
    let end = of_type("org_end")[0];
    assert_eq!(end["end"], json!("done"));
    assert_eq!(end["agents"]["coder"]["tool_calls"], json!(1));
    assert!(of_type("run_end").len() == 1);
}

#[test]
fn a_steering_message_reaches_the_agent_it_names_between_ticks() {
    let host = Host::git(&[("README.md", "hello\n")]);
    let root = host.root.path();
    let (started, go) = (root.join("started"), root.join("go"));
    let wait = format!(
        "touch '{}'; while [ ! -e '{}' ]; do sleep 0.05; done",
        started.display(),
        go.display()
    );
    let mock = MockServer::start_agents(vec![
        (
            "lead",
            vec![
                call("t1", "bash", json!({"command": wait})),
                say("Planned. @@coder start."),
                say("Fine."),
            ],
        ),
        ("coder", vec![say("Started, with tabs. @@lead")]),
    ]);
    let mut child = spawn_org(
        &host,
        &mock,
        &["--agents", "lead:opus,coder:opus", "Plan and code."],
    );
    wait_until("lead's command to start", Duration::from_secs(30), || {
        started.exists()
    });
    let id = session_id(&host);
    let steer = host
        .ah(&mock.url())
        .args(["-S", &id, "--steer", "@@coder use tabs"])
        .output()
        .unwrap();
    assert_eq!(steer.status.code(), Some(0), "{}", describe(&steer));
    std::fs::write(&go, "").unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    assert_eq!(agents_of(&mock), ["lead", "lead", "coder", "lead"]);
    let coder = last_user_text(&of(&mock, "coder")[0]);
    assert!(
        coder.contains("Message from the user:\n\n@@coder use tabs"),
        "{coder}"
    );
    // Only the coder was named: the lead's next turn has no such letter.
    let lead = last_user_text(&of(&mock, "lead")[2]);
    assert!(!lead.contains("use tabs"), "{lead}");
    let queued = query(
        &host.project.join(format!(".ah/{id}.queue.db")),
        "SELECT status FROM queue",
    );
    assert_eq!(queued, [vec![json!("answered")]]);
}

#[test]
fn ctrl_c_mid_tick_then_continue_goes_on_with_that_agent_on_every_agents_files() {
    let host = Host::git(&[("README.md", "hello\n")]);
    let sleeper = Sleeper::new(&host);
    // The lead writes, then the coder, then the lead's command is cut:
    // the lead's own branch holds none of the coder's steps.
    let mock = MockServer::start_agents(vec![
        (
            "lead",
            vec![
                call(
                    "t1",
                    "write",
                    json!({"path": "a.txt", "content": "from lead\n"}),
                ),
                say("@@coder your part"),
                call("t3", "bash", json!({"command": sleeper.command})),
                call("t4", "bash", json!({"command": "cat a.txt b.txt"})),
                say("Seen both. Done."),
            ],
        ),
        (
            "coder",
            vec![
                call(
                    "t2",
                    "write",
                    json!({"path": "b.txt", "content": "from coder\n"}),
                ),
                say("Written. @@lead back to you"),
            ],
        ),
    ]);
    let child = spawn_org(&host, &mock, &["--agents", "lead:opus,coder:opus", "Go."]);
    sleeper.wait();
    crate::support::send_signal(child.id(), rustix::process::Signal::INT);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", describe(&out));
    let id = session_id(&host);

    let out = org(&host, &mock, &["--review", "auto", "-S", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(
        agents_of(&mock),
        ["lead", "lead", "coder", "coder", "lead", "lead", "lead"]
    );
    let lead = of(&mock, "lead");
    assert!(lead[3].told().contains("interrupted"), "{}", lead[3].told());
    // The files are the run's, both agents' changes, though the lead's
    // branch holds only its own steps.
    let seen = lead[4].told();
    assert!(
        seen.contains("from lead") && seen.contains("from coder"),
        "{seen}"
    );
    assert!(
        last_user_text(&lead[3]).contains("not applied"),
        "the lead is told where the files come from: {}",
        last_user_text(&lead[3])
    );
    assert_eq!(host.read("b.txt"), "from coder\n");
    assert_eq!(host.read("a.txt"), "from lead\n");
}

#[test]
fn a_message_cut_at_the_output_limit_is_routed_and_its_agent_told() {
    let host = Host::git(&[("README.md", "hello\n")]);
    let mock = MockServer::start_agents(vec![
        (
            "a",
            vec![
                Turn::reply(
                    Reply::new()
                        .text("@@b please do it and")
                        .stop_reason("max_tokens"),
                ),
                say("I meant: and say so."),
            ],
        ),
        ("b", vec![say("Done it.")]),
    ]);
    let out = org(
        &host,
        &mock,
        &["--review", "never", "--agents", "a:opus,b:opus", "Go."],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(agents_of(&mock), ["a", "b", "a"]);
    let b = last_user_text(&of(&mock, "b")[0]);
    assert!(b.contains("@@b please do it and"), "{b}");
    let a = last_user_text(&of(&mock, "a")[1]);
    assert!(a.contains("was cut off"), "{a}");
}

#[test]
fn the_tick_and_tool_limits_count_every_agent() {
    let host = Host::git(&[("README.md", "hello\n")]);
    let bash = |id: &str| call(id, "bash", json!({"command": format!("echo {id}")}));
    let mock = MockServer::start_agents(vec![
        ("a", vec![bash("t1"), bash("t2"), say("@@b yours")]),
        ("b", vec![bash("t3"), bash("t4"), say("@@a yours")]),
    ]);
    // Three calls for the run: a's two, then b's first.
    let out = org(
        &host,
        &mock,
        &[
            "--review",
            "never",
            "--max-tools",
            "3",
            "--agents",
            "a:opus,b:opus",
            "Go.",
        ],
    );
    assert_eq!(out.status.code(), Some(4), "{}", describe(&out));
    assert_eq!(agents_of(&mock), ["a", "a", "a", "b"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--max-tools 3"), "{stderr}");

    let host = Host::git(&[("README.md", "hello\n")]);
    let chat = |to: &str| (0..5).flat_map(|i| bash_then(i, to)).collect::<Vec<_>>();
    let mock = MockServer::start_agents(vec![("a", chat("b")), ("b", chat("a"))]);
    let out = org(
        &host,
        &mock,
        &[
            "--review",
            "never",
            "--max-ticks",
            "3",
            "--agents",
            "a:opus,b:opus",
            "Go.",
        ],
    );
    assert_eq!(out.status.code(), Some(4), "{}", describe(&out));
    assert_eq!(agents_of(&mock), ["a", "a", "b", "b", "a", "a"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("tick limit (--max-ticks 3)"), "{stderr}");
}

/// Turn `i` of an agent: one tool call, then a message to `to`.
fn bash_then(i: usize, to: &str) -> Vec<Turn> {
    vec![
        call(&format!("to-{to}-{i}"), "bash", json!({"command": "true"})),
        say(&format!("@@{to} yours")),
    ]
}
