//! The sandbox's network and secrets, through the real binary and real
//! podman: no network by default; with `--network proxy` a request from
//! inside the container reaches an allowlisted target on the host's
//! loopback through the proxy, a target not on the list gets `403` and a
//! `network.log` line, a direct connection and a DNS lookup fail; the
//! environment carries no host secret even when one is listed by name; and
//! a run whose model echoes the API key leaves it nowhere under `.ah/` nor
//! in ah's output.
//!
//! Skipped only when podman is absent and `AH_REQUIRE_PODMAN` is unset.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::process::Output;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ah_sandbox::egress::{Allowlist, NetworkMode};
use ah_sandbox::podman::{PodmanBackend, PodmanOptions, container_env};

use crate::support::host::{Host, describe, files_containing, json_file, query};
use crate::support::mock::{MockServer, RecordedRequest, Reply, Turn};
use crate::support::podman::{TestUser, podman_ready, podman_ready_blocking};
use serde_json::{Value, json};

/// A target server on the host's loopback: answers each connection with a
/// small HTTP response naming itself, and counts connections.
struct Target {
    port: u16,
    hits: Arc<AtomicUsize>,
}

impl Target {
    fn start(name: &'static str) -> Target {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("bind: {e}"));
        let port = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("addr: {e}"))
            .port();
        let hits = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&hits);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                counter.fetch_add(1, Ordering::SeqCst);
                let mut buf = [0u8; 1024];
                let _ = stream.read(&mut buf);
                let body = format!("reached-{name}");
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Target { port, hits }
    }
}

/// One bash step, then a final answer.
fn one_step(command: &str) -> Vec<Turn> {
    vec![
        Turn::reply(Reply::new().tool_use("toolu_1", "bash", json!({ "command": command }))),
        Turn::reply(Reply::new().text("done")),
    ]
}

/// What the model was told about step `n` (the tool result in request n+1).
fn step_result(requests: &[RecordedRequest], n: usize) -> String {
    let request = requests
        .get(n)
        .unwrap_or_else(|| panic!("only {} requests", requests.len()));
    let last = request.body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or(Value::Null);
    last["content"][0]["content"].to_string()
}

fn stdout_events(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

#[test]
fn the_proxy_lets_through_only_what_the_allowlist_names() {
    if podman_ready_blocking().is_none() {
        return;
    }
    let allowed = Target::start("allowed");
    let denied = Target::start("denied");
    let (a, d) = (allowed.port, denied.port);
    let command = format!(
        "curl -sS --max-time 20 --proxytunnel http://127.0.0.1:{a}/; echo; \
         curl -sS --max-time 20 --proxytunnel -o /dev/null -w 'denied-status=%{{http_connect}}\\n' \
           http://127.0.0.1:{d}/; \
         curl -sS --max-time 5 --noproxy '*' http://127.0.0.1:{a}/ || echo direct-failed; \
         getent hosts example.com || echo dns-failed; \
         env | sort | sed 's/^/env: /'; \
         exec 3<>/dev/tcp/127.0.0.1/3128 && printf 'CONNECT late.example:443 HTTP/1.1\r\n\r\n' >&3"
    );
    let mock = MockServer::start(one_step(&command));
    let host = Host::git(&[("README.md", "hi\n")]);
    let out = host
        .ah(&mock.url())
        .env("PLAIN_SETTING", "plain-value")
        .env("DEPLOY_TOKEN", "deploy-token-value-1234")
        .env("MY_API_KEY", "my-api-key-value-5678")
        .args(["--review", "never", "--json", "--network", "proxy"])
        .args(["--allow-host", &format!("127.0.0.1:{a}")])
        .args([
            "--env",
            "PLAIN_SETTING",
            "--env",
            "DEPLOY_TOKEN",
            "--env",
            "MY_API_KEY",
        ])
        .arg("fetch")
        .output()
        .unwrap_or_else(|e| panic!("run ah: {e}"));
    assert!(out.status.success(), "{}", describe(&out));
    let told = step_result(&mock.requests(), 1);

    // Allowed: through the proxy to the host's loopback.
    assert!(told.contains("reached-allowed"), "{told}");
    // Not on the list: 403 from the proxy, and the target never saw it.
    assert!(told.contains("denied-status=403"), "{told}");
    assert_eq!(denied.hits.load(Ordering::SeqCst), 0);
    // No way around the proxy: no direct connection, no DNS.
    assert!(told.contains("direct-failed"), "{told}");
    assert!(told.contains("dns-failed"), "{told}");
    assert_eq!(allowed.hits.load(Ordering::SeqCst), 1);

    // The environment: the fixed set, the proxy, the plain listed variable;
    // no secret, listed or not.
    assert!(
        told.contains("env: HTTPS_PROXY=http://127.0.0.1:3128"),
        "{told}"
    );
    assert!(
        told.contains("env: http_proxy=http://127.0.0.1:3128"),
        "{told}"
    );
    assert!(told.contains("env: PLAIN_SETTING=plain-value"), "{told}");
    for secret in [
        "deploy-token-value-1234",
        "my-api-key-value-5678",
        "test-key",
        "DEPLOY_TOKEN",
        "MY_API_KEY",
    ] {
        assert!(!told.contains(secret), "{secret} in {told}");
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("DEPLOY_TOKEN is not passed into the sandbox"),
        "{stderr}"
    );

    // Every decision is in network.log and is an event, live and stored.
    let run = host.run();
    let log = std::fs::read_to_string(run.join("network.log")).unwrap_or_default();
    assert!(
        log.contains(&format!(" allow 127.0.0.1:{a} allowed by 127.0.0.1:{a}")),
        "{log}"
    );
    assert!(
        log.contains(&format!(
            " deny 127.0.0.1:{d} no network allow rule matches"
        )),
        "{log}"
    );
    let egress: Vec<Value> = stdout_events(&out)
        .into_iter()
        .filter(|e| e["type"] == "egress")
        .collect();
    // The last request was still being decided when the step ended: its
    // decision is reported with the step or at the run's end, never lost.
    assert_eq!(egress.len(), 3, "{egress:?}");
    assert!(egress.iter().all(|e| e["step"] == json!(1)), "{egress:?}");
    assert_eq!(egress[0]["allowed"], json!(true));
    assert_eq!(egress[1]["target"], json!(format!("127.0.0.1:{d}")));
    assert_eq!(egress[1]["allowed"], json!(false));
    assert_eq!(egress[2]["target"], json!("late.example:443"));
    assert_eq!(egress[2]["allowed"], json!(false));
    assert_eq!(log.lines().count(), 3, "{log}");
    let stored = query(
        &host.sessions()[0],
        "SELECT details FROM events WHERE event_type = 'egress' ORDER BY id",
    );
    assert_eq!(stored.len(), 3, "{stored:?}");
    let manifest = std::fs::read_to_string(run.join("manifest.json")).unwrap_or_default();
    assert!(manifest.contains("\"network\": \"proxy\""), "{manifest}");
}

#[test]
fn by_default_the_sandbox_has_no_network_and_no_proxy() {
    if podman_ready_blocking().is_none() {
        return;
    }
    let target = Target::start("target");
    let port = target.port;
    let command = format!(
        "curl -sS --max-time 5 http://127.0.0.1:{port}/ || echo direct-failed; \
         getent hosts example.com || echo dns-failed; \
         env | grep -ci proxy || true; ls /run/ah-bin 2>&1 || true"
    );
    let mock = MockServer::start(one_step(&command));
    let host = Host::git(&[("README.md", "hi\n")]);
    let out = host
        .ah(&mock.url())
        .args(["--review", "never", "fetch"])
        .output()
        .unwrap_or_else(|e| panic!("run ah: {e}"));
    assert!(out.status.success(), "{}", describe(&out));
    let told = step_result(&mock.requests(), 1);
    assert!(told.contains("direct-failed"), "{told}");
    assert!(told.contains("dns-failed"), "{told}");
    assert!(told.contains("No such file"), "{told}");
    assert!(!told.contains("reached-"), "{told}");
    assert_eq!(target.hits.load(Ordering::SeqCst), 0);
    assert!(!host.run().join("network.log").exists());
}

#[test]
fn the_configured_network_takes_effect_without_flags() {
    if podman_ready_blocking().is_none() {
        return;
    }
    let target = Target::start("configured");
    let port = target.port;
    let command = format!("curl -sS --max-time 20 --proxytunnel http://127.0.0.1:{port}/");
    let mock = MockServer::start(one_step(&command));
    let host = Host::git(&[("README.md", "hi\n")]);
    let config = host.project.join(".ah/config.toml");
    std::fs::create_dir_all(config.parent().unwrap_or(&host.project))
        .unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        &config,
        format!("[network]\nmode = \"proxy\"\nallow = [\"127.0.0.1:{port}\"]\n"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let out = host
        .ah(&mock.url())
        .args(["--review", "never", "fetch"])
        .output()
        .unwrap_or_else(|e| panic!("run ah: {e}"));
    assert!(out.status.success(), "{}", describe(&out));
    let told = step_result(&mock.requests(), 1);
    assert!(told.contains("reached-configured"), "{told}");
    let manifest = json_file(&host.run().join("manifest.json"));
    assert_eq!(manifest["network"], "proxy");
    assert_eq!(target.hits.load(Ordering::SeqCst), 1);
}

#[test]
fn an_echoed_api_key_is_nowhere_under_ah_dir_nor_in_the_output() {
    if podman_ready_blocking().is_none() {
        return;
    }
    let key = "sk-ant-egress-test-7f3c9a1b2d4e";
    let mock = MockServer::start(vec![
        Turn::reply(
            Reply::new()
                .text(format!("I see your key {key}; saving it"))
                .tool_use(
                    "toolu_1",
                    "write",
                    json!({"path": "key.txt", "content": key}),
                ),
        ),
        Turn::reply(Reply::new().tool_use(
            "toolu_2",
            "bash",
            json!({"command": format!("cat key.txt; echo {key} >&2; exit 3")}),
        )),
        Turn::reply(Reply::new().text(format!("done, the key was {key}"))),
    ]);
    let host = Host::git(&[("README.md", "hi\n")]);
    let out = host
        .ah(&mock.url())
        .env("ANTHROPIC_API_KEY", key)
        .args(["--review", "never", "--json", "leak it"])
        .output()
        .unwrap_or_else(|e| panic!("run ah: {e}"));
    assert!(out.status.success(), "{}", describe(&out));
    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    // The key authenticated every request …
    assert_eq!(requests[0].header("x-api-key"), Some(key));
    // … and went nowhere else: not to the model, not to disk, not out.
    for (n, request) in requests.iter().enumerate() {
        assert!(
            !request.body.to_string().contains(key),
            "request {n}: {}",
            request.body
        );
    }
    assert!(step_result(&requests, 2).contains("[REDACTED]"));
    let leaks = files_containing(&host.project.join(".ah"), key.as_bytes());
    assert!(leaks.is_empty(), "the key is in {leaks:?}");
    for stream in [&out.stdout, &out.stderr] {
        assert!(!String::from_utf8_lossy(stream).contains(key));
    }
    assert!(String::from_utf8_lossy(&out.stdout).contains("[REDACTED]"));
}

#[test]
fn the_proxy_works_for_an_unprivileged_user_in_rootless_podman() {
    let Some(user) = TestUser::from_env() else {
        return;
    };
    if podman_ready_blocking().is_none() {
        return;
    };
    user.build_image();
    let target = Target::start("rootless");
    let (root, ah) = user.reachable_copy(Path::new(env!("CARGO_BIN_EXE_ah")));
    let project = root.path().join("project");
    std::fs::create_dir(&project).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(project.join("a.txt"), "one\n").unwrap_or_else(|e| panic!("{e}"));
    let chown = Command::new("chown")
        .args(["-R", &format!("{0}:{0}", user.name)])
        .arg(&project)
        .status()
        .unwrap_or_else(|e| panic!("chown: {e}"));
    assert!(chown.success());
    let mock = MockServer::start(one_step(&format!(
        "curl -sS --max-time 20 --proxytunnel http://127.0.0.1:{}/",
        target.port
    )));
    let url = mock.url();
    let out = user
        .command(
            &ah,
            &[
                ("ANTHROPIC_BASE_URL", url.as_str()),
                ("ANTHROPIC_API_KEY", "test-key"),
            ],
        )
        .arg("-C")
        .arg(&project)
        .args(["--review", "never", "--network", "proxy"])
        .args(["--allow-host", &format!("127.0.0.1:{}", target.port)])
        .arg("fetch")
        .output()
        .unwrap_or_else(|e| panic!("runuser: {e}"));
    assert!(out.status.success(), "{}", describe(&out));
    let told = step_result(&mock.requests(), 1);
    assert!(told.contains("reached-rootless"), "{told}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&format!(
            "network 127.0.0.1:{0}: allowed by 127.0.0.1:{0}",
            target.port
        )),
        "{}",
        describe(&out)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_sandbox_gets_its_proxy_back() {
    if podman_ready().await.is_none() {
        return;
    }
    let target = Target::start("again");
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap_or_else(|e| panic!("{e}"));
    let id = format!("t{}", ulid::Ulid::generate()).to_lowercase();
    let mut opts = PodmanOptions::new(&id, &work);
    opts.network = NetworkMode::Proxy;
    opts.allow =
        Allowlist::parse(&[format!("127.0.0.1:{}", target.port)]).unwrap_or_else(|e| panic!("{e}"));
    opts.network_log = dir.path().join("network.log");
    opts.env = container_env(NetworkMode::Proxy, &[], &|_| None).0;
    opts.ah_executable = Some(PathBuf::from(env!("CARGO_BIN_EXE_ah")));
    let backend = PodmanBackend::start(&opts)
        .await
        .unwrap_or_else(|e| panic!("start: {e}"));
    let fetch = format!(
        "curl -sS --max-time 20 --proxytunnel http://127.0.0.1:{}/; touch /tmp/before",
        target.port
    );
    let run = |command: String| {
        let backend = &backend;
        async move {
            let out = backend
                .exec(&command, Duration::from_secs(60))
                .await
                .unwrap_or_else(|e| panic!("exec: {e}"));
            String::from_utf8_lossy(&out.stdout).into_owned()
        }
    };
    assert_eq!(run(fetch.clone()).await, "reached-again");
    // Stopped from outside (no command can stop its init): the next
    // command restarts the container, in a new network namespace, and /tmp
    // is empty again.
    let podman = ah_sandbox::podman::find_podman().unwrap_or_else(|e| panic!("{e}"));
    let killed = Command::new(&podman)
        .args(["kill", backend.container()])
        .output()
        .unwrap_or_else(|e| panic!("podman kill: {e}"));
    assert!(killed.status.success(), "{killed:?}");
    let fresh = run("test -e /tmp/before || echo -n new".to_string()).await == "new";
    assert!(fresh, "the container was never restarted");
    assert_eq!(run(fetch.clone()).await, "reached-again");
    let decisions = backend.take_egress();
    assert_eq!(decisions.len(), 2, "{decisions:?}");
    assert!(decisions.iter().all(|d| d.allowed));
    assert_eq!(target.hits.load(Ordering::SeqCst), 2);
    backend
        .shutdown()
        .await
        .unwrap_or_else(|e| panic!("shutdown: {e}"));
}

#[test]
fn network_flags_are_refused_without_the_podman_sandbox() {
    let host = Host::git(&[("README.md", "hi\n")]);
    let out = host
        .ah("http://127.0.0.1:9")
        .args(["--backend", "none", "--network", "proxy", "task"])
        .output()
        .unwrap_or_else(|e| panic!("run ah: {e}"));
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("apply to the podman sandbox"));
    let out = host
        .ah("http://127.0.0.1:9")
        .args(["--allow-host", "crates.io:*", "task"])
        .output()
        .unwrap_or_else(|e| panic!("run ah: {e}"));
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no port wildcard"),
        "{}",
        describe(&out)
    );
}
