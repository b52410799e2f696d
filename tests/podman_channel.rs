//! The command channel of the podman backend against real podman: its
//! agent runs every command, nothing a command starts survives it, and a
//! command or an agent that breaks the channel (kills the agent, sends
//! garbage) or a container killed from outside costs one command a note,
//! never a process left behind or a stuck run. Where the agent cannot run,
//! commands go back to one `podman exec` each, with the same guarantees.
//!
//! Skipped like `podman_backend` when podman is absent.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::podman_backend::{
    ATTACH, Run, all_processes, processes_matching, sh, start_run, start_run_with,
};
use ah_sandbox::podman::find_podman;

/// What the backend adds when the channel broke (or the container had to be
/// restarted for it).
fn says_channel_broke(stderr: &str) -> bool {
    stderr.contains("[ah: the sandbox's command channel broke")
        || stderr.contains("[ah: the sandbox container was restarted")
}

async fn shutdown(run: Run) {
    run.backend
        .shutdown()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test]
async fn the_agent_runs_the_commands_and_is_out_of_their_reach() {
    let Some(run) = start_run().await else {
        return;
    };
    // The command's parent is the agent, run from its execute-only copy.
    let (_, parent, _) = sh(&run, "tr '\\0' ' ' < /proc/$PPID/cmdline").await;
    assert_eq!(parent.trim(), "/run/ah-agent __sandbox-agent");
    let command = format!(
        "cat > /tmp/attach.py <<'EOF'\n{ATTACH}EOF\n\
         python3 /tmp/attach.py $PPID; cat /proc/$PPID/environ; echo forged > /proc/$PPID/fd/1; \
         head -c1 /run/ah-agent; true"
    );
    let (_, out, err) = sh(&run, &command).await;
    let said = format!("{out}{err}");
    assert!(said.contains(": Operation not permitted"), "{said}");
    assert!(said.contains("environ: Permission denied"), "{said}");
    assert!(said.contains("fd/1: Permission denied"), "{said}");
    assert!(
        said.contains("'/run/ah-agent' for reading: Permission denied"),
        "{said}"
    );
    shutdown(run).await;
}

#[tokio::test]
async fn a_command_that_kills_the_agent_leaves_nothing_and_the_next_runs() {
    let Some(run) = start_run().await else {
        return;
    };
    for (i, kill) in ["kill -9 -1", "kill -9 $PPID", "kill -STOP $PPID; sleep 5"]
        .iter()
        .enumerate()
    {
        let started = Instant::now();
        let command = format!("(sleep 1; setsid sleep 105{i} &) & setsid sleep 106{i} & {kill}");
        let out = run
            .backend
            .exec(&command, Duration::from_secs(3))
            .await
            .unwrap_or_else(|e| panic!("exec {command:?}: {e}"));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(says_channel_broke(&stderr), "{command}: {stderr}");
        // A stopped agent is given up on after the timeout, the grace and
        // the bound on its exit: about 14 s.
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{command} took {:?}",
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let left = all_processes(&run);
        assert!(!left.contains("sleep 10"), "{command}: survivors:\n{left}");
        let (code, alive, err) = sh(&run, "echo alive").await;
        assert_eq!((code, alive.as_str()), (0, "alive\n"), "{err}");
        assert!(!says_channel_broke(&err), "{err}");
    }
    shutdown(run).await;
}

#[tokio::test]
async fn a_timed_out_command_that_ignores_term_is_killed_after_the_grace() {
    let Some(run) = start_run().await else {
        return;
    };
    let started = Instant::now();
    let out = run
        .backend
        .exec(
            "trap '' TERM; echo started; setsid sleep 1070 & sleep 1071",
            Duration::from_secs(1),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.timed_out);
    assert_eq!(out.exit_code, None);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "started\n");
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_secs(10),
        "TERM ignored: KILL after the 2 s grace, took {took:?}"
    );
    assert_eq!(processes_matching(&run, "sleep 107[01]"), "");
    assert_eq!(sh(&run, "echo alive").await.1, "alive\n");
    shutdown(run).await;
}

#[tokio::test]
async fn a_dropped_command_ends_before_the_next_one_starts() {
    let Some(run) = start_run().await else {
        return;
    };
    let cancelled = tokio::time::timeout(
        Duration::from_secs(1),
        run.backend.exec(
            "trap '' TERM; sleep 1080 & sleep 1081",
            Duration::from_secs(600),
        ),
    )
    .await;
    assert!(cancelled.is_err(), "the command should still have run");
    // The next command waits for the kill of the dropped one.
    let (_, ps, _) = sh(&run, "ps -eo args=").await;
    assert!(!ps.contains("sleep 108"), "{ps}");
    assert_eq!(processes_matching(&run, "sleep 108[01]"), "");
    shutdown(run).await;
}

#[tokio::test]
async fn a_container_killed_from_outside_comes_back_and_the_model_is_told() {
    let Some(run) = start_run().await else {
        return;
    };
    assert_eq!(
        sh(&run, "echo kept > /work/kept; touch /tmp/lost").await.0,
        0
    );
    let podman = find_podman().unwrap_or_else(|e| panic!("{e}"));
    let killed = Command::new(&podman)
        .args(["kill", run.backend.container()])
        .output()
        .unwrap_or_else(|e| panic!("podman kill: {e}"));
    assert!(killed.status.success(), "{killed:?}");
    let (code, out, err) = sh(&run, "cat /work/kept; ls /tmp").await;
    assert_eq!((code, out.as_str()), (0, "kept\n"), "{err}");
    assert!(err.contains("[ah: the sandbox container"), "{err}");
    let (_, out, err) = sh(&run, "echo alive").await;
    assert_eq!(out, "alive\n");
    assert!(!err.contains("[ah:"), "{err}");
    shutdown(run).await;
}

/// A stand-in for the agent: the host's bash, run as `bash __sandbox-agent`
/// in `/work`, where this script says it is ready (in this ah's protocol
/// version) and then, once a command was sent, what `/work/mode` asks for.
fn fake_agent() -> String {
    let version = ah_sandbox::channel::frame::VERSION;
    format!("printf '\\x10\\x00\\x00\\x00\\x04\\x00\\x00\\x00\\x{version:02x}'\n{FAKE_AGENT_REST}")
}

const FAKE_AGENT_REST: &str = "\
read -r -N 5 _\n\
case $(cat /work/mode) in\n\
huge) printf '\\x11\\xff\\xff\\xff\\xff' ;;\n\
*) printf '\\x7fjunk' ;;\n\
esac\n\
exec sleep 1090\n";

#[tokio::test]
async fn an_agent_that_sends_garbage_is_dropped_and_everything_cleaned_up() {
    let bash = std::fs::canonicalize("/bin/bash").unwrap_or_else(|e| panic!("bash: {e}"));
    let Some(run) = start_run_with(|opts| {
        std::fs::write(opts.work_dir.join("__sandbox-agent"), fake_agent())
            .unwrap_or_else(|e| panic!("{e}"));
        opts.ah_executable = Some(bash);
    })
    .await
    else {
        return;
    };
    assert_eq!(run.backend.notes(), Vec::<String>::new());
    for (mode, said) in [("junk", "unknown type 0x7f"), ("huge", "over the limit")] {
        std::fs::write(run.work.join("mode"), mode).unwrap_or_else(|e| panic!("{e}"));
        let started = Instant::now();
        let out = run
            .backend
            .exec("echo never", Duration::from_secs(30))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(says_channel_broke(&stderr), "{mode}: {stderr}");
        assert!(stderr.contains(said), "{mode}: {stderr}");
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{mode}: took {:?}",
            started.elapsed()
        );
        assert_eq!(processes_matching(&run, "sleep 1090"), "");
    }
    shutdown(run).await;
}

#[tokio::test]
async fn without_an_agent_commands_run_with_podman_exec_and_the_run_is_told() {
    let Some(run) =
        start_run_with(|opts| opts.ah_executable = Some(PathBuf::from("/bin/true"))).await
    else {
        return;
    };
    let notes = run.backend.notes();
    assert!(
        notes.len() == 1 && notes[0].contains("one podman exec each"),
        "{notes:?}"
    );
    let (code, out, _) = sh(&run, "setsid sleep 1100 & echo ran; exit 4").await;
    assert_eq!((code, out.as_str()), (4, "ran\n"));
    assert_eq!(processes_matching(&run, "sleep 1100"), "");
    shutdown(run).await;
}

#[tokio::test]
async fn per_call_execs_and_the_channel_take_turns() {
    let Some(run) = start_run().await else {
        return;
    };
    for _ in 0..2 {
        let out = run
            .backend
            .exec_without_channel("echo apart", Duration::from_secs(30))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "apart\n");
        let (_, out, err) = sh(&run, "echo channel; tr '\\0' ' ' < /proc/$PPID/cmdline").await;
        assert_eq!(out, "channel\n/run/ah-agent __sandbox-agent ", "{err}");
        assert!(err.is_empty(), "{err}");
    }
    shutdown(run).await;
}

#[test]
fn the_agent_refuses_to_run_outside_the_sandbox() {
    // The agent ends every process it can signal: on a host it must not
    // even read its input.
    let out = Command::new(Path::new(env!("CARGO_BIN_EXE_ah")))
        .arg("__sandbox-agent")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("ah: {e}"));
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("refused to start"), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
fn the_init_refuses_to_run_but_as_pid_1() {
    // It would start an agent and reap forever: on a host it must not.
    let out = Command::new(Path::new(env!("CARGO_BIN_EXE_ah")))
        .arg(ah_sandbox::channel::init::COMMAND)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("ah: {e}"));
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("refused to start") && stderr.contains("PID 1"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}
