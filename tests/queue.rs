//! One session, two terminals: the real binary twice against the mock model
//! (`--backend none`). The first ah is kept inside a tool call that waits
//! for a file the test creates, so it holds the session's lock while the
//! second ah steers it, queues follow-ups, waits for an answer, or finds it
//! gone after a SIGKILL.

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use crate::support::host::{Host, describe, events, query, wait_until};
use crate::support::mock::{MockServer, Reply, Turn};
use serde_json::{Value, json};

const SKIPPED: &str = "skipped: a steering message arrived";

/// A first ah, busy in a tool call until [`Busy::release`].
struct Busy {
    child: Child,
    go: PathBuf,
}

impl Busy {
    /// Starts ah on `host` with a first reply that calls `bash` to wait for
    /// a file, then `read` twice; `more` are the turns after that.
    fn start(host: &Host, mock_turns: Vec<Turn>) -> (Busy, MockServer) {
        let started = host.root.path().join("started");
        let go = host.root.path().join("go");
        let wait = format!(
            "touch {} && while [ ! -e {} ]; do sleep 0.05; done",
            started.display(),
            go.display()
        );
        let mut turns = vec![Turn::reply(
            Reply::new()
                .text("working")
                .tool_use("toolu_1", "bash", json!({ "command": wait }))
                .tool_use("toolu_2", "read", json!({"path": "a.txt"}))
                .tool_use("toolu_3", "read", json!({"path": "a.txt"})),
        )];
        turns.extend(mock_turns);
        let mock = MockServer::start(turns);
        let child = host
            .ah(&mock.url())
            .args(["--backend", "none", "--review", "never", "first task"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_until(
            "the first ah's tool to start",
            Duration::from_secs(60),
            || started.exists(),
        );
        (Busy { child, go }, mock)
    }

    /// Lets the tool call finish.
    fn release(&self) {
        std::fs::write(&self.go, "").unwrap();
    }

    fn finish(self) -> Output {
        self.release();
        self.child.wait_with_output().unwrap()
    }
}

/// `ah` run from a second terminal on the same project.
fn second(host: &Host, mock: &MockServer, args: &[&str]) -> Command {
    let mut cmd = host.ah(&mock.url());
    cmd.args(args);
    cmd
}

#[test]
fn steering_skips_the_rest_of_the_turn_and_reaches_the_next_request() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let (busy, mock) = Busy::start(&host, vec![Turn::reply(Reply::new().text("turning"))]);
    let out = second(&host, &mock, &["--steer", "stop reading, use grep"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let told = String::from_utf8_lossy(&out.stderr);
    assert!(
        told.contains("queued steering message #1 for ah process"),
        "{told}"
    );

    let out = busy.finish();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    let sent = requests[1].last_message();
    assert_eq!(sent["role"], json!("user"));
    let content = sent["content"].as_array().unwrap();
    assert_eq!(content.len(), 4, "{sent}");
    assert_eq!(content[0]["tool_use_id"], json!("toolu_1"));
    assert_ne!(
        content[0]["content"],
        json!(SKIPPED),
        "the running call ran"
    );
    for (block, id) in content[1..3].iter().zip(["toolu_2", "toolu_3"]) {
        assert_eq!(block["type"], json!("tool_result"));
        assert_eq!(block["tool_use_id"], json!(id));
        assert_eq!(block["content"], json!(SKIPPED));
        assert_eq!(block["is_error"], json!(true));
    }
    assert_eq!(
        content[3],
        json!({"type": "text", "text": "stop reading, use grep"})
    );

    let db = &host.sessions()[0];
    let stored = query(
        db,
        "SELECT content, details FROM content_blocks WHERE block_type = 'text' AND details IS NOT NULL",
    );
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0][0], json!("stop reading, use grep"));
    let details: Value = serde_json::from_str(stored[0][1].as_str().unwrap()).unwrap();
    assert_eq!(details, json!({"queued": "steer", "queue_id": 1}));
    let delivered = events(db, "steering_delivered");
    assert_eq!(delivered.len(), 1);
    assert_eq!(delivered[0]["text"], json!("stop reading, use grep"));
    assert_eq!(delivered[0]["skipped"], json!(2));
    let ran = query(
        db,
        "SELECT count(*) FROM events WHERE event_type = 'tool_call_start'",
    );
    assert_eq!(ran[0][0], json!(1), "the skipped calls never ran");
}

#[test]
fn follow_ups_and_a_prompt_given_to_a_busy_session_start_the_next_turn() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let (busy, mock) = Busy::start(
        &host,
        vec![
            Turn::reply(Reply::new().text("first answer")),
            Turn::reply(Reply::new().text("second answer")),
        ],
    );
    let out = second(&host, &mock, &["--followup", "then add tests"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    // A plain prompt on the busy session is queued, not run.
    let out = second(&host, &mock, &["--backend", "none", "and a changelog"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let told = String::from_utf8_lossy(&out.stderr);
    assert!(
        told.contains("is in use by ah process") && told.contains("queued as follow-up #2"),
        "{told}"
    );
    assert!(told.contains("--wait"), "{told}");
    assert_eq!(host.runs().len(), 1, "the second ah prepared no run");

    let out = busy.finish();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let requests = mock.requests();
    assert_eq!(requests.len(), 3, "one more turn for the follow-ups");
    // The tool round ran whole: follow-ups do not skip anything.
    let results = requests[1].last_message();
    assert_eq!(results["content"].as_array().unwrap().len(), 3);
    assert!(!results.to_string().contains(SKIPPED));
    let messages = requests[2].messages();
    let answer = &messages[messages.len() - 2];
    assert_eq!(answer["role"], json!("assistant"));
    assert_eq!(answer["content"][0]["text"], json!("first answer"));
    assert_eq!(
        messages[messages.len() - 1],
        json!({"role": "user", "content": [
            {"type": "text", "text": "then add tests"},
            {"type": "text", "text": "and a changelog"},
        ]})
    );
    let db = &host.sessions()[0];
    let delivered = events(db, "followup_delivered");
    let texts: Vec<&Value> = delivered.iter().map(|e| &e["text"]).collect();
    assert_eq!(texts, [&json!("then add tests"), &json!("and a changelog")]);
    // The lock was let go.
    assert_eq!(
        query(&db.with_extension("queue.db"), "SELECT count(*) FROM lock")[0][0],
        json!(0)
    );
}

#[test]
fn wait_prints_the_answer_to_a_queued_prompt() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let (busy, mock) = Busy::start(
        &host,
        vec![
            Turn::reply(Reply::new().text("first answer")),
            Turn::reply(Reply::new().text("Looked: ").text("all good.")),
        ],
    );
    let waiter = second(&host, &mock, &["--backend", "none", "--wait", "check it"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let queue = host.sessions()[0].with_extension("queue.db");
    wait_until("the prompt to be queued", Duration::from_secs(30), || {
        queue.exists() && !query(&queue, "SELECT id FROM queue").is_empty()
    });
    let out = busy.finish();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let waited = waiter.wait_with_output().unwrap();
    assert_eq!(waited.status.code(), Some(0), "{}", describe(&waited));
    assert_eq!(
        String::from_utf8_lossy(&waited.stdout),
        "Looked: \n\nall good.\n"
    );
    assert!(String::from_utf8_lossy(&waited.stderr).contains("Waiting for its answer"));
    assert_eq!(mock.requests().len(), 3);
}

#[test]
fn a_sigkilled_owner_is_given_up_by_the_waiter_and_taken_over_at_once() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let (mut busy, mock) = Busy::start(&host, vec![]);
    let owner = busy.child.id();
    let waiter = second(&host, &mock, &["--backend", "none", "--wait", "check it"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let queue = host.sessions()[0].with_extension("queue.db");
    wait_until("the prompt to be queued", Duration::from_secs(30), || {
        queue.exists() && !query(&queue, "SELECT id FROM queue").is_empty()
    });
    crate::support::send_signal(owner, rustix::process::Signal::KILL);
    busy.child.wait().unwrap();
    // The orphaned tool command may go now.
    busy.release();

    let waited = waiter.wait_with_output().unwrap();
    assert_eq!(waited.status.code(), Some(1), "{}", describe(&waited));
    let told = String::from_utf8_lossy(&waited.stderr);
    assert!(
        told.contains(&format!("ah process {owner} stopped before answering")),
        "{told}"
    );
    // Its lock is still on disk, but its process is dead: taken at once.
    assert_eq!(query(&queue, "SELECT pid FROM lock")[0][0], json!(owner));
    mock.push(Turn::reply(Reply::new().text("resumed")));
    let out = second(
        &host,
        &mock,
        &["--backend", "none", "--review", "never", "go on"],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let told = String::from_utf8_lossy(&out.stderr);
    assert!(
        told.contains(&format!(
            "from ah process {owner}, which is no longer running"
        )),
        "{told}"
    );
    assert!(
        told.contains("queued follow-up #1 was not delivered: check it"),
        "{told}"
    );
    assert_eq!(
        query(&queue, "SELECT status FROM queue WHERE id = 1")[0][0],
        json!("dropped")
    );
    assert_eq!(mock.requests().len(), 2);
}

#[test]
fn steering_a_session_no_ah_works_on_is_refused_with_how_to_run_it() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(vec![Turn::reply(Reply::new().text("done"))]);
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "never", "task"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    for flag in ["--steer", "--followup"] {
        let out = second(&host, &mock, &[flag, "it's late"]).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
        let told = String::from_utf8_lossy(&out.stderr);
        assert!(told.contains("no ah is working on session"), "{told}");
        assert!(told.contains(r"run: ah 'it'\''s late'"), "{told}");
    }
    assert_eq!(mock.requests().len(), 1);
}

#[test]
fn the_refusal_names_the_project_and_the_session_the_message_was_for() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(vec![Turn::reply(Reply::new().text("done"))]);
    let project = host.project.display().to_string();
    // From outside the project, on a named session, beside a newer one.
    let elsewhere = |mock: &MockServer, args: &[&str]| {
        let mut cmd = host.ah(&mock.url());
        cmd.current_dir(host.root.path()).args(["-C", &project]);
        cmd.args(args).output().unwrap()
    };
    let run = ["--backend", "none", "--review", "never"];
    let out = elsewhere(&mock, &[&run[..], &["--name", "my work", "task"]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    // A newer session, which a bare `ah 'MSG'` would continue instead.
    mock.push(Turn::reply(Reply::new().text("done")));
    let out = elsewhere(&mock, &[&run[..], &["-n", "another task"]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    mock.push(Turn::reply(Reply::new().text("ok")));
    let named = host.sessions()[0].clone();
    let id = named.file_stem().unwrap().to_string_lossy().into_owned();
    let cases = [
        (
            vec!["--name", "my work", "--steer=-v it's late"],
            format!(r"run: ah -C {project} --name 'my work' -- '-v it'\''s late'"),
        ),
        (
            vec!["-S", &id[..10], "--followup", "go on"],
            format!("run: ah -C {project} -S {} 'go on'", &id[..10]),
        ),
    ];
    let mut suggestion = String::new();
    for (args, suggested) in cases {
        let out = elsewhere(&mock, &args);
        assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
        let told = String::from_utf8_lossy(&out.stderr);
        assert!(
            told.contains(&format!("no ah is working on session {id}")),
            "{told}"
        );
        assert!(told.contains(&suggested), "{suggested} in {told}");
        if suggestion.is_empty() {
            suggestion = told.split("run: ").nth(1).unwrap().trim_end().to_string();
        }
    }
    // The suggested command, run by a shell, continues that very session.
    let line = suggestion.replacen(
        "ah ",
        &format!(
            "{} --backend none --review never ",
            env!("CARGO_BIN_EXE_ah")
        ),
        1,
    );
    let out = Command::new("sh")
        .arg("-c")
        .arg(&line)
        .current_dir(host.root.path())
        .envs(
            host.ah(&mock.url())
                .get_envs()
                .filter_map(|(key, value)| Some((key.to_owned(), value?.to_owned()))),
        )
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(host.sessions().len(), 2, "no new session");
    let sent = mock.requests().last().unwrap().body["messages"].to_string();
    assert!(
        sent.contains("-v it's late") && sent.contains("task"),
        "{sent}"
    );
}

#[test]
fn an_aborted_owner_releases_the_lock_and_tells_the_waiter_its_prompt_was_not_run() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let (busy, mock) = Busy::start(&host, vec![]);
    let owner = busy.child.id();
    let waiter = second(&host, &mock, &["--backend", "none", "--wait", "check it"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let queue = host.sessions()[0].with_extension("queue.db");
    wait_until("the prompt to be queued", Duration::from_secs(30), || {
        queue.exists() && !query(&queue, "SELECT id FROM queue").is_empty()
    });
    crate::support::send_signal(owner, rustix::process::Signal::INT);
    let out = busy.child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("queued follow-up #1 was not delivered: check it"),
        "{}",
        describe(&out)
    );
    assert_eq!(query(&queue, "SELECT count(*) FROM lock")[0][0], json!(0));

    let waited = waiter.wait_with_output().unwrap();
    assert_eq!(waited.status.code(), Some(1), "{}", describe(&waited));
    let told = String::from_utf8_lossy(&waited.stderr);
    assert!(
        told.contains(&format!(
            "was not run: ah process {owner} stopped (aborted) before delivering it"
        )),
        "{told}"
    );
    std::fs::write(&busy.go, "").unwrap();
}
