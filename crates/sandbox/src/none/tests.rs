//! Tests of the unsandboxed backend: commands run in the work copy, time out,
//! and leave nothing running.

use std::time::{Duration, Instant};

use super::*;

const LONG: Duration = Duration::from_secs(30);

fn backend() -> (tempfile::TempDir, NoneBackend) {
    let dir = tempfile::tempdir().unwrap();
    let backend = NoneBackend::new(dir.path());
    (dir, backend)
}

/// Whether `pid` still names a live process (a zombie waiting for its new
/// parent to reap it counts as dead).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z') && !state.starts_with('X')
        }
        Err(_) => false,
    }
}

/// Waits a little for `pid` to be gone: signals are delivered asynchronously.
fn gone_soon(pid: u32) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(3) {
        if !alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn first_line_pid(bytes: &[u8]) -> u32 {
    let text = String::from_utf8_lossy(bytes);
    text.lines().next().unwrap().trim().parse().unwrap()
}

#[tokio::test]
async fn reports_exit_codes_and_keeps_stderr_separate() {
    let (_dir, backend) = backend();
    let ok = backend.exec("echo out; echo err >&2", LONG).await.unwrap();
    assert_eq!(ok.stdout, b"out\n");
    assert_eq!(ok.stderr, b"err\n");
    assert_eq!(ok.exit_code, Some(0));
    assert!(!ok.timed_out);
    assert_eq!(ok.dropped_bytes, 0);

    let failed = backend.exec("exit 3", LONG).await.unwrap();
    assert_eq!(failed.exit_code, Some(3));

    let signalled = backend.exec("kill -9 $$", LONG).await.unwrap();
    assert_eq!(signalled.exit_code, None);
    assert!(!signalled.timed_out);
}

#[tokio::test]
async fn runs_in_the_work_dir_with_stdin_closed() {
    let (dir, backend) = backend();
    std::fs::write(dir.path().join("marker"), "here").unwrap();
    let out = backend.exec("cat marker; pwd; cat", LONG).await.unwrap();
    let expected = format!("here{}\n", dir.path().canonicalize().unwrap().display());
    assert_eq!(String::from_utf8(out.stdout).unwrap(), expected);
    assert_eq!(out.exit_code, Some(0));
}

#[tokio::test]
async fn timeout_kills_the_command_and_its_children() {
    let (_dir, backend) = backend();
    let start = Instant::now();
    let out = backend
        .exec(
            "echo partial >&2; sleep 100 & echo $!; wait",
            Duration::from_millis(500),
        )
        .await
        .unwrap();
    assert!(out.timed_out);
    assert_eq!(out.exit_code, None);
    assert_eq!(out.stderr, b"partial\n");
    assert!(start.elapsed() < Duration::from_secs(10));
    let child = first_line_pid(&out.stdout);
    assert!(gone_soon(child), "sleep {child} survived the timeout");
}

#[tokio::test]
async fn a_command_ignoring_sigterm_is_killed_after_the_grace_period() {
    let (_dir, backend) = backend();
    let start = Instant::now();
    let out = backend
        .exec(
            "trap '' TERM; sleep 100 & echo $!; wait",
            Duration::from_millis(300),
        )
        .await
        .unwrap();
    let elapsed = start.elapsed();
    assert!(out.timed_out);
    assert!(elapsed >= KILL_GRACE, "killed after {elapsed:?}");
    assert!(elapsed < KILL_GRACE + Duration::from_secs(8));
    let child = first_line_pid(&out.stdout);
    assert!(gone_soon(child), "sleep {child} survived SIGKILL");
}

#[tokio::test]
async fn background_jobs_do_not_outlive_the_step() {
    let (_dir, backend) = backend();
    let start = Instant::now();
    let out = backend.exec("sleep 100 & echo $!", LONG).await.unwrap();
    assert_eq!(out.exit_code, Some(0));
    assert!(!out.timed_out);
    assert!(start.elapsed() < Duration::from_secs(10));
    let child = first_line_pid(&out.stdout);
    assert!(gone_soon(child), "background sleep {child} kept running");
}

#[tokio::test]
async fn dropping_the_future_kills_the_group() {
    let (dir, backend) = backend();
    let pid_file = dir.path().join("pid");
    let cancelled = tokio::time::timeout(
        Duration::from_millis(800),
        backend.exec("sleep 100 & echo $! > pid; wait", LONG),
    )
    .await;
    assert!(
        cancelled.is_err(),
        "the command should still have been running"
    );
    let child: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        gone_soon(child),
        "sleep {child} survived the cancelled step"
    );
}

#[tokio::test]
async fn huge_output_stays_within_the_cap_on_both_streams() {
    let (_dir, backend) = backend();
    let out = backend
        .exec(
            "yes | head -c 50000000; yes e | head -c 30000000 >&2; echo end",
            LONG,
        )
        .await
        .unwrap();
    assert_eq!(out.exit_code, Some(0));
    let kept = (HEAD_BYTES + TAIL_BYTES) as u64;
    assert!(out.stdout.len() as u64 <= kept + 100);
    assert!(out.stderr.len() as u64 <= kept + 100);
    assert_eq!(out.dropped_bytes, (50_000_004 - kept) + (30_000_000 - kept));
    assert!(out.stdout.starts_with(b"y\ny\n"));
    assert!(out.stdout.ends_with(b"y\nend\n"));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&format!(
        "[ah: {} bytes of output dropped here]",
        50_000_004 - kept
    )));
}

#[tokio::test]
async fn shutdown_is_a_no_op() {
    let (_dir, backend) = backend();
    backend.shutdown().await.unwrap();
    backend.shutdown().await.unwrap();
    assert_eq!(backend.kind(), BackendKind::None);
    assert_eq!(backend.exec("true", LONG).await.unwrap().exit_code, Some(0));
}

const SECRETS: [(&str, &str); 5] = [
    ("ANTHROPIC_API_KEY", "sk-ant-test-secret"),
    ("ANTHROPIC_AUTH_TOKEN", "auth-secret"),
    ("GITHUB_TOKEN", "ghp-secret"),
    ("AWS_SECRET", "aws-secret"),
    ("DB_PASSWORD", "db-secret"),
];

/// Runs [`env_probe`] in a child test process whose environment holds secrets,
/// so this process never has to change its own environment.
#[test]
fn commands_never_see_secrets_of_the_parent_environment() {
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args([
            "--exact",
            "none::tests::env_probe",
            "--ignored",
            "--test-threads=1",
        ])
        .envs(SECRETS)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "env probe failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
#[ignore = "run by commands_never_see_secrets_of_the_parent_environment with secrets set"]
async fn env_probe() {
    for (name, value) in SECRETS {
        assert_eq!(std::env::var(name).as_deref(), Ok(value), "{name} not set");
    }
    let (dir, backend) = backend();
    let out = backend.exec("env", LONG).await.unwrap();
    let env = String::from_utf8(out.stdout).unwrap();
    for (name, value) in SECRETS {
        assert!(!env.contains(name), "{name} leaked:\n{env}");
        assert!(!env.contains(value), "value of {name} leaked:\n{env}");
    }
    let home = format!("HOME={}", dir.path().display());
    for expected in [home.as_str(), "LANG=C.UTF-8", "TERM=dumb", "PATH="] {
        assert!(
            env.lines().any(|l| l.starts_with(expected)),
            "no {expected}:\n{env}"
        );
    }
}
