//! The subcommands and flags around a run: `ah runs`, `ah doctor`, `--db`,
//! and the sandbox flags' validation.

use crate::support::host::{Host, describe, query};
use crate::support::mock::{MockServer, Reply, Turn};
use crate::support::podman::podman_ready_blocking;
use serde_json::json;

fn write_run(host: &Host, mock: &MockServer, task: &str) -> std::process::Output {
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "never", task])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    out
}

#[test]
fn runs_lists_each_run_newest_first_with_its_patch_and_decision() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(vec![
        Turn::reply(Reply::new().tool_use(
            "t1",
            "write",
            json!({"path": "a.txt", "content": "1\n2\n"}),
        )),
        Turn::reply(Reply::new().text("ok")),
        Turn::reply(Reply::new().text("nothing to do")),
    ]);
    write_run(&host, &mock, "first task");
    write_run(&host, &mock, "second task");
    let out = host.ah(&mock.url()).arg("runs").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    // The first run was saved, not applied: the second goes on from its
    // files on the same baseline, so its patch holds the first run's work.
    assert!(
        lines[0].contains("second task") && lines[0].contains("1 files"),
        "{text}"
    );
    assert!(lines[1].contains("first task"), "{text}");
    assert!(
        lines[1].contains("1 files") && lines[1].contains("+2") && lines[1].contains("-1"),
        "{text}"
    );
    assert!(lines[1].contains("saved"), "{text}");
    let runs = host.runs();
    assert!(lines[1].starts_with(runs[0].file_name().unwrap().to_str().unwrap()));
}

#[test]
fn db_picks_the_session_file() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let db = host.root.path().join("elsewhere.db");
    let mock = MockServer::start(vec![Turn::reply(Reply::new().text("hi"))]);
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "never", "--db"])
        .arg(&db)
        .arg("hello")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(host.sessions().is_empty(), "no session in .ah/");
    let rows = query(&db, "SELECT role FROM messages ORDER BY seq");
    assert_eq!(rows, vec![vec![json!("user")], vec![json!("assistant")]]);
}

#[test]
fn bad_sandbox_flags_are_usage_errors() {
    let host = Host::git(&[("a.txt", "one\n")]);
    for flag in ["nofile", "core=1", "nproc=many"] {
        let out = host
            .ah("http://127.0.0.1:9")
            .args(["--ulimit", flag, "task"])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(2),
            "--ulimit {flag}: {}",
            describe(&out)
        );
    }
}

#[test]
fn doctor_passes_here_and_names_the_fix_for_a_missing_image() {
    if podman_ready_blocking().is_none() {
        return;
    }
    let host = Host::git(&[("a.txt", "one\n")]);
    let out = host
        .ah("http://127.0.0.1:9")
        .arg("doctor")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    for check in ["podman:", "runtime:", "network proxy:", "image:", "git:"] {
        assert!(
            text.lines()
                .any(|l| l.starts_with("ok") && l.contains(check)),
            "{check}\n{text}"
        );
    }

    let out = host
        .ah("http://127.0.0.1:9")
        .args(["doctor", "--image", "localhost/ah-missing-image:never"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with("FAIL") && l.contains("image")),
        "{text}"
    );
    assert!(text.contains("ah image build"), "{text}");
}

/// When process `pid` started, in clock ticks after boot (field 22 of
/// `/proc/<pid>/stat`, counted after the command name).
fn start_time(pid: u32) -> i64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after_name = &stat[stat.rfind(')').unwrap() + 1..];
    after_name
        .split_whitespace()
        .nth(19)
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn a_session_held_by_a_live_ah_that_takes_no_messages_is_refused_and_a_dead_ones_is_taken() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(vec![
        Turn::reply(Reply::new().text("first")),
        Turn::reply(Reply::new().text("second")),
    ]);
    write_run(&host, &mock, "first");
    let db = host.sessions()[0].clone();
    // Another process holds the session's lock, as an ah reviewing its
    // patch or compacting does (it takes no steering or follow-ups).
    let mut other = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    rusqlite::Connection::open(db.with_extension("queue.db"))
        .unwrap()
        .execute(
            "INSERT INTO lock VALUES (1, ?1, ?2, ?3, 0, 'now')",
            (other.id(), start_time(other.id()), now_ms),
        )
        .unwrap();
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "never", "second"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("in use by ah process {}", other.id())),
        "{stderr}"
    );
    assert!(stderr.contains("-n"), "{stderr}");
    assert_eq!(host.runs().len(), 1, "nothing was prepared");
    let out = host.ah(&mock.url()).args(["compact"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains(&format!("in use by ah process {}", other.id())),
        "{}",
        describe(&out)
    );

    other.kill().unwrap();
    other.wait().unwrap();
    let out = write_run(&host, &mock, "second");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&format!(
            "taking over session {} from ah process {}, which is no longer running",
            db.file_stem().unwrap().to_string_lossy(),
            other.id()
        )),
        "{}",
        describe(&out)
    );
    assert_eq!(mock.requests().len(), 2);
}
