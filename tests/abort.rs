//! SIGINT or SIGTERM in the middle of a tool call: the command's process
//! group dies, every tool call gets a result, the patch so far is saved (not
//! applied), and ah exits with 130.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::support::host::{Host, json_file, query};
use crate::support::mock::{MockServer, Reply, Turn};
use serde_json::json;

/// Polls until `path` exists in some run's work copy or overlay upper folder
/// (the tool started).
fn wait_for_marker(host: &Host, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if host.runs().iter().any(|run| {
            ["work", "upper"]
                .iter()
                .any(|w| run.join(w).join(name).exists())
        }) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("the tool never started (no {name} in the work dir)");
}

fn wait_exit(child: &mut Child, within: Duration) -> i32 {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code().unwrap_or(-1);
        }
        assert!(
            Instant::now() < deadline,
            "ah did not exit after the signal"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Processes whose command line is exactly `cmdline` (arguments joined by
/// spaces).
fn processes_running(cmdline: &str) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            std::fs::read(e.path().join("cmdline")).is_ok_and(|c| {
                String::from_utf8_lossy(&c)
                    .trim_end_matches('\0')
                    .replace('\0', " ")
                    == cmdline
            })
        })
        .count()
}

fn abort_mid_tool(signal: rustix::process::Signal) {
    // A sleep of its own per test process: tests (and other checkouts'
    // tests) may run at the same time on this machine.
    let sleep = format!("sleep 9{:07}{:02}", std::process::id(), signal.as_raw());
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(vec![
        Turn::reply(Reply::new().tool_use(
            "toolu_1",
            "write",
            json!({"path": "a.txt", "content": "two\n"}),
        )),
        Turn::reply(
            Reply::new()
                .text("now a long one")
                .tool_use(
                    "toolu_2",
                    "bash",
                    json!({"command": format!("touch started && {sleep}")}),
                )
                .tool_use("toolu_3", "read", json!({"path": "a.txt"})),
        ),
    ]);
    let mut child = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "auto", "long task"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_marker(&host, "started");
    // `touch` ran; the sleep starts a moment later.
    let deadline = Instant::now() + Duration::from_secs(10);
    while processes_running(&sleep) == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(processes_running(&sleep), 1);
    crate::support::send_signal(child.id(), signal);
    assert_eq!(wait_exit(&mut child, Duration::from_secs(20)), 130);
    assert_eq!(
        processes_running(&sleep),
        0,
        "the tool's process group is gone"
    );

    // Not applied, but saved: the patch holds the finished step.
    assert_eq!(host.read("a.txt"), "one\n");
    let run = host.run();
    let patch = std::fs::read_to_string(run.join("session.patch")).unwrap();
    assert!(patch.contains("+two"), "{patch}");
    let manifest = json_file(&run.join("manifest.json"));
    assert_eq!(manifest["review"]["decision"], json!("aborted"));
    assert_eq!(manifest["applied"], json!(false));

    // Every tool_use has a result; the interrupted ones say so.
    let db = &host.sessions()[0];
    paired(db);
    let results = query(
        db,
        "SELECT tool_id, content, is_error FROM content_blocks WHERE block_type = 'tool_result' ORDER BY tool_id",
    );
    assert_eq!(results.len(), 3);
    assert!(
        results[1][1].as_str().unwrap().starts_with("interrupted"),
        "{:?}",
        results[1]
    );
    assert_eq!(results[1][2], json!(1));
}

fn paired(db: &Path) {
    let unpaired = query(
        db,
        "SELECT u.tool_id FROM content_blocks u WHERE u.block_type = 'tool_use' \
         AND NOT EXISTS (SELECT 1 FROM content_blocks r WHERE r.block_type = 'tool_result' AND r.tool_id = u.tool_id)",
    );
    assert!(
        unpaired.is_empty(),
        "tool_use without a result: {unpaired:?}"
    );
}

#[test]
fn sigint_mid_tool_kills_the_command_and_keeps_the_session_consistent() {
    abort_mid_tool(rustix::process::Signal::INT);
}

#[test]
fn sigterm_mid_tool_does_the_same() {
    abort_mid_tool(rustix::process::Signal::TERM);
}

#[test]
fn a_second_signal_exits_at_once_and_the_session_stays_usable() {
    let Some(podman) = crate::support::podman::podman_ready_blocking() else {
        return;
    };
    let sleep = format!("sleep 8{:07}", std::process::id());
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(vec![
        Turn::reply(Reply::new().tool_use(
            "toolu_1",
            "bash",
            json!({"command": format!("touch started && {sleep}")}),
        )),
        Turn::reply(Reply::new().text("continued fine")),
    ]);
    let mut child = host
        .ah(&mock.url())
        .args(["--review", "never", "long task"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_marker(&host, "started");
    let pid = child.id();
    crate::support::send_signal(pid, rustix::process::Signal::INT);
    std::thread::sleep(Duration::from_millis(30));
    crate::support::send_signal(pid, rustix::process::Signal::INT);
    assert_eq!(wait_exit(&mut child, Duration::from_secs(20)), 130);

    let db = &host.sessions()[0];
    let check = query(db, "PRAGMA integrity_check");
    assert_eq!(check[0][0], json!("ok"));
    // Exiting at once still let go of the session's lock.
    let lock = query(&db.with_extension("queue.db"), "SELECT count(*) FROM lock");
    assert_eq!(lock[0][0], json!(0));

    // The next run continues the session (a missing result is answered)
    // and removes anything the hurried exit left behind.
    let out = host
        .ah(&mock.url())
        .args(["--review", "never", "go on"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        crate::support::host::describe(&out)
    );
    paired(db);
    let first_run = host.runs()[0]
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    assert_eq!(
        crate::support::podman::containers_of(&podman, &first_run),
        ""
    );
}
