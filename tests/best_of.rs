//! Best of N through the real binary (`ah -N 3 --check CMD`), with the mock
//! model: each attempt is a run of its own, judged by its check in its own
//! sandbox; the passing attempt with the smallest patch is reviewed; none
//! passing applies nothing; `--first` stops the others. `-j 1` makes the
//! attempts take turns, so that each gets its own turns of the mock.

use crate::support::host::{Host, json_file};
use crate::support::mock::{MockServer, Reply, Turn};
use crate::support::podman::{no_container_left, podman_ready_blocking};
use crate::support::tmux::{Tmux, ah_script_on};
use serde_json::json;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// One attempt's work: write `content` to a.txt, then say it is done.
fn writes(n: usize, content: &str) -> [Turn; 2] {
    crate::support::steps::write_then_say(
        n,
        "a.txt",
        &format!("{content}\n"),
        &format!("attempt {n} done"),
    )
}

fn mock_of(contents: &[&str]) -> MockServer {
    MockServer::start(
        contents
            .iter()
            .enumerate()
            .flat_map(|(i, content)| writes(i + 1, content))
            .collect(),
    )
}

/// Passes unless a.txt says "bad".
const CHECK: &str = "! grep -q bad a.txt";

/// The run folder whose patch adds `line`.
fn run_adding(host: &Host, line: &str) -> PathBuf {
    host.runs()
        .into_iter()
        .find(|run| {
            std::fs::read_to_string(run.join("session.patch"))
                .is_ok_and(|patch| patch.lines().any(|l| l == format!("+{line}")))
        })
        .unwrap_or_else(|| panic!("no run adds {line:?}"))
}

fn the_smallest_passing_attempt_wins(backend: &str) -> Host {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = mock_of(&["bad", "good\nand a second line", "ok"]);
    let out = host
        .ah(&mock.url())
        .args([
            "--backend",
            backend,
            "--review",
            "auto",
            "-N",
            "3",
            "-j",
            "1",
        ])
        .args(["--check", CHECK, "change a"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(host.read("a.txt"), "ok\n", "{stderr}");
    assert!(stderr.contains("#   run"), "the table:\n{stderr}");
    assert!(stderr.contains("winner: attempt 3"), "{stderr}");
    // Piped, each attempt's milestones are lines naming it; no attempt's
    // text streams (three would interleave).
    for line in [
        "attempt 1/3: run ",
        &format!("attempt 1/3: check `{CHECK}` failed (exit 1)"),
        &format!("attempt 3/3: check `{CHECK}` passed"),
        "attempt 2/3: finished: ",
    ] {
        assert!(stderr.contains(line), "{line:?} in\n{stderr}");
    }
    assert!(!String::from_utf8_lossy(&out.stdout).contains("attempt 1 done"));
    assert_eq!(host.runs().len(), 3);
    let bad = json_file(&run_adding(&host, "bad").join("manifest.json"));
    assert_eq!(bad["check"]["passed"], json!(false));
    assert_eq!(bad["check"]["exit_code"], json!(1));
    assert_eq!(bad["applied"], json!(false));
    let long = json_file(&run_adding(&host, "and a second line").join("manifest.json"));
    assert_eq!(long["check"]["passed"], json!(true));
    assert_eq!(long["applied"], json!(false));
    let ok = run_adding(&host, "ok");
    let won = json_file(&ok.join("manifest.json"));
    assert_eq!(won["applied"], json!(true));
    assert_eq!(won["review"]["mode"], json!("auto"));
    let log = std::fs::read_to_string(ok.join("check.log")).unwrap();
    assert!(log.starts_with(&format!("$ {CHECK}")), "{log}");
    host
}

/// Sends SIGCHLD to the main thread of process `pid`, the one that waits
/// for the review's keys (a signal to the process may go to any thread):
/// what the end of one of its children does.
fn child_ended_wakes(pid: u32) {
    // tgkill(pid, pid, SIGCHLD): std and rustix send signals to processes only.
    let sent = std::process::Command::new("python3")
        .arg("-c")
        .arg(format!(
            "import ctypes, signal; assert ctypes.CDLL(None).syscall(234, {pid}, {pid}, signal.SIGCHLD) == 0"
        ))
        .status()
        .unwrap();
    assert!(
        sent.success(),
        "ah ended at a signal that only woke its question"
    );
    std::thread::sleep(Duration::from_millis(200));
}

/// The run ids of `host`.
fn ids(host: &Host) -> Vec<String> {
    host.runs()
        .iter()
        .map(|run| run.file_name().unwrap().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn the_smallest_passing_attempt_wins_without_a_sandbox() {
    the_smallest_passing_attempt_wins("none");
}

#[test]
fn the_smallest_passing_attempt_wins_on_podman() {
    let Some(podman) = podman_ready_blocking() else {
        return;
    };
    let host = the_smallest_passing_attempt_wins("podman");
    for id in ids(&host) {
        no_container_left(&podman, &id);
    }
}

#[test]
fn when_no_attempt_passes_nothing_is_applied_and_any_attempt_can_be_applied_later() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = mock_of(&["bad", "bad too"]);
    let out = host
        .ah(&mock.url())
        .args([
            "--backend",
            "none",
            "--review",
            "auto",
            "-N",
            "2",
            "-j",
            "1",
        ])
        .args(["--check", CHECK, "change a"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{stderr}");
    assert!(stderr.contains("no attempt passed"), "{stderr}");
    assert_eq!(host.read("a.txt"), "one\n");
    let second = run_adding(&host, "bad too");
    assert!(second.join("session.patch").is_file());
    let id = second.file_name().unwrap().to_str().unwrap().to_string();
    let applied = host.ah(&mock.url()).args(["apply", &id]).output().unwrap();
    assert!(applied.status.success(), "{applied:?}");
    assert_eq!(host.read("a.txt"), "bad too\n");
}

#[test]
fn first_stops_the_other_attempts_once_one_passes() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = mock_of(&["good"]);
    let out = host
        .ah(&mock.url())
        .args([
            "--backend",
            "none",
            "--review",
            "auto",
            "-N",
            "3",
            "-j",
            "1",
        ])
        .args(["--first", "--check", CHECK, "change a"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(host.read("a.txt"), "good\n");
    assert_eq!(mock.requests().len(), 2, "the others never asked the model");
    assert!(stderr.contains("winner: attempt 1"), "{stderr}");
}

#[test]
fn at_a_terminal_another_attempt_can_be_chosen_instead_of_the_winner() {
    let Some(podman) = podman_ready_blocking() else {
        return;
    };
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = mock_of(&["ok", "longer\nanswer"]);
    let args = format!("-N 2 -j 1 --check '{CHECK}' 'change a'");
    let script = ah_script_on(&host, &mock.url(), "podman", &args);
    let Some(tmux) = Tmux::start(&script.path) else {
        return;
    };
    let screen = tmux.wait_for("What should happen to this patch?");
    assert!(screen.contains("+ok"), "the winner first:\n{screen}");
    // One status line per attempt, left as each ended; no attempt's text.
    let history = tmux.history();
    for attempt in ["attempt 1/2", "attempt 2/2"] {
        let line = history
            .lines()
            .find(|line| line.starts_with(attempt) && line.contains("finished: "))
            .unwrap_or_else(|| panic!("no status line of {attempt} in\n{history}"));
        assert!(line.contains("1 tool call, 1 file"), "{line}");
    }
    assert!(!history.contains("attempt 1 done"), "{history}");
    // A child of ah that ends while the question waits (the attempts'
    // sandboxes were handed off) wakes the wait for a key; it is no key.
    child_ended_wakes(host.ah_pid());
    // apply all, choose files, choose hunks, save only, discard, then attempt 2.
    tmux.keys(&["Down", "Down", "Down", "Down", "Down", "Enter"]);
    tmux.wait_for_after("show attempt 2", "+longer");
    tmux.wait_for_after("+longer", "What should happen to this patch?");
    tmux.keys(&["Enter"]);
    assert_eq!(script.exit_code(), 0, "{}", tmux.history());
    assert_eq!(host.read("a.txt"), "longer\nanswer\n");
    for id in ids(&host) {
        no_container_left(&podman, &id);
    }
}

#[test]
fn a_signal_stops_every_attempt_with_its_patch_saved_and_no_container_left() {
    let Some(podman) = podman_ready_blocking() else {
        return;
    };
    let host = Host::git(&[("a.txt", "one\n")]);
    // Each attempt writes its file, then waits in a long command.
    let long = |n: usize| {
        Turn::reply(Reply::new().tool_use(
            format!("toolu_long_{n}"),
            "bash",
            json!({"command": "echo started > started-$RANDOM; sleep 300"}),
        ))
    };
    let [w1, _] = writes(1, "first");
    let [w2, _] = writes(2, "second");
    let mock = MockServer::start(vec![w1, w2, long(1), long(2)]);
    let mut child = host
        .ah(&mock.url())
        .args([
            "--backend",
            "podman",
            "--review",
            "never",
            "-N",
            "2",
            "-j",
            "2",
        ])
        .args(["--check", CHECK, "change a"])
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while mock.requests().len() < 4 {
        assert!(Instant::now() < deadline, "the attempts never both waited");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Both long commands have started once their answers were served.
    std::thread::sleep(Duration::from_secs(2));
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "ah did not stop after Ctrl+C");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(130));
    assert_eq!(host.read("a.txt"), "one\n");
    let runs = host.runs();
    assert_eq!(runs.len(), 2);
    for run in &runs {
        let patch = std::fs::read_to_string(run.join("session.patch")).unwrap();
        assert!(patch.contains("+++ b/a.txt"), "each patch so far is saved");
        let manifest = json_file(&run.join("manifest.json"));
        assert_eq!(manifest["review"]["decision"], json!("aborted"));
    }
    for id in ids(&host) {
        no_container_left(&podman, &id);
    }
}
