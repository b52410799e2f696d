//! `ah org` through the real binary with `--backend none` and a mock model
//! that answers per agent (by the name ah puts in each agent's system
//! prompt): the schedule (a direct message runs next, round-robin over
//! agents with mail), the router (group fan-out without the sender, tags in
//! code ignored, an unknown name told to its sender), budgets, the idle
//! guard, an unattended `@@user` question and its continuation, two agents
//! editing one file into one patch, what the session keeps, and README's
//! agent file, comments and all.

use std::process::Output;

use crate::support;
use crate::support::host::{Host, describe, json_file, query};
use crate::support::mock::MockServer;
use crate::support::org::{
    agents_of as schedule, call, last_user_text as opened_with, of, say, session_id, write,
};
use crate::support::work::all_text;
use serde_json::json;

/// `ah org --backend none --review never ARGS`.
fn org(host: &Host, mock: &MockServer, args: &[&str]) -> Output {
    support::org::org(host, mock, &[&["--review", "never"], args].concat())
}

#[test]
fn a_direct_message_runs_next_and_the_patch_holds_the_work() {
    let host = Host::git(&[("README.md", "hello\n")]);
    let mock = MockServer::start_agents(vec![
        (
            "lead",
            vec![
                say("@@coder please write notes.txt saying hi."),
                say("Thanks, all done."),
            ],
        ),
        (
            "coder",
            vec![
                write("t1", "notes.txt", "hi\n"),
                say("Written. @@lead have a look."),
            ],
        ),
        ("tester", vec![say("Nothing for me to do.")]),
    ]);
    let out = org(
        &host,
        &mock,
        &[
            "--agents",
            "lead:opus,coder:sonnet,tester:haiku",
            "Write notes.",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    // lead first; coder addressed runs next (twice: its tool round); lead
    // addressed back; tester still has the task in its inbox.
    assert_eq!(
        schedule(&mock),
        ["lead", "coder", "coder", "lead", "tester"]
    );
    let coder = &of(&mock, "coder")[0];
    let opened = opened_with(coder);
    // The task is the conversation's first message, sent once.
    assert!(opened.starts_with("Write notes.\n"), "{opened}");
    assert!(
        opened.contains("The task above is from the user, to every agent."),
        "{opened}"
    );
    assert_eq!(opened.matches("Write notes.").count(), 1, "{opened}");
    assert!(
        opened.contains("Message from lead to you:\n\n@@coder please write notes.txt"),
        "{opened}"
    );
    let system = coder.body["system"].to_string();
    assert!(system.contains("You are the agent `coder`"), "{system}");
    assert!(system.contains("- lead, model"), "{system}");
    // Each agent's model.
    let models: Vec<String> = mock
        .requests()
        .iter()
        .map(|r| r.body["model"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(models[0].contains("opus"), "{models:?}");
    assert!(models[1].contains("sonnet"), "{models:?}");
    assert!(models[4].contains("haiku"), "{models:?}");

    let patch = std::fs::read_to_string(host.run().join("session.patch")).unwrap();
    assert!(patch.contains("+hi"), "{patch}");
    let id = session_id(&host);
    let db = host.project.join(format!(".ah/{id}.db"));
    // The task is the root; every other message names its agent.
    let rows = query(
        &db,
        "SELECT seq, parent_id IS NULL, COALESCE(agent, '') FROM messages ORDER BY seq",
    );
    assert_eq!(rows[0][1], json!(1));
    assert_eq!(rows[0][2], json!(""));
    assert!(rows[1..].iter().all(|row| row[2] != json!("")), "{rows:?}");
    let ticks = query(&db, "SELECT COUNT(*) FROM events WHERE event_type = 'tick'");
    assert_eq!(ticks[0][0], json!(4));
    let pending = query(&db, "SELECT COUNT(*) FROM mail WHERE delivered_in IS NULL");
    assert_eq!(pending[0][0], json!(0));

    // The session views name the agents; plain ah leaves the org alone.
    let tree = host
        .ah(&mock.url())
        .args(["tree", "-S", &id])
        .output()
        .unwrap();
    let tree = String::from_utf8_lossy(&tree.stdout).to_string();
    for agent in ["[lead]", "[coder]", "[tester]"] {
        assert!(tree.contains(agent), "{agent}: {tree}");
    }
    let plain = host
        .ah(&mock.url())
        .args(["--backend", "none", "-S", &id, "more"])
        .output()
        .unwrap();
    assert_eq!(plain.status.code(), Some(2), "{}", describe(&plain));
    assert!(String::from_utf8_lossy(&plain.stderr).contains(&format!("ah org -S {id}")));
}

#[test]
fn group_fans_out_without_the_sender_and_code_is_not_routing() {
    let host = Host::git(&[("README.md", "hello\n")]);
    let mock = MockServer::start_agents(vec![
        (
            "a",
            vec![say("Everyone: @@group start. Not `@@c` nor\n```\n@@c\n```")],
        ),
        ("b", vec![say("ok"), say("still ok")]),
        ("c", vec![say("fine")]),
    ]);
    let out = org(&host, &mock, &["--agents", "a:opus,b:opus,c:opus", "Go."]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    // a's group letter reaches b and c, not a; c gets one letter from a
    // (the code tags send nothing).
    assert_eq!(schedule(&mock), ["a", "b", "c"]);
    let c = opened_with(&of(&mock, "c")[0]);
    assert_eq!(c.matches("Message from a").count(), 1, "{c}");
    assert!(c.contains("Message from a to the group"), "{c}");
    assert_eq!(mock.pending_turns_for("b"), 1);
}

#[test]
fn all_is_the_group() {
    let host = Host::git(&[("README.md", "hello\n")]);
    let mock = MockServer::start_agents(vec![
        ("a", vec![say("Everyone: @@all start.")]),
        ("b", vec![say("ok")]),
        ("c", vec![say("fine")]),
    ]);
    let out = org(&host, &mock, &["--agents", "a:opus,b:opus,c:opus", "Go."]);
    // Had `@@all` named no agent, a would be told so and run again.
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(schedule(&mock), ["a", "b", "c"]);
    for agent in ["b", "c"] {
        let opened = opened_with(&of(&mock, agent)[0]);
        assert!(opened.contains("Message from a to the group"), "{opened}");
    }
}

#[test]
fn an_unknown_name_is_told_to_its_sender() {
    let host = Host::git(&[("README.md", "hello\n")]);
    let mock = MockServer::start_agents(vec![
        (
            "lead",
            vec![say("@@ghost do it"), say("Understood, nobody to ask.")],
        ),
        ("coder", vec![say("ok")]),
    ]);
    let out = org(&host, &mock, &["--agents", "lead:opus,coder:opus", "Go."]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(schedule(&mock), ["lead", "coder", "lead"]);
    let told = opened_with(&of(&mock, "lead")[1]);
    assert!(
        told.contains("Note from ah:") && told.contains("@@ghost") && told.contains("lead, coder"),
        "{told}"
    );
}

#[test]
fn unknown_and_duplicate_agents_are_usage_errors_before_anything_starts() {
    let host = Host::git(&[("README.md", "hello\n")]);
    let mock = MockServer::start(vec![]);
    for agents in ["lead:opus,lead:haiku", "ghost", "user:opus"] {
        let out = org(&host, &mock, &["--agents", agents, "Go."]);
        assert_eq!(out.status.code(), Some(2), "{agents}: {}", describe(&out));
    }
    assert!(mock.requests().is_empty());
    assert!(host.runs().is_empty());
}

#[test]
fn an_unattended_question_stops_and_the_answer_goes_to_the_asker() {
    let host = Host::git(&[("README.md", "hello\n")]);
    let mock = MockServer::start_agents(vec![
        (
            "lead",
            vec![
                write("t1", "draft.txt", "v1\n"),
                // Model text with a terminal escape: shown escaped.
                say("@@user Which colour, \u{1b}]0;pwned\u{7}red or blue?"),
                call("t2", "bash", json!({"command": "cat draft.txt"})),
                say("Blue it is. @@coder paint it blue."),
            ],
        ),
        ("coder", vec![say("Painted."), say("ok")]),
    ]);
    let out = org(
        &host,
        &mock,
        &["--agents", "lead:opus,coder:opus", "Paint."],
    );
    assert_eq!(out.status.code(), Some(5), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("lead asks the user: @@user Which colour"),
        "{stderr}"
    );
    assert!(
        !stderr.contains('\u{1b}'),
        "a raw escape reached the terminal: {stderr:?}"
    );
    let run = host.run();
    let question = json_file(&run.join("question.json"));
    assert_eq!(question["agent"], "lead");
    assert!(
        question["question"]
            .as_str()
            .unwrap()
            .contains("Which colour")
    );
    // The coder has the task in its inbox still, but the question stops the
    // run first.
    assert_eq!(schedule(&mock), ["lead", "lead"]);
    let session = question["session"].as_str().unwrap().to_string();

    let out = org(&host, &mock, &["-S", &session, "Blue."]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(schedule(&mock), ["lead", "lead", "lead", "lead", "coder"]);
    let answer = opened_with(&of(&mock, "lead")[2]);
    assert!(
        answer.contains("The user's answer to your question:\n\nBlue."),
        "{answer}"
    );
    // The work copy is the one the first run left: lead reads its draft.
    let lead = of(&mock, "lead");
    assert!(all_text(&lead[3]).contains("v1"), "{}", all_text(&lead[3]));
    // Only the asker got the answer.
    let coder = opened_with(&of(&mock, "coder")[0]);
    assert!(!coder.contains("Blue."), "{coder}");
}

#[test]
fn an_unattended_questions_hint_is_the_command_that_answers_it() {
    // A project whose name a shell would split.
    let mut host = Host::git(&[("README.md", "hello\n")]);
    let moved = host.root.path().join("my project");
    std::fs::rename(&host.project, &moved).unwrap();
    host.project = moved;
    let mock = MockServer::start_agents(vec![
        ("lead", vec![say("@@user Red or blue?"), say("Blue then.")]),
        ("coder", vec![say("Nothing to add.")]),
    ]);
    let out = host
        .ah(&mock.url())
        .current_dir(host.root.path())
        .args(["-C", "my project", "org", "--backend", "none"])
        .args(["--review", "never", "--agents", "lead:opus,coder:opus"])
        .arg("Paint it.")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let id = session_id(&host);
    let hint = format!("ah org -C 'my project' -S {id} \"ANSWER\"");
    assert!(
        stderr.contains(&format!("answer with `{hint}` (the answer goes to lead)")),
        "{stderr}"
    );

    // The hint, typed into a shell where it was given, answers.
    let ah = host.ah(&mock.url());
    let mut shell = std::process::Command::new("bash");
    shell.env_clear().current_dir(host.root.path());
    for (name, value) in ah.get_envs() {
        if let Some(value) = value {
            shell.env(name, value);
        }
    }
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_ah"))
        .parent()
        .unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let out = shell
        .env("PATH", path)
        .env("AH_BACKEND", "none")
        .env("AH_REVIEW", "never")
        .arg("-c")
        .arg(hint.replace("ANSWER", "Blue"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(schedule(&mock), ["lead", "lead", "coder"]);
}

#[test]
fn the_idle_guard_stops_agents_that_only_talk() {
    let host = Host::git(&[("README.md", "hello\n")]);
    let chat = |to: &str| (0..10).map(|_| say(&format!("@@{to} your turn"))).collect();
    let mock = MockServer::start_agents(vec![("a", chat("b")), ("b", chat("a"))]);
    let out = org(
        &host,
        &mock,
        &["--agents", "a:opus,b:opus", "--idle-ticks", "3", "Talk."],
    );
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("without a tool call or a file change"),
        "{stderr}"
    );
    assert_eq!(schedule(&mock), ["a", "b", "a"]);
    // The user speaking again starts the streak again.
    let id = session_id(&host);
    let out = org(&host, &mock, &["-S", &id, "--idle-ticks", "2", "Go on."]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert_eq!(schedule(&mock), ["a", "b", "a", "b", "a"]);
}

#[test]
fn per_turn_and_total_tool_budgets() {
    let host = Host::git(&[("README.md", "hello\n")]);
    std::fs::create_dir_all(host.project.join(".ah/agents")).unwrap();
    host.write(
        ".ah/agents/worker.md",
        "---\nmodel: opus\nmax_tools: 2\ntools: read, bash\n---\nYou do the work.\n",
    );
    let bash = |id: &str| call(id, "bash", json!({"command": "true"}));
    let mock = MockServer::start_agents(vec![(
        "worker",
        vec![
            write("t1", "x.txt", "x\n"),
            bash("t2"),
            bash("t3"),
            say("done"),
        ],
    )]);
    let out = org(
        &host,
        &mock,
        &["--agents", "worker", "--max-tools", "3", "Work."],
    );
    // Turn 1 is cut at 2 calls (told so), turn 2 at the run's third.
    assert_eq!(out.status.code(), Some(4), "{}", describe(&out));
    let worker = of(&mock, "worker");
    assert_eq!(worker.len(), 3, "{:?}", schedule(&mock));
    assert!(
        worker[1].told().contains("not available"),
        "{}",
        worker[1].told()
    );
    let tools: Vec<&str> = worker[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["read", "bash"]);
    // Its prompt names no tool it does not have.
    let system = worker[0].system();
    assert!(system.contains("- `bash` output is truncated"), "{system}");
    for absent in ["`write`", "`edit`", "`apply_patch`", "Prefer", "{{"] {
        assert!(!system.contains(absent), "{absent} in {system}");
    }
    assert!(opened_with(&worker[2]).contains("limit of 2 tool calls per turn"));
    // The write, refused by the agent's tools, is no step: no x.txt.
    let patch = std::fs::read_to_string(host.run().join("session.patch")).unwrap();
    assert!(!patch.contains("x.txt"), "{patch}");
}

/// The agent file README.md shows, as it stands there.
fn readme_agent_example() -> String {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .unwrap_or_else(|e| panic!("read README.md: {e}"));
    let start = readme
        .find("```markdown\n---\nmodel:")
        .unwrap_or_else(|| panic!("README.md has no agent file example"));
    let block = &readme[start + "```markdown\n".len()..];
    let end = block
        .find("```")
        .unwrap_or_else(|| panic!("the example never ends"));
    block[..end].to_string()
}

#[test]
fn the_readmes_agent_file_with_its_comments_is_understood() {
    let example = readme_agent_example();
    assert!(
        example.contains("   # "),
        "the example has comments:\n{example}"
    );
    let host = Host::git(&[("README.md", "hello\n")]);
    std::fs::create_dir_all(host.project.join(".ah/agents")).unwrap();
    host.write(".ah/agents/coder.md", &example);
    let mock = MockServer::start_agents(vec![("coder", vec![say("Nothing to write.")])]);
    let out = org(&host, &mock, &["--agents", "coder", "Write notes."]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let coder = of(&mock, "coder");
    let tools: Vec<&str> = coder[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["read", "edit", "bash"]);
    let system = coder[0].system();
    assert!(
        system.contains("You write the code the lead asks for"),
        "{system}"
    );
}
