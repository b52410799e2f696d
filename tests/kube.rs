//! `ah kube manifest RUN` against a real engine that reads Kubernetes
//! YAML: a real run (podman, the mock model) is written as a Pod and a
//! NetworkPolicy, `podman kube play` makes the Pod from the whole text (it
//! skips kinds it does not know, the policy among them; `--network none`
//! stands in for it), and the Pod is checked from inside: the non-root
//! user, no capability, a read-only root, no service account token, a
//! writable `/work`, the run's memory limit, the init as PID 1 and the
//! agent execute-only in a read-only `/run/ah`; then the command channel
//! runs there over `podman exec -i` (frames in, frames out), and
//! `podman kube down` leaves nothing behind.
//!
//! The init and the agent reach the Pod as README says: an init container
//! copies them from a runtime image, built here from the sandbox image,
//! this ah and the host's catatonit. Skipped like the other podman tests
//! when podman is absent. Run as root only: rootless podman 4.3 on cgroup
//! v1 (where it can make no cgroup of the user's) refuses a Pod with a
//! memory limit ("container could not join or create cgroup"), where
//! `podman run` ignores `--memory` with a warning.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::support::host::{Host, describe};
use crate::support::mock::{MockServer, Reply, Turn};
use crate::support::podman::{no_container_left, podman_ready_blocking};
use ah_sandbox::channel::frame::{Exit, Frame, MAX_FRAME, Status, VERSION, read_frame};
use ah_sandbox::podman::{DEFAULT_IMAGE, Ulimits, find_init};

/// The sandbox's user in the Pod (`ah_core::kube`'s fixed uid and gid).
const UID: &str = "1000";

/// Root's podman, with the engine's defaults from a containers.conf of
/// the test's (see [`engine_conf`]).
struct Engine {
    podman: PathBuf,
    conf: PathBuf,
}

impl Engine {
    /// `podman`, to be given arguments.
    fn podman(&self) -> Command {
        let mut command = Command::new(&self.podman);
        command.env("CONTAINERS_CONF", &self.conf);
        command
    }

    /// `podman ARGS` run to its end.
    fn run(&self, args: &[&str]) -> Output {
        self.podman()
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("podman {args:?}: {e}"))
    }

    /// `podman ARGS` reading `input` on stdin.
    fn run_with(&self, args: &[&str], input: &str) -> Output {
        let mut child = self
            .podman()
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("podman {args:?}: {e}"));
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(input.as_bytes()).unwrap();
        drop(stdin);
        child.wait_with_output().unwrap()
    }

    /// `sh -c SCRIPT` in `container`: its exit code, stdout and stderr.
    fn sh(&self, container: &str, script: &str) -> (i32, String, String) {
        let out = self.run(&["exec", container, "sh", "-c", script]);
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

/// A containers.conf for the engine: podman gives a rootful container
/// 1 048 576 open files and fails where the caller's hard limit is lower
/// (the backend passes `--ulimit`, clamped; `kube play` takes no such
/// flag), so the defaults are the backend's values clamped to this host.
fn engine_conf(dir: &Path) -> PathBuf {
    let Ulimits { nofile, nproc } = Ulimits::for_host();
    let path = dir.join("containers.conf");
    std::fs::write(
        &path,
        format!(
            "[containers]\ndefault_ulimits = [\"nofile={nofile}:{nofile}\", \
             \"nproc={nproc}:{nproc}\"]\n"
        ),
    )
    .unwrap();
    path
}

/// Builds `tag`: the sandbox image with catatonit and this ah at
/// `/usr/lib/ah/init` and `/usr/lib/ah/agent`, as README's Containerfile
/// has it.
fn build_runtime(engine: &Engine, dir: &Path, tag: &str) {
    let init = find_init().expect("catatonit (apt-get install catatonit)");
    std::fs::copy(init, dir.join("init")).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_ah"), dir.join("agent")).unwrap();
    std::fs::write(
        dir.join("Containerfile"),
        format!("FROM {DEFAULT_IMAGE}\nCOPY init agent /usr/lib/ah/\n"),
    )
    .unwrap();
    let context = dir.display().to_string();
    let built = engine.run(&["build", "--pull=never", "-q", "-t", tag, &context]);
    assert!(built.status.success(), "build {tag}: {}", describe(&built));
}

/// Starts the agent with `podman exec -i` and exchanges frames: it says
/// it is ready, answers a ping, and runs a command to its exit.
fn drive_channel(engine: &Engine, container: &str) {
    let mut agent = engine
        .podman()
        .args(["exec", "-i", container, "/run/ah/agent", "__sandbox-agent"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("podman exec -i: {e}"));
    let mut input = agent.stdin.take().unwrap();
    let mut output = agent.stdout.take().unwrap();
    let (done, said) = mpsc::channel();
    std::thread::spawn(move || {
        let mut frames = Vec::new();
        let mut next = |frames: &mut Vec<Frame>| {
            let frame = read_frame(&mut output, MAX_FRAME).map_err(|e| e.to_string())?;
            frames.push(frame.clone());
            Ok::<Frame, String>(frame)
        };
        let result = (|| {
            next(&mut frames)?;
            input
                .write_all(&Frame::Ping.encode())
                .map_err(|e| e.to_string())?;
            next(&mut frames)?;
            let command = b"echo hi; id -u; echo oops >&2".to_vec();
            input
                .write_all(&Frame::Run(command).encode())
                .map_err(|e| e.to_string())?;
            while !matches!(next(&mut frames)?, Frame::Exit(_)) {}
            drop(input);
            Ok::<(), String>(())
        })();
        let _ = done.send((result, frames));
    });
    let (result, frames) = said
        .recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| {
            let _ = agent.kill();
            panic!("the agent in the Pod did not answer within a minute")
        });
    let status = agent.wait().unwrap();
    let mut stderr = String::new();
    if let Some(mut pipe) = agent.stderr.take() {
        std::io::Read::read_to_string(&mut pipe, &mut stderr).unwrap();
    }
    assert_eq!(result, Ok(()), "frames {frames:?}; agent: {stderr}");
    let ready = Frame::Ready { version: VERSION };
    assert_eq!(frames[..2], [ready.clone(), ready], "{stderr}");
    let (mut out, mut err) = (Vec::new(), Vec::new());
    for frame in &frames[2..frames.len() - 1] {
        match frame {
            Frame::Stdout(bytes) => out.extend_from_slice(bytes),
            Frame::Stderr(bytes) => err.extend_from_slice(bytes),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(String::from_utf8_lossy(&out), format!("hi\n{UID}\n"));
    assert_eq!(String::from_utf8_lossy(&err), "oops\n");
    assert!(
        matches!(
            frames.last(),
            Some(Frame::Exit(Exit {
                status: Status::Code(0),
                clean: true,
                ..
            }))
        ),
        "{:?}",
        frames.last()
    );
    assert!(status.success(), "the agent ended with {status}: {stderr}");
}

/// What the test made in podman, removed when dropped whatever happened:
/// the Pod and its volumes (when a check failed before `kube down`) and the
/// runtime image.
struct Made<'a> {
    engine: &'a Engine,
    pod: String,
    runtime: String,
}

impl Drop for Made<'_> {
    fn drop(&mut self) {
        let _ = self.engine.run(&["pod", "rm", "-f", "--ignore", &self.pod]);
        for volume in ["-ah", "-work", "-tmp"] {
            let name = format!("{}{volume}", self.pod);
            let _ = self.engine.run(&["volume", "rm", "-f", &name]);
        }
        let _ = self.engine.run(&["rmi", "-f", &self.runtime]);
    }
}

/// Plays `yaml`, checks the Pod `pod` from inside, drives the channel,
/// and takes the Pod down again, leaving nothing.
fn play_and_check(engine: &Engine, yaml: &str, pod: &str, run_id: &str) {
    let played = engine.run_with(&["kube", "play", "--network", "none", "-"], yaml);
    assert!(played.status.success(), "kube play: {}", describe(&played));
    let container = format!("{pod}-sandbox");
    let label = engine.run(&[
        "inspect",
        "--format",
        "{{index .Config.Labels \"ah.run\"}}",
        &container,
    ]);
    assert_eq!(String::from_utf8_lossy(&label.stdout).trim(), run_id);
    let sh = |script: &str| engine.sh(&container, script);

    let (code, ids, err) = sh("id -u; id -g");
    assert_eq!((code, ids), (0, format!("{UID}\n{UID}\n")), "{err}");
    let (_, caps, _) = sh("grep -E '^Cap(Eff|Prm|Amb)' /proc/self/status");
    assert_eq!(caps.lines().count(), 3, "{caps}");
    for line in caps.lines() {
        assert!(line.ends_with("0000000000000000"), "{caps}");
    }
    let (code, _, err) = sh("touch /probe");
    assert_ne!(code, 0);
    assert!(err.contains("Read-only file system"), "{err}");
    let (code, out, err) =
        sh("ls /var/run/secrets/kubernetes.io/serviceaccount /run/secrets/kubernetes.io");
    assert_ne!(code, 0, "a service account token is there: {out}");
    assert!(err.contains("No such file"), "{err}");
    let (code, out, err) =
        sh("echo kept > /work/probe && cat /work/probe && touch /tmp/probe && echo tmp");
    assert_eq!((code, out.as_str()), (0, "kept\ntmp\n"), "{err}");
    let (_, init, _) = sh("tr '\\0' ' ' < /proc/1/cmdline");
    assert_eq!(init, "/run/ah/init -P ");
    let (_, modes, _) = sh("stat -c '%a %n' /run/ah/init /run/ah/agent");
    assert_eq!(modes, "111 /run/ah/init\n111 /run/ah/agent\n");
    let (code, _, err) = sh("touch /run/ah/x || head -c1 /run/ah/agent");
    assert_ne!(code, 0);
    assert!(
        err.contains("Read-only file system") && err.contains("Permission denied"),
        "{err}"
    );
    let (_, limit, err) = sh("cat /sys/fs/cgroup/memory.max 2>/dev/null || \
                              cat /sys/fs/cgroup/memory/memory.limit_in_bytes");
    assert_eq!(limit.trim(), (512u64 << 20).to_string(), "{err}");
    drive_channel(engine, &container);

    let down = engine.run_with(&["kube", "down", "-"], yaml);
    assert!(down.status.success(), "kube down: {}", describe(&down));
    let exists = engine.run(&["pod", "exists", pod]);
    assert_eq!(exists.status.code(), Some(1), "the pod is still there");
    let containers = engine.run(&["ps", "-a", "-q", "--filter", &format!("pod={pod}")]);
    assert_eq!(String::from_utf8_lossy(&containers.stdout).trim(), "");
    let volumes = engine.run(&["volume", "ls", "-q", "--filter", &format!("name={pod}")]);
    assert_eq!(String::from_utf8_lossy(&volumes.stdout).trim(), "");
}

/// A real run with the mock model and the limits given; its id.
fn make_run(host: &Host) -> String {
    let mock = MockServer::start(vec![Turn::reply(Reply::new().text("nothing to do"))]);
    let out = host
        .ah(&mock.url())
        .args(["--review", "never", "--memory", "512m"])
        .args(["--pids-limit", "256", "--disk-budget", "1G", "say hello"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    host.run()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

#[test]
fn a_runs_pod_plays_closed_and_its_agent_answers() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: the Pod is played by root's podman (see the module's note)");
        return;
    }
    let Some(podman) = podman_ready_blocking() else {
        return;
    };
    let host = Host::git(&[("a.txt", "one\n")]);
    let id = make_run(&host);
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine {
        podman: podman.clone(),
        conf: engine_conf(dir.path()),
    };
    let pod = format!("ah-{}", id.to_ascii_lowercase());
    let made = Made {
        engine: &engine,
        runtime: format!("localhost/ah-kube-test-runtime:{pod}"),
        pod,
    };
    build_runtime(&engine, dir.path(), &made.runtime);
    let built = started.elapsed();

    let written = host
        .ah("http://127.0.0.1:9")
        .args([
            "kube",
            "manifest",
            &id[..10],
            "--runtime-image",
            &made.runtime,
        ])
        .output()
        .unwrap();
    assert_eq!(written.status.code(), Some(0), "{}", describe(&written));
    let said = String::from_utf8_lossy(&written.stderr);
    assert_eq!(said, "", "no note for a podman run with its limits");
    let yaml = String::from_utf8(written.stdout).unwrap();
    assert_eq!(yaml.matches("\n---\n").count(), 1, "{yaml}");
    assert!(yaml.contains("\"kind\": \"NetworkPolicy\""), "{yaml}");
    assert!(yaml.contains(&format!("\"ah.run\": \"{id}\"")), "{yaml}");
    for limit in ["\"memory\": \"512Mi\"", "\"ephemeral-storage\": \"1Gi\""] {
        assert!(yaml.contains(limit), "{limit}: {yaml}");
    }
    assert!(yaml.contains("\"ah.pids-limit\": \"256\""), "{yaml}");

    play_and_check(&engine, &yaml, &made.pod, &id);
    let checked = started.elapsed();

    // Anywhere but under ah's init the agent refuses: here as PID 1 of a
    // plain container of the runtime image.
    let alone = engine.run(&[
        "run",
        "--rm",
        "--network=none",
        &made.runtime,
        "/usr/lib/ah/agent",
        "__sandbox-agent",
    ]);
    assert_eq!(alone.status.code(), Some(2), "{}", describe(&alone));
    let refused = String::from_utf8_lossy(&alone.stderr);
    assert!(refused.contains("refused to start"), "{refused}");
    drop(made);
    let images = engine.run(&[
        "images",
        "-q",
        "--filter",
        "reference=*/ah-kube-test-runtime",
    ]);
    assert_eq!(String::from_utf8_lossy(&images.stdout).trim(), "");
    no_container_left(&podman, &id);
    eprintln!(
        "kube: runtime image built in {built:?}; Pod played, checked and taken down in {:?}",
        checked - built
    );
}

#[test]
fn an_unknown_run_is_refused_with_how_to_list_runs() {
    let host = Host::git(&[("a.txt", "one\n")]);
    std::fs::create_dir_all(host.project.join(".ah/runs")).unwrap();
    let out = host
        .ah("http://127.0.0.1:9")
        .args(["kube", "manifest", "01ZZZ"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert_eq!(out.stdout, b"");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("no run matches \"01ZZZ\"") && said.contains("`ah runs`"),
        "{said}"
    );
}
