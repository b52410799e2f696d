//! The keys of a live run in a real terminal (tmux): `i` sends a steering
//! message that the model's next request carries, `Esc` finishes the run
//! after the running step and goes to review, `Ctrl+C` aborts with the
//! session left consistent. After each, the terminal's settings are what
//! they were before ah started.
//!
//! The model's tool call waits for a file the test creates, or the model
//! stalls mid-answer, so each key is pressed while the run is certainly
//! live, without sleeping blindly.

use std::time::Duration;

use crate::support::host::{Host, json_file, query};
use crate::support::mock::{MockServer, Reply, Turn};
use crate::support::tmux::{AhScript, Tmux, ah_script};
use serde_json::{Value, json};

/// A bash call that changes a.txt, marks that it started (outside the
/// work copy), then waits for `go` beside the mark.
fn waiting_call(id: &str, host: &Host) -> Reply {
    let root = host.root.path();
    Reply::new().tool_use(
        id,
        "bash",
        json!({"command": format!(
            "echo two > a.txt; echo waiting; touch '{started}'; while [ ! -e '{go}' ]; do sleep 0.05; done; echo went",
            started = root.join("started").display(),
            go = root.join("go").display(),
        )}),
    )
}

/// Starts ah in tmux and waits until the waiting call runs.
fn live(host: &Host, mock: &MockServer) -> Option<(Tmux, AhScript)> {
    let script = ah_script(host, &mock.url(), "'change a'");
    let tmux = Tmux::start(&script.path)?;
    tmux.wait_for("keys: i = message the model");
    let started = host.root.path().join("started");
    crate::support::host::wait_until("the call to start", Duration::from_secs(30), || {
        started.exists()
    });
    Some((tmux, script))
}

fn go(host: &Host) -> std::path::PathBuf {
    host.root.path().join("go")
}

fn assert_terminal_restored(script: &AhScript) {
    let (before, after) = script.stty();
    assert!(
        before.contains("icanon") && before.contains("echo"),
        "{before}"
    );
    assert_eq!(before, after, "the terminal is as it was before ah");
}

/// The text blocks of a request's last user message.
fn last_user_texts(body: &Value) -> Vec<String> {
    let messages = body["messages"].as_array().unwrap();
    let last = messages.last().unwrap();
    assert_eq!(last["role"], json!("user"));
    last["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|block| block["type"] == json!("text"))
        .map(|block| block["text"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn i_sends_a_steering_message_that_the_next_request_carries() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let go = go(&host);
    let mock = MockServer::start(vec![
        Turn::reply(waiting_call("toolu_1", &host)),
        Turn::reply(Reply::new().text("done as told")),
    ]);
    let Some((tmux, script)) = live(&host, &mock) else {
        return;
    };
    tmux.keys(&["i"]);
    tmux.wait_for("You:");
    tmux.keys(&["-l", "use tabs please"]);
    tmux.keys(&["Enter"]);
    tmux.wait_for("steering #1 queued");
    std::fs::write(&go, "").unwrap();
    tmux.wait_for("What should happen to this patch?");
    let screen = tmux.wait_for("steering #1 delivered");
    assert!(screen.contains("use tabs please"), "{screen}");
    // The last lines of the command's output are shown under its line.
    assert!(screen.contains("    went"), "{screen}");
    tmux.keys(&["Down", "Down", "Down", "Enter"]);
    assert_eq!(script.exit_code(), 3, "saved only: {}", tmux.screen());

    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        last_user_texts(&requests[1].body),
        vec!["use tabs please".to_string()]
    );
    // Stored like any steering message: delivered from the session queue.
    let db = &host.sessions()[0];
    let queued = query(
        &db.with_extension("queue.db"),
        "SELECT kind, text, status FROM queue",
    );
    assert_eq!(
        queued,
        vec![vec![
            json!("steer"),
            json!("use tabs please"),
            json!("answered")
        ]]
    );
    let screen = tmux.screen();
    assert!(
        screen.contains("1 step · 0 violations · 1 file +1 −1 · review: saved"),
        "summary line:\n{screen}"
    );
    assert_terminal_restored(&script);
}

#[test]
fn i_while_the_model_streams_skips_its_tool_call_and_steers() {
    let host = Host::git(&[("a.txt", "one\n")]);
    // A slow model: its text, then silence, then a tool call.
    let reply = Reply::new().text("let me look").tool_use(
        "toolu_1",
        "write",
        json!({"path": "b.txt", "content": "unwanted\n"}),
    );
    let mock = MockServer::start(vec![
        Turn::stall(reply, 5, Duration::from_secs(2)).piece_size(100),
        Turn::reply(Reply::new().text("left b alone")),
    ]);
    let script = ah_script(&host, &mock.url(), "'change a'");
    let Some(tmux) = Tmux::start(&script.path) else {
        return;
    };
    tmux.wait_for("let me look");
    tmux.keys(&["i"]);
    tmux.wait_for("You:");
    tmux.keys(&["-l", "do not touch b"]);
    tmux.keys(&["Enter"]);
    tmux.wait_for("left b alone");
    assert_eq!(script.exit_code(), 0, "{}", tmux.screen());

    // The steering was queued before the answer went on: the call the
    // model asked for next was skipped, and the text followed its result.
    assert!(!host.project.join("b.txt").exists());
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].told(), "skipped: a steering message arrived");
    assert_eq!(
        last_user_texts(&requests[1].body),
        vec!["do not touch b".to_string()]
    );
    assert_terminal_restored(&script);
}

#[test]
fn esc_finishes_after_the_running_step_and_goes_to_review() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let go = go(&host);
    let mock = MockServer::start(vec![Turn::reply(waiting_call("toolu_1", &host).tool_use(
        "toolu_2",
        "write",
        json!({"path": "b.txt", "content": "never\n"}),
    ))]);
    let Some((tmux, script)) = live(&host, &mock) else {
        return;
    };
    tmux.keys(&["Escape"]);
    tmux.wait_for("finishing:");
    std::fs::write(&go, "").unwrap();
    let screen = tmux.wait_for("What should happen to this patch?");
    assert!(screen.contains("a.txt | 2 +-"), "diffstat:\n{screen}");
    assert!(!screen.contains("aborted"), "{screen}");
    tmux.keys(&["Enter"]);
    assert_eq!(script.exit_code(), 0, "{}", tmux.screen());

    // The running step finished and was applied; the next call never ran.
    assert_eq!(host.read("a.txt"), "two\n");
    assert!(!host.project.join("b.txt").exists());
    assert_eq!(mock.requests().len(), 1);
    let run = host.run();
    assert!(run.join("session.patch").is_file());
    let manifest = json_file(&run.join("manifest.json"));
    assert_eq!(manifest["review"]["decision"], json!("applied"));
    let db = &host.sessions()[0];
    let results = query(
        db,
        "SELECT tool_id, content FROM content_blocks WHERE block_type = 'tool_result' ORDER BY tool_id",
    );
    assert_eq!(results.len(), 2);
    assert!(
        results[1][1]
            .as_str()
            .unwrap()
            .starts_with("not run: the user ended the run"),
        "{results:?}"
    );
    let ends = query(
        db,
        "SELECT details FROM events WHERE event_type = 'agent_end'",
    );
    assert!(
        ends[0][0].as_str().unwrap().contains("finalized"),
        "{ends:?}"
    );
    assert_terminal_restored(&script);
}

#[test]
fn esc_while_the_model_streams_cuts_the_answer_and_goes_to_review() {
    let host = Host::git(&[("a.txt", "one\n")]);
    // The model stalls far longer than ah may take to finish.
    let reply = Reply::new().text("let me think").tool_use(
        "toolu_1",
        "write",
        json!({"path": "b.txt", "content": "b\n"}),
    );
    let mock = MockServer::start(vec![
        Turn::stall(reply, 5, Duration::from_secs(120)).piece_size(100),
    ]);
    let script = ah_script(&host, &mock.url(), "'change a'");
    let Some(tmux) = Tmux::start(&script.path) else {
        return;
    };
    tmux.wait_for("let me think");
    tmux.keys(&["Escape"]);
    assert_eq!(script.exit_code(), 0, "{}", tmux.screen());
    let screen = tmux.screen();
    assert!(screen.contains("no changes to review"), "{screen}");
    assert!(screen.contains("review: empty"), "{screen}");
    assert!(!host.project.join("b.txt").exists());
    // What streamed is kept in the session.
    let db = &host.sessions()[0];
    let kept = query(
        db,
        "SELECT b.content FROM content_blocks b JOIN messages m ON m.id = b.message_id \
         WHERE m.role = 'assistant' AND b.block_type = 'text'",
    );
    assert_eq!(kept, vec![vec![json!("let me think")]]);
    assert_terminal_restored(&script);
}

#[test]
fn ctrl_c_aborts_and_leaves_the_session_consistent() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(vec![Turn::reply(waiting_call("toolu_1", &host))]);
    let Some((tmux, script)) = live(&host, &mock) else {
        return;
    };
    tmux.keys(&["C-c"]);
    assert_eq!(script.exit_code(), 130, "{}", tmux.screen());
    let screen = tmux.screen();
    assert!(screen.contains("aborting:"), "{screen}");
    assert!(screen.contains("review: aborted"), "{screen}");
    assert_eq!(host.read("a.txt"), "one\n");
    let manifest = json_file(&host.run().join("manifest.json"));
    assert_eq!(manifest["review"]["decision"], json!("aborted"));

    let db = &host.sessions()[0];
    assert_eq!(query(db, "PRAGMA integrity_check")[0][0], json!("ok"));
    let results = query(
        db,
        "SELECT content FROM content_blocks WHERE block_type = 'tool_result'",
    );
    assert_eq!(results.len(), 1);
    assert!(results[0][0].as_str().unwrap().starts_with("interrupted"));
    let lock = query(&db.with_extension("queue.db"), "SELECT count(*) FROM lock");
    assert_eq!(lock[0][0], json!(0));
    assert_terminal_restored(&script);
}

#[test]
fn ctrl_c_at_the_you_line_sends_nothing_and_aborts() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(vec![Turn::reply(waiting_call("toolu_1", &host))]);
    let Some((tmux, script)) = live(&host, &mock) else {
        return;
    };
    tmux.keys(&["i"]);
    tmux.wait_for("You:");
    tmux.keys(&["-l", "half a thou"]);
    // At the You: line the terminal is in its own mode: Ctrl+C is SIGINT.
    tmux.keys(&["C-c"]);
    assert_eq!(script.exit_code(), 130, "{}", tmux.screen());
    let screen = tmux.screen();
    assert!(screen.contains("(nothing sent)"), "{screen}");
    let db = &host.sessions()[0];
    let queued = query(&db.with_extension("queue.db"), "SELECT count(*) FROM queue");
    assert_eq!(queued[0][0], json!(0));
    assert_eq!(mock.requests().len(), 1);
    assert_terminal_restored(&script);
}

#[test]
fn sigterm_in_raw_mode_aborts_and_restores_the_terminal() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(vec![Turn::reply(waiting_call("toolu_1", &host))]);
    let Some((tmux, script)) = live(&host, &mock) else {
        return;
    };
    crate::support::send_signal(host.ah_pid(), rustix::process::Signal::TERM);
    assert_eq!(script.exit_code(), 130, "{}", tmux.screen());
    assert!(tmux.screen().contains("review: aborted"));
    assert_terminal_restored(&script);
}

#[test]
fn a_second_signal_exits_at_once_with_the_terminal_restored() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(vec![Turn::reply(waiting_call("toolu_1", &host))]);
    let Some((tmux, script)) = live(&host, &mock) else {
        return;
    };
    let pid = host.ah_pid();
    crate::support::send_signal(pid, rustix::process::Signal::TERM);
    tmux.wait_for("aborting:");
    // Whether the abort is still under way or not, ah exits at once now
    // (if it has not exited already), and the terminal is back either way.
    crate::support::send_signal(pid, rustix::process::Signal::TERM);
    assert_eq!(script.exit_code(), 130, "{}", tmux.screen());
    assert_terminal_restored(&script);
}
