//! The podman backend against real podman: what the model's commands can and
//! cannot do inside a run's container, how timeouts and cancellation end
//! them, and that no container outlives its run.
//!
//! Skipped only when podman is absent and `AH_REQUIRE_PODMAN` is unset; with
//! `AH_REQUIRE_PODMAN=1` a missing podman fails. The sandbox image is built
//! once (offline where no registry is reachable) under a file lock, so
//! parallel tests never build it twice.
//!
//! Rootless: when run as root with `AH_TEST_USER` naming an unprivileged user
//! that has /etc/subuid and /etc/subgid ranges, one test copies the image into
//! that user's storage and reruns this binary as that user. CI creates the
//! user with `useradd -m ahtest` (Debian's useradd adds the subordinate id
//! ranges) and sets `AH_TEST_USER=ahtest`.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::podman::{TestUser, containers_of, podman_ready};
use ah_sandbox::doctor::{DoctorOptions, Severity, run_checks};
use ah_sandbox::podman::{OUTPUT_CAP, PodmanBackend, PodmanError, PodmanOptions, find_podman};
use ah_sandbox::{Backend, BackendKind};

const IMAGE: &str = ah_sandbox::podman::DEFAULT_IMAGE;

/// A run's directories and its started backend.
pub(crate) struct Run {
    _dir: tempfile::TempDir,
    pub(crate) id: String,
    pub(crate) work: PathBuf,
    pub(crate) backend: PodmanBackend,
}

fn run_id() -> String {
    format!("t{}", ulid::Ulid::generate()).to_lowercase()
}

/// A work copy and a started backend.
pub(crate) async fn start_run() -> Option<Run> {
    start_run_with(|_| {}).await
}

/// [`start_run`] with `configure` changing the options.
pub(crate) async fn start_run_with(configure: impl FnOnce(&mut PodmanOptions)) -> Option<Run> {
    podman_ready().await?;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(work.join("README"), "hello\n").unwrap_or_else(|e| panic!("{e}"));
    let id = run_id();
    let mut opts = PodmanOptions::new(&id, &work);
    // The test binary is not ah: the command channel's agent is.
    opts.ah_executable = Some(PathBuf::from(env!("CARGO_BIN_EXE_ah")));
    configure(&mut opts);
    let backend = PodmanBackend::start(&opts)
        .await
        .unwrap_or_else(|e| panic!("start: {e}"));
    // Tests that give another agent expect the channel to fail.
    if opts.ah_executable.as_deref() == Some(Path::new(env!("CARGO_BIN_EXE_ah"))) {
        assert_eq!(
            backend.notes(),
            Vec::<String>::new(),
            "the channel is in use"
        );
    }
    Some(Run {
        _dir: dir,
        id,
        work,
        backend,
    })
}

pub(crate) async fn sh(run: &Run, command: &str) -> (i32, String, String) {
    let out = run
        .backend
        .exec(command, Duration::from_secs(30))
        .await
        .unwrap_or_else(|e| panic!("exec {command:?}: {e}"));
    assert!(!out.timed_out, "{command:?} timed out");
    (
        out.exit_code.unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `command` in the run's container with a plain `podman exec`, not
/// through the backend (whose wrapper would clean up first): what is left
/// between two steps.
fn raw_exec(run: &Run, command: &str) -> String {
    let podman = find_podman().unwrap_or_else(|e| panic!("{e}"));
    let out = Command::new(podman)
        .args(["exec", run.backend.container(), "bash", "-c", command])
        .output()
        .unwrap_or_else(|e| panic!("podman exec: {e}"));
    assert!(
        out.status.success(),
        "{command:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Command lines of processes in the container that match `pattern`.
pub(crate) fn processes_matching(run: &Run, pattern: &str) -> String {
    let found = raw_exec(run, &format!("ps -eo args= | grep -x '{pattern}' || true"));
    found.trim().to_string()
}

/// Every process in the container: pid, session and command line.
pub(crate) fn all_processes(run: &Run) -> String {
    raw_exec(run, "ps -eo pid=,sid=,args=")
}

#[tokio::test]
async fn commands_run_in_work_and_report_exit_codes_and_streams() {
    let Some(run) = start_run().await else {
        return;
    };
    let backend: &dyn Backend = &run.backend;
    assert_eq!(backend.kind(), BackendKind::Podman);
    let out = backend
        .exec(
            "pwd; cat README; echo oops >&2; exit 7",
            Duration::from_secs(30),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "/work\nhello\n");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "oops\n");
    assert_eq!(out.exit_code, Some(7));
    assert!(!out.timed_out);
    run.backend
        .shutdown()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

/// Where things are mounted in the container (field 5 of each line of
/// `/proc/self/mountinfo`).
async fn mount_points(run: &Run) -> Vec<String> {
    let (_, mountinfo, _) = sh(run, "cat /proc/self/mountinfo").await;
    mountinfo
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(str::to_string)
        .collect()
}

/// Mount points that are the container's own (its root, scratch folders,
/// the kernel's file systems, the files podman makes) or ah's: the work copy,
/// the init and the command channel's agent.
fn expected_mount(point: &str) -> bool {
    let own = [
        "/",
        "/run",
        "/tmp",
        "/var/tmp",
        "/etc/hosts",
        "/etc/hostname",
        "/etc/resolv.conf",
        "/run/.containerenv",
        "/work",
        "/run/ah-init",
        "/run/ah-agent",
    ];
    own.contains(&point)
        || ["/proc", "/sys", "/dev"]
            .iter()
            .any(|p| point.starts_with(p))
}

#[tokio::test]
async fn the_host_is_mounted_nowhere_but_work_and_the_init() {
    let Some(run) = start_run().await else {
        return;
    };
    // The project itself is not there: only its work copy is.
    let (code, _, err) = sh(&run, "ls /project").await;
    assert_ne!(code, 0);
    assert!(err.contains("No such file or directory"), "{err}");
    let mounts = mount_points(&run).await;
    assert!(mounts.contains(&"/work".to_string()), "{mounts:?}");
    let unexpected: Vec<&String> = mounts.iter().filter(|m| !expected_mount(m)).collect();
    assert!(unexpected.is_empty(), "mounted: {unexpected:?}");
    assert_eq!(sh(&run, "cat /work/README").await.1, "hello\n");
    run.backend
        .shutdown()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

/// Tries, from a command, to ptrace-attach a process (python3 with ctypes:
/// the image has no gdb or strace) and prints `attach PID: ok` or the
/// error.
pub(crate) const ATTACH: &str = "import ctypes, os, sys\n\
libc = ctypes.CDLL(None, use_errno=True)\n\
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]\n\
pid = int(sys.argv[1])\n\
rc = libc.ptrace(16, pid, None, None)\n\
print(f'attach {pid}:', 'ok' if rc == 0 else os.strerror(ctypes.get_errno()))\n";

/// What a command can do to PID 1 (the init) and, for comparison, to a
/// process of its own.
async fn reach_of_pid_1(run: &Run) -> String {
    let command = format!(
        "cat > /tmp/attach.py <<'EOF'\n{ATTACH}EOF\n\
         python3 /tmp/attach.py 1; cat /proc/1/environ; (exec 3< /proc/1/mem) && echo mem opened; \
         sleep 30 & python3 /tmp/attach.py $!; kill $!; true"
    );
    let (_, out, err) = sh(run, &command).await;
    format!("{out}{err}")
}

/// PID 1 can be neither traced nor read; a process of the command's own can
/// (so the check itself works, and so would gdb or strace on it).
fn assert_pid_1_out_of_reach(reach: &str) {
    assert!(
        reach.contains("attach 1: Operation not permitted"),
        "{reach}"
    );
    assert!(
        reach.contains("/proc/1/environ: Permission denied"),
        "{reach}"
    );
    assert!(reach.contains("/proc/1/mem: Permission denied"), "{reach}");
    assert!(!reach.contains("mem opened"), "{reach}");
    let own = reach
        .lines()
        .filter(|line| line.starts_with("attach ") && !line.starts_with("attach 1:"))
        .collect::<Vec<_>>();
    assert!(own.len() == 1 && own[0].ends_with(": ok"), "{reach}");
}

#[tokio::test]
async fn no_command_can_trace_or_read_the_init() {
    let Some(run) = start_run().await else {
        return;
    };
    assert_pid_1_out_of_reach(&reach_of_pid_1(&run).await);
    run.backend
        .shutdown()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test]
async fn work_writes_reach_the_host_owned_by_the_caller() {
    let Some(run) = start_run().await else {
        return;
    };
    let (code, _, err) = sh(&run, "echo made > new.txt && mkdir -p d/e && touch d/e/f").await;
    assert_eq!(code, 0, "{err}");
    let made = std::fs::read_to_string(run.work.join("new.txt")).unwrap_or_default();
    assert_eq!(made, "made\n");
    let me = rustix::process::geteuid().as_raw();
    for path in ["new.txt", "d", "d/e/f"] {
        let meta = std::fs::metadata(run.work.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(meta.uid(), me, "{path} is owned by uid {}", meta.uid());
    }
    run.backend
        .shutdown()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

/// Whether the run's container really has the limits a run asks for by
/// default (4 GiB of memory, 1024 processes), read from its cgroup files.
async fn limits_hold(run: &Run) -> bool {
    let files = "/sys/fs/cgroup/memory.max /sys/fs/cgroup/memory/memory.limit_in_bytes \
                 /sys/fs/cgroup/pids.max /sys/fs/cgroup/pids/pids.max";
    let (_, out, _) = sh(run, &format!("cat {files} 2>/dev/null; true")).await;
    let values: Vec<&str> = out.lines().collect();
    values.contains(&"4294967296") && values.contains(&"1024")
}

/// What `ah doctor` says about resource limits on this host; a warning
/// either way, never a reason the backend is not ready.
async fn doctor_says_limits_hold() -> bool {
    let checks = run_checks(&DoctorOptions::default()).await;
    let check = checks
        .iter()
        .find(|c| c.name == "resource limits")
        .unwrap_or_else(|| panic!("no resource limits check in {checks:?}"));
    assert_eq!(check.severity, Severity::Warning);
    eprintln!("doctor: {}", check.detail);
    check.ok
}

#[tokio::test]
async fn doctor_tells_the_truth_about_resource_limits() {
    let Some(run) = start_run().await else {
        return;
    };
    assert_eq!(doctor_says_limits_hold().await, limits_hold(&run).await);
    run.backend
        .shutdown()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test]
async fn there_is_no_network() {
    let Some(run) = start_run().await else {
        return;
    };
    // Only loopback exists, so nothing below can leave the container.
    assert_eq!(sh(&run, "ls /sys/class/net").await.1, "lo\n");
    let connect = "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 80), 3)\"";
    let (code, _, err) = sh(&run, connect).await;
    assert_ne!(code, 0, "TCP connect succeeded");
    assert!(
        err.contains("unreachable") || err.contains("Errno"),
        "{err}"
    );
    let (code, out, _) = sh(&run, "getent hosts deb.debian.org").await;
    assert_ne!(code, 0, "DNS answered: {out}");
    run.backend
        .shutdown()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test]
async fn commands_have_no_capabilities_and_no_new_privileges() {
    let Some(run) = start_run().await else {
        return;
    };
    let (_, status, _) = sh(&run, "grep -E '^(Cap|NoNewPrivs)' /proc/self/status").await;
    let caps: Vec<&str> = status.lines().filter(|l| l.starts_with("Cap")).collect();
    assert_eq!(caps.len(), 5, "{status}");
    for line in caps {
        assert!(line.ends_with("0000000000000000"), "{line}");
    }
    assert!(status.contains("NoNewPrivs:\t1"), "{status}");
    run.backend
        .shutdown()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test]
async fn the_environment_carries_no_host_variables() {
    let Some(run) = start_run().await else {
        return;
    };
    // cargo gives this test process CARGO_* variables; none may leak in.
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
    let (_, env, _) = sh(&run, "env").await;
    let allowed = [
        "PATH",
        "HOME",
        "LANG",
        "TERM",
        "PWD",
        "SHLVL",
        "_",
        "OLDPWD",
        "HOSTNAME",
        "container",
    ];
    for line in env.lines() {
        let name = line.split('=').next().unwrap_or("");
        assert!(
            allowed.contains(&name),
            "unexpected variable in the container: {line}"
        );
    }
    assert!(
        env.contains("HOME=/tmp\n") && env.contains("TERM=dumb\n"),
        "{env}"
    );
    run.backend
        .shutdown()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test]
async fn a_timeout_kills_the_command_and_its_children() {
    let Some(run) = start_run().await else {
        return;
    };
    let started = Instant::now();
    let out = run
        .backend
        .exec(
            "echo started; setsid sleep 1000 & sleep 1001; echo never",
            Duration::from_secs(2),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.timed_out);
    assert_eq!(out.exit_code, None);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "started\n");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(processes_matching(&run, "sleep 100[01]"), "");
    assert_eq!(sh(&run, "echo alive").await.1, "alive\n");
    run.backend
        .shutdown()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test]
async fn nothing_a_step_starts_outlives_it() {
    let Some(run) = start_run().await else {
        return;
    };
    // A new session, a nohup job, a double fork, and a job holding stdout.
    let started = Instant::now();
    let escapes = "setsid sleep 1004 & nohup sleep 1005 >/dev/null 2>&1 & (sleep 1006 &); \
                   (setsid bash -c 'sleep 1007 & sleep 1008' &); sleep 0.3; echo started";
    let (code, out, err) = sh(&run, escapes).await;
    assert_eq!((code, out.as_str()), (0, "started\n"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "a background job held the step for {:?}",
        started.elapsed()
    );
    let left = all_processes(&run);
    assert!(!left.contains("sleep 100"), "survivors:\n{left}");
    // The container's init is untouched and the next step runs.
    let (_, init, _) = sh(&run, "tr '\\0' ' ' < /proc/1/cmdline").await;
    assert_eq!(
        init.trim(),
        format!(
            "{} {}",
            ah_sandbox::podman::INIT_PATH,
            ah_sandbox::channel::init::COMMAND
        )
    );
    assert_eq!(sh(&run, "echo alive").await.1, "alive\n");
    // The exit status is the command's.
    assert_eq!(sh(&run, "sleep 1009 & exit 3").await.0, 3);
    run.backend
        .shutdown()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test]
async fn killing_the_wrapper_does_not_let_a_process_escape() {
    let Some(run) = start_run().await else {
        return;
    };
    // The command kills the shell that would clean up after it, leaving a
    // job that starts a new session a moment later.
    let out = run
        .backend
        .exec(
            "(sleep 1; setsid sleep 1010 &) & kill -KILL $PPID",
            Duration::from_secs(30),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.exit_code, Some(137));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let left = all_processes(&run);
    assert!(!left.contains("sleep 1010"), "survivors:\n{left}");
    run.backend
        .shutdown()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test]
async fn a_full_process_table_leaves_a_working_sandbox_and_no_command_stops_the_init() {
    let Some(run) = start_run_with(|opts| opts.pids_limit = 30).await else {
        return;
    };
    // Where the limit holds, no `podman exec` can enter to kill these.
    let out = run
        .backend
        .exec(
            "for i in $(seq 60); do sleep 1013 & done 2>/dev/null; wait",
            Duration::from_secs(3),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.timed_out);
    assert_eq!(processes_matching(&run, "sleep 1013"), "");
    assert_eq!(sh(&run, "echo alive").await.1, "alive\n");
    // The init takes no signal from inside: the container goes on, with
    // its /tmp, and no command is told of a restart.
    let (code, _, said) = sh(
        &run,
        "touch /tmp/kept; for s in INT TERM HUP QUIT USR1 SEGV KILL; do kill -$s 1; done; sleep 0.5",
    )
    .await;
    assert_eq!(code, 0, "{said}");
    assert!(!said.contains("[ah:"), "{said}");
    let (_, out, said) = sh(&run, "ls /tmp; tr '\\0' ' ' < /proc/1/cmdline").await;
    assert_eq!(
        out,
        format!(
            "kept\n{} {} ",
            ah_sandbox::podman::INIT_PATH,
            ah_sandbox::channel::init::COMMAND
        ),
        "{said}"
    );
    assert!(!said.contains("[ah:"), "{said}");
    run.backend
        .shutdown()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test]
async fn a_sandbox_that_stopped_between_steps_is_restarted_for_the_next() {
    let Some(run) = start_run().await else {
        return;
    };
    let podman = find_podman().unwrap_or_else(|e| panic!("{e}"));
    let stopped = Command::new(&podman)
        .args(["stop", "--time=0", run.backend.container()])
        .output()
        .unwrap_or_else(|e| panic!("podman stop: {e}"));
    assert!(stopped.status.success(), "{stopped:?}");
    // Podman refuses the command; the backend restarts the container and
    // the command runs there, once.
    let (code, out, _) = sh(&run, "echo ran >> /work/count; cat /work/count").await;
    assert_eq!((code, out.as_str()), (0, "ran\n"));
    run.backend
        .shutdown()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test]
async fn dropping_an_exec_kills_the_command_inside() {
    let Some(run) = start_run().await else {
        return;
    };
    let cancelled = tokio::time::timeout(
        Duration::from_secs(2),
        run.backend
            .exec("setsid sleep 1002 & sleep 1003", Duration::from_secs(600)),
    )
    .await;
    assert!(
        cancelled.is_err(),
        "the command should still have been running"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut left = processes_matching(&run, "sleep 100[23]");
    while !left.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(300)).await;
        left = processes_matching(&run, "sleep 100[23]");
    }
    assert_eq!(left, "", "processes survived the cancelled exec");
    run.backend
        .shutdown()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test]
async fn output_is_capped_in_memory() {
    let Some(run) = start_run().await else {
        return;
    };
    let out = run
        .backend
        .exec("head -c 20000000 /dev/zero", Duration::from_secs(60))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.exit_code, Some(0));
    assert!(
        out.stdout.len() < OUTPUT_CAP + 100,
        "kept {} bytes",
        out.stdout.len()
    );
    assert_eq!(out.dropped_bytes, 20_000_000 - OUTPUT_CAP as u64);
    let marker = String::from_utf8_lossy(&out.stdout[..]).contains("bytes of output dropped here");
    assert!(marker, "the cut is marked");
    run.backend
        .shutdown()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test]
async fn shutdown_removes_the_container_and_is_idempotent() {
    let Some(run) = start_run().await else {
        return;
    };
    let Ok(podman) = find_podman() else { return };
    assert_ne!(containers_of(&podman, &run.id), "");
    run.backend
        .shutdown()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(containers_of(&podman, &run.id), "");
    run.backend
        .shutdown()
        .await
        .unwrap_or_else(|e| panic!("second shutdown: {e}"));
    assert!(
        run.backend
            .exec("true", Duration::from_secs(10))
            .await
            .is_err()
    );
}

#[tokio::test]
async fn cleanup_removes_leftovers_of_dead_runs_only() {
    let Some(live) = start_run().await else {
        return;
    };
    let Ok(podman) = find_podman() else { return };
    // A leftover of a crashed run: its owner labels name no live process.
    let stale_id = run_id();
    let created = Command::new(&podman)
        .args(["create", "--label"])
        .arg(format!("ah.run={stale_id}"))
        .args([
            "--label",
            "ah.pid=999999999",
            "--label",
            "ah.pidstart=1",
            "--name",
        ])
        .arg(format!("ah-{stale_id}"))
        .args([IMAGE, "sleep", "infinity"])
        .output()
        .unwrap_or_else(|e| panic!("podman create: {e}"));
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );
    assert_ne!(containers_of(&podman, &stale_id), "");
    ah_sandbox::podman::cleanup_stale()
        .await
        .unwrap_or_else(|e| panic!("cleanup: {e}"));
    assert_eq!(
        containers_of(&podman, &stale_id),
        "",
        "the leftover survived"
    );
    assert_ne!(
        containers_of(&podman, &live.id),
        "",
        "a live run's container was removed"
    );
    assert_eq!(sh(&live, "echo alive").await.1, "alive\n");
    live.backend
        .shutdown()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test]
async fn a_missing_image_says_how_to_build_it() {
    if podman_ready().await.is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let mut opts = PodmanOptions::new(&run_id(), dir.path());
    opts.image = "localhost/ah-no-such-image:none".to_string();
    match PodmanBackend::start(&opts).await {
        Err(e @ PodmanError::ImageMissing { .. }) => {
            assert!(e.to_string().contains("ah image build"), "{e}")
        }
        other => panic!("expected ImageMissing, got {other:?}"),
    }
}

#[tokio::test]
async fn rootless_podman_runs_as_an_unprivileged_user() {
    let Some(user) = TestUser::from_env() else {
        return;
    };
    if podman_ready().await.is_none() {
        return;
    };
    user.build_image();
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("current_exe: {e}"));
    let (_dir, exe) = user.reachable_copy(&exe);
    // The test binary names its tests by module path without the crate
    // (`podman_backend::rootless_inner`); `--exact` needs that full name.
    let (_crate, module) = module_path!()
        .split_once("::")
        .unwrap_or_else(|| panic!("{} is not in a module", module_path!()));
    let inner = user
        .command(&exe, &[])
        .args([
            "--exact",
            &format!("{module}::rootless_inner"),
            "--nocapture",
        ])
        .output()
        .unwrap_or_else(|e| panic!("runuser: {e}"));
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&inner.stdout),
        String::from_utf8_lossy(&inner.stderr)
    );
    assert!(inner.status.success(), "rootless run failed:\n{report}");
    assert!(report.contains("rootless checks passed"), "{report}");
}

/// Rootless checks; `rootless_podman_runs_as_an_unprivileged_user` runs this
/// as its user. Does nothing as root.
#[tokio::test]
async fn rootless_inner() {
    let uid = rustix::process::geteuid().as_raw();
    if uid == 0 {
        return;
    }
    assert!(ah_sandbox::podman::rootless());
    let Some(run) = start_run().await else {
        return;
    };
    assert_eq!(sh(&run, "id -u").await.1.trim(), uid.to_string());
    assert_eq!(sh(&run, "touch /work/mine && echo ok").await.1, "ok\n");
    let meta = std::fs::metadata(run.work.join("mine")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(meta.uid(), uid);
    assert_ne!(sh(&run, "ls /project").await.0, 0);
    assert_pid_1_out_of_reach(&reach_of_pid_1(&run).await);
    assert_eq!(sh(&run, "sleep 1011 & setsid sleep 1012 & true").await.0, 0);
    assert!(!all_processes(&run).contains("sleep 101"));
    assert_eq!(doctor_says_limits_hold().await, limits_hold(&run).await);
    let (_, caps, _) = sh(&run, "grep CapEff /proc/self/status").await;
    assert!(caps.trim().ends_with("0000000000000000"), "{caps}");
    assert_eq!(sh(&run, "ls /sys/class/net").await.1, "lo\n");
    run.backend
        .shutdown()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("rootless checks passed");
}
