//! MCP servers (`[mcp.NAME]`) through the real binary, against real
//! servers: `mcp-server-time`, a reference server from PyPI, and our probe
//! on the official Python SDK (`tests/mcp/probe.py`). Their tools are
//! offered as `SERVER__TOOL`; a call is a step (recorded, and undone when
//! it writes a denied path); only listed variables reach a server; a
//! picture reaches the model as an image block; a server that ends during
//! a call or does not answer in time is an error result and starts again
//! at the next call; one that speaks no MCP, or says nothing, is named at
//! the start and the run goes on. With podman, rootful or rootless, the
//! servers run in the run's container (and start again after a command's
//! sweep ended them); with `--backend none`, on the host in the work copy.

use serde_json::json;

use std::path::Path;

use crate::support::host::{Host, describe, git, json_file};
use crate::support::mcp;
use crate::support::mock::{MockServer, RecordedRequest};
use crate::support::org::{call, say};
use crate::support::podman::{TestUser, no_container_left, podman_ready_blocking};

/// The calls both backends make, after the ones of their own; `n` is the
/// number of requests before them.
fn common_calls() -> Vec<crate::support::mock::Turn> {
    vec![
        call(
            "c1",
            "time__get_current_time",
            json!({"timezone": "Asia/Tokyo"}),
        ),
        call(
            "c2",
            "probe__write_note",
            json!({"path": "notes/a.txt", "text": "from mcp"}),
        ),
        call("c3", "probe__variable", json!({"name": "AH_PROBE_VISIBLE"})),
        call(
            "c4",
            "probe__variable",
            json!({"name": "ANTHROPIC_API_KEY"}),
        ),
        call("c5", "probe__picture", json!({})),
        call("c6", "probe__crash", json!({})),
        call("c7", "probe__wait", json!({"seconds": 0})),
        call("c8", "probe__wait", json!({"seconds": 30})),
        call(
            "c9",
            "probe__write_note",
            json!({"path": "secret.txt", "text": "x"}),
        ),
        call("c10", "probe__wait", json!({"seconds": 0})),
        say("done"),
    ]
}

/// Checks what the model was told for [`common_calls`], which began after
/// request `n`, and that the probe was started `starts` times.
fn check_common(requests: &[RecordedRequest], n: usize, host: &Host, starts: usize) {
    let told = |i: usize| requests[n + i].told();
    assert!(told(1).contains("Asia/Tokyo"), "{}", told(1));
    assert_eq!(told(2), "wrote 8 bytes to notes/a.txt");
    assert_eq!(told(3), "visible");
    assert_eq!(told(4), "(unset)", "no secret unless listed");
    let content = requests[n + 5].last_message()["content"]
        .as_array()
        .unwrap()
        .clone();
    assert!(
        told(5).starts_with("[an image (image/png, 1×1 pixels"),
        "{}",
        told(5)
    );
    assert_eq!(content[1]["type"], json!("image"), "{content:?}");
    assert_eq!(content[1]["source"]["media_type"], json!("image/png"));
    assert!(
        told(6).contains("MCP server probe: it ended (its output closed) before answering tools/call; it was stopped and starts again at the next call"),
        "{}",
        told(6)
    );
    assert_eq!(told(7), "woke", "started again after the crash");
    assert!(
        told(8).contains("it did not answer tools/call within 3 s"),
        "{}",
        told(8)
    );
    assert!(told(9).contains("secret.txt"), "{}", told(9));
    assert_eq!(told(10), "woke", "started again after the timeout");
    assert_eq!(host.read("notes/a.txt"), "from mcp");
    assert!(!host.project.join("secret.txt").exists());
    let run = host.run();
    let step = json_file(&run.join(format!("steps/step-{}.meta.json", n + 2)));
    assert_eq!(step["tool"], json!("probe__write_note"));
    let stderr = std::fs::read_to_string(run.join("mcp/probe.stderr")).unwrap();
    assert_eq!(
        stderr.matches("probe: starting").count(),
        starts,
        "one line per start: {stderr}"
    );
}

fn tool_names(request: &RecordedRequest) -> Vec<String> {
    request.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap().to_string())
        .collect()
}

/// The `[mcp.probe]` table of a probe run by the host's Python from
/// `site`, with `PYTHONPATH` and the variables `env` passed.
fn host_probe(site: &Path, env: &[&str]) -> String {
    let env: Vec<String> = ["PYTHONPATH"]
        .iter()
        .chain(env)
        .map(|name| format!("{name:?}"))
        .collect();
    format!(
        "[mcp.probe]\ncommand = \"python3\"\nargs = [{:?}]\nenv = [{}]\n",
        site.join("probe.py").display().to_string(),
        env.join(", ")
    )
}

fn write_config(host: &Host, text: &str) {
    let dir = host.home.join(".config/ah");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), text).unwrap();
}

#[test]
fn with_no_sandbox_the_servers_run_on_the_host_in_the_work_copy() {
    let site = mcp::site();
    let host = Host::git(&[("README.md", "hello\n")]);
    write_config(
        &host,
        &format!(
            "[mcp.time]\ncommand = \"python3\"\nargs = [\"-m\", \"mcp_server_time\", \
             \"--local-timezone\", \"UTC\"]\nenv = [\"PYTHONPATH\"]\n\n{}\
             timeout = 3\ndisabled_tools = [\"where\"]\n",
            host_probe(&site, &["AH_PROBE_VISIBLE"])
        ),
    );
    let mut turns = vec![call("w", "probe__where", json!({}))];
    turns.extend(common_calls());
    // A process left in the server's group before it crashes (c6).
    turns.insert(1, call("k", "probe__leave_child", json!({"seconds": LEFT})));
    let mock = MockServer::start(turns);
    let out = host
        .ah(&mock.url())
        .env("PYTHONPATH", &site)
        .env("AH_PROBE_VISIBLE", "visible")
        .args([
            "--backend",
            "none",
            "--review",
            "auto",
            "--deny",
            "secret.txt",
            "go",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("MCP server time (mcp-time 2026.10.19, on the host, in the work copy: no sandbox): 2 tools: time__get_current_time, time__convert_time"),
        "{stderr}"
    );
    let requests = mock.requests();
    let names = tool_names(&requests[0]);
    assert!(
        names.contains(&"probe__write_note".to_string()),
        "{names:?}"
    );
    assert!(
        !names.contains(&"probe__where".to_string()),
        "disabled: {names:?}"
    );
    let spec = &requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|tool| tool["name"] == "time__get_current_time")
        .unwrap()
        .clone();
    assert!(
        spec["description"]
            .as_str()
            .unwrap()
            .contains("MCP server time, declared in the user's configuration file"),
        "{spec}"
    );
    assert!(
        requests[1].told().contains("not available"),
        "{}",
        requests[1].told()
    );
    assert_eq!(requests[2].told(), "left");
    // At the run's start, after the crash, after the timeout.
    check_common(&requests, 2, &host, 3);
    host.assert_unnamed_in(&requests);
    let left = host_processes(|line| line.trim() == format!("sleep {LEFT}"));
    assert!(
        left.is_empty(),
        "the server's group ended with it: {left:?}"
    );
}

/// How long the process a server leaves would sleep (and how it is known).
const LEFT: &str = "987.654";

#[test]
fn a_text_protocol_model_calls_an_mcp_tool_with_a_tool_block() {
    let site = mcp::site();
    let host = Host::git(&[("README.md", "hello\n")]);
    write_config(&host, &host_probe(&site, &[]));
    let reply = "Writing.\n##tool probe__write_note\n```json\n{\"path\": \"t.txt\", \"text\": \"via text\"}\n```\n";
    let mock = MockServer::start(vec![say(reply), say("Done.")]);
    let out = host
        .ah_openai(&mock.openai_url())
        .env("PYTHONPATH", &site)
        .env("AH_TOOL_PROTOCOL", "text")
        .args([
            "--backend",
            "none",
            "--review",
            "auto",
            "-m",
            "ollama:coder",
            "go",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let requests = mock.requests();
    let system = requests[0].messages()[0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        system.contains("- probe__write_note: Writes text to a file"),
        "{system}"
    );
    assert_eq!(host.read("t.txt"), "via text");
}

#[test]
fn in_podman_the_servers_run_in_the_container_and_bad_ones_are_named() {
    let Some(podman) = podman_ready_blocking() else {
        return;
    };
    let image = mcp::image(&podman, None);
    let host = Host::git(&[("README.md", "hello\n")]);
    write_config(
        &host,
        "[mcp.time]\ncommand = \"mcp-python\"\nargs = [\"-m\", \"mcp_server_time\", \
         \"--local-timezone\", \"UTC\"]\n\n\
         [mcp.probe]\ncommand = \"mcp-python\"\nargs = [\"/opt/mcp/probe.py\"]\n\
         env = [\"AH_PROBE_VISIBLE\"]\ntimeout = 3\n\n\
         [mcp.noisy]\ncommand = \"sh\"\nargs = [\"-c\", \"echo hello; sleep 60\"]\n\n\
         [mcp.mute]\ncommand = \"sleep\"\nargs = [\"60\"]\nstartup_timeout = 2\n",
    );
    let mut turns = vec![
        call("w", "probe__where", json!({})),
        // A command ends every process in the container, the servers too.
        call("b", "bash", json!({"command": "echo ran"})),
    ];
    turns.extend(common_calls());
    let mock = MockServer::start(turns);
    let out = host
        .ah(&mock.url())
        .env("AH_PROBE_VISIBLE", "visible")
        .args(["-c", &format!("sandbox.image={image}")])
        .args(["--review", "auto", "--deny", "secret.txt", "go"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("MCP server noisy did not start: it sent something that is not an MCP message: \"hello\" is not a JSON-RPC message"),
        "{stderr}"
    );
    assert!(
        stderr.contains("MCP server mute did not start: it did not answer initialize within 2 s"),
        "{stderr}"
    );
    let requests = mock.requests();
    let names = tool_names(&requests[0]);
    assert!(
        !names
            .iter()
            .any(|name| name.starts_with("noisy__") || name.starts_with("mute__"))
    );
    let told = requests[1].told();
    assert_eq!(told, "cwd=/work init=ah-init", "in the run's container");
    // At the run's start; after the sweep that ended the servers that did
    // not start; after the bash command; after the crash; after the timeout.
    check_common(&requests, 2, &host, 5);
    host.assert_unnamed_in(&requests);
    let run = host.run();
    let id = run.file_name().unwrap().to_string_lossy().to_string();
    no_container_left(&podman, &id);
    // With podman the probes ran in the container, now gone.
    let left =
        host_processes(|line| line.contains("/opt/mcp/probe.py") && !line.contains("podman"));
    assert!(left.is_empty(), "{left:?} after {}", run.display());
}

/// The command lines of the host's processes that `pick` picks.
fn host_processes(pick: impl Fn(&str) -> bool) -> Vec<String> {
    let listed = std::process::Command::new("ps")
        .args(["-eo", "args"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&listed.stdout)
        .lines()
        .filter(|line| pick(line))
        .map(str::to_string)
        .collect()
}

#[test]
fn a_projects_server_is_named_as_weakening_and_gets_no_secret() {
    let site = mcp::site();
    let host = Host::git(&[("README.md", "hello\n")]);
    std::fs::create_dir_all(host.project.join(".ah")).unwrap();
    std::fs::write(
        host.project.join(".ah/config.toml"),
        host_probe(&site, &["GITHUB_TOKEN"]),
    )
    .unwrap();
    let mock = MockServer::start(vec![
        call("v", "probe__variable", json!({"name": "GITHUB_TOKEN"})),
        say("done"),
    ]);
    let out = host
        .ah(&mock.url())
        .env("PYTHONPATH", &site)
        .env("GITHUB_TOKEN", "ghp_not_for_the_project_0001")
        .args(["--backend", "none", "--review", "never", "go"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("mcp.probe.command=python3 (.ah/config.toml), mcp.probe env += PYTHONPATH (.ah/config.toml)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("MCP server probe: GITHUB_TOKEN is not passed: its name marks a secret"),
        "{stderr}"
    );
    let requests = mock.requests();
    assert_eq!(requests[1].told(), "(unset)");
    let probe = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|tool| tool["name"] == "probe__variable")
        .unwrap()
        .clone();
    assert!(
        probe["description"]
            .as_str()
            .unwrap()
            .contains("MCP server probe, declared in .ah/config.toml;"),
        "{probe}"
    );
    host.assert_unnamed_in(&requests);
    let listed = host.ah(&mock.url()).arg("config").output().unwrap();
    let stdout = String::from_utf8_lossy(&listed.stdout);
    assert!(
        stdout.contains("probe__* = \"MCP server probe, ")
            && stdout.contains("mcp.probe.command = \"python3\""),
        "{stdout}"
    );
}

#[test]
fn an_unprivileged_users_servers_run_in_rootless_podman() {
    let Some(user) = TestUser::from_env() else {
        return;
    };
    let Some(podman) = podman_ready_blocking() else {
        return;
    };
    user.build_image();
    let image = mcp::image(&podman, Some(&user));
    let (root, ah) = user.reachable_copy(Path::new(env!("CARGO_BIN_EXE_ah")));
    let project = root.path().join("project");
    std::fs::create_dir_all(project.join(".ah")).unwrap();
    std::fs::write(project.join("README.md"), "hello\n").unwrap();
    git(&project, &["init", "-q", "-b", "main"]);
    git(&project, &["add", "-A"]);
    git(&project, &["commit", "-q", "-m", "initial"]);
    std::fs::write(
        project.join(".ah/config.toml"),
        "[mcp.probe]\ncommand = \"mcp-python\"\nargs = [\"/opt/mcp/probe.py\"]\n",
    )
    .unwrap();
    let owned = std::process::Command::new("chown")
        .args(["-R", &format!("{0}:{0}", user.name)])
        .arg(&project)
        .status()
        .unwrap();
    assert!(owned.success());
    let mock = MockServer::start(vec![
        call("w", "probe__where", json!({})),
        call(
            "n",
            "probe__write_note",
            json!({"path": "note.txt", "text": "rootless"}),
        ),
        call("b", "bash", json!({"command": "cat note.txt"})),
        call("a", "probe__wait", json!({"seconds": 0})),
        say("done"),
    ]);
    let url = mock.url();
    let env = [
        ("ANTHROPIC_BASE_URL", url.as_str()),
        ("ANTHROPIC_API_KEY", "test-key"),
        ("NO_COLOR", "1"),
    ];
    let out = user
        .command(&ah, &env)
        .arg("-C")
        .arg(&project)
        .args(["-c", &format!("sandbox.image={image}")])
        .args(["--review", "auto", "go"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let requests = mock.requests();
    assert_eq!(requests[1].told(), "cwd=/work init=ah-init");
    assert_eq!(requests[2].told(), "wrote 8 bytes to note.txt");
    assert_eq!(requests[4].told(), "woke");
    let runs: Vec<_> = std::fs::read_dir(project.join(".ah/runs"))
        .unwrap()
        .flatten()
        .collect();
    let stderr = std::fs::read_to_string(runs[0].path().join("mcp/probe.stderr")).unwrap();
    assert_eq!(
        stderr.matches("probe: starting").count(),
        2,
        "started again after the command: {stderr}"
    );
    let note = project.join("note.txt");
    assert_eq!(std::fs::read_to_string(&note).unwrap(), "rootless");
    use std::os::unix::fs::MetadataExt;
    assert_eq!(std::fs::metadata(&note).unwrap().uid(), user.uid);
}

#[test]
fn ah_work_offers_the_servers_only_where_work_may_be_written_and_ends_them_before_a_check() {
    use crate::support::work::{Script, phase_of, tools_of};
    let site = mcp::site();
    let host = Host::git(&[
        ("greet.txt", "hello\n"),
        ("check.sh", "grep -qx hi greet.txt\n"),
    ]);
    write_config(&host, &host_probe(&site, &[]));
    let sleeping = "876.5";
    let script = Script::new()
        .report("## Approach\nWrite hi.\n## Validation\n```\nsh check.sh\n```\n")
        .end("planned")
        .call(
            "probe__write_note",
            json!({"path": "greet.txt", "text": "hi\n"}),
        )
        .call("probe__leave_child", json!({ "seconds": sleeping }))
        .report("greet.txt says hi.")
        .end("done")
        // The check phase: the server, and what it left, are gone.
        .bash(&format!(
            "ps -eo args >/dev/null || echo no-ps; ps -eo args | grep -cx 'sleep {sleeping}'; \
             sh check.sh; echo exit=$?"
        ))
        .report("| sh check.sh | pass |\n\noverall: pass\n")
        .end("checked")
        .verdict("done", "check.sh passes")
        .end("verdict given");
    let mock = MockServer::start(script.turns());
    let issue = host.root.path().join("ISSUE.md");
    std::fs::write(&issue, "Greet\n\ngreet.txt must say `hi`.\n").unwrap();
    let out = host
        .ah(&mock.url())
        .env("PYTHONPATH", &site)
        .args(["work", "--backend", "none", "--review", "auto"])
        .arg(&issue)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let requests = mock.requests();
    let with_probe = |i: usize| {
        tools_of(&requests[i])
            .iter()
            .any(|t| t.starts_with("probe__"))
    };
    assert_eq!(phase_of(&requests[0]), "plan");
    assert!(!with_probe(0), "plan is read-only");
    assert_eq!(phase_of(&requests[2]), "do");
    assert!(with_probe(2));
    assert_eq!(requests[3].told(), "wrote 3 bytes to greet.txt");
    assert_eq!(phase_of(&requests[6]), "check");
    assert!(!with_probe(6), "check is read-only");
    let checked = requests[7].told();
    assert!(checked.starts_with("0\nexit=0\n"), "{checked}");
    assert_eq!(host.read("greet.txt"), "hi\n");
}

#[test]
fn what_a_server_says_of_itself_is_shown_on_one_line_escaped() {
    let liar = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/liar.py");
    let host = Host::git(&[("README.md", "hello\n")]);
    write_config(
        &host,
        &format!(
            "[mcp.liar]\ncommand = \"python3\"\nargs = [{liar:?}]\n\n\
             [mcp.broken]\ncommand = \"python3\"\nargs = [{liar:?}, \"error\"]\n"
        ),
    );
    let mock = MockServer::start(vec![say("done")]);
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "never", "go"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for line in stderr.lines() {
        assert!(
            !line.trim_start().starts_with("review: applied"),
            "a server forged a line of ah's: {line:?}\n{stderr}"
        );
    }
    for raw in ['\r', '\u{1b}', '\u{7}', '\u{202e}', '\u{200b}'] {
        assert!(
            !stderr.contains(raw),
            "{raw:?} reached the terminal:\n{stderr:?}"
        );
    }
    let forged = r"x\nreview: applied\r^[]0;pwned^G<U+202E>evil<U+200B>";
    assert!(
        stderr.contains(&format!(
            "MCP server liar ({forged} 1.0{forged}, on the host"
        )),
        "{stderr}"
    );
    let broken = stderr
        .lines()
        .find(|line| line.starts_with("MCP server broken did not start"))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(
        broken.contains(&format!(
            "it answered initialize with error -32000: {forged}yyy"
        )) && broken.contains("…; its tools are not offered"),
        "{broken}"
    );
    assert!(broken.chars().count() < 600, "unbounded: {broken}");
}

/// The `[mcp.babbler]` table of `tests/mcp/babbler.py`, given to python3
/// whole with `-c` (so that it runs in any sandbox image that has python3).
fn babbler() -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/babbler.py");
    let text = std::fs::read_to_string(&script).unwrap();
    format!("[mcp.babbler]\ncommand = \"python3\"\nargs = [\"-c\", {text:?}]\n")
}

/// Runs a model that calls the babbler once with `backend_args`, and
/// checks that every line it wrote to its standard error was kept.
fn garbage_keeps_the_lines_before_it(backend_args: &[&str]) {
    let host = Host::git(&[("README.md", "hello\n")]);
    write_config(&host, &babbler());
    let mock = MockServer::start(vec![call("b", "babbler__babble", json!({})), say("done")]);
    let out = host
        .ah(&mock.url())
        .args(backend_args)
        .args(["--review", "never", "go"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let told = mock.requests()[1].told();
    assert!(
        told.contains("MCP server babbler: it sent something that is not an MCP message"),
        "{told}"
    );
    let stderr = std::fs::read_to_string(host.run().join("mcp/babbler.stderr")).unwrap();
    let kept: Vec<&str> = stderr
        .lines()
        .filter(|line| line.starts_with("babbler: line "))
        .map(|line| line.trim_end_matches('.'))
        .collect();
    let all: Vec<String> = (1..=12)
        .map(|n| format!("babbler: line {n} of 12 "))
        .collect();
    assert_eq!(kept, all, "{stderr}");
}

#[test]
fn a_server_stopped_for_garbage_keeps_every_line_of_its_standard_error() {
    garbage_keeps_the_lines_before_it(&["--backend", "none"]);
}

#[test]
fn in_podman_a_server_stopped_for_garbage_keeps_every_line_of_its_standard_error() {
    if podman_ready_blocking().is_none() {
        return;
    }
    garbage_keeps_the_lines_before_it(&[]);
}
