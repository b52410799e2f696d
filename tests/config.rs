//! Configuration through the real binary: `ah config` shows each value with
//! where it came from; a run takes its settings from the files, the
//! environment and `-c`, with flags on top; bad files name file and line.

use crate::support::host::{Host, describe};
use crate::support::mock::{MockServer, Reply, Turn};
use serde_json::json;

fn write(path: &std::path::Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn line<'a>(text: &'a str, key: &str) -> &'a str {
    text.lines()
        .find(|l| l.starts_with(&format!("{key} = ")))
        .unwrap_or_else(|| panic!("{key} missing:\n{text}"))
}

#[test]
fn ah_config_shows_values_and_their_sources() {
    let host = Host::git(&[("a.txt", "a\n")]);
    let global = host.home.join(".config/ah/config.toml");
    let project = host.project.join(".ah/config.toml");
    write(
        &global,
        "model = \"sonnet\"\n[sandbox]\nmemory = \"2g\"\npids_limit = 64\n",
    );
    write(&project, "[sandbox]\nmemory = \"3g\"\n");
    let out = host
        .ah("http://127.0.0.1:9")
        .env("AH_LOOP_WINDOW", "4")
        .args(["config", "-c", "sandbox.pids_limit=32"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(line(&text, "model").ends_with(&format!("# {}", global.display())));
    assert!(line(&text, "sandbox.memory").contains("\"3g\""));
    assert!(line(&text, "sandbox.memory").ends_with(&format!("# {}", project.display())));
    assert!(line(&text, "agent.loop_window").ends_with("# env AH_LOOP_WINDOW"));
    assert!(line(&text, "sandbox.pids_limit").ends_with("# -c sandbox.pids_limit=32"));
    assert!(line(&text, "retry.attempts").ends_with("# default"));
}

#[test]
fn a_bad_config_file_names_the_file_and_line() {
    let host = Host::git(&[("a.txt", "a\n")]);
    let project = host.project.join(".ah/config.toml");
    write(&project, "model = \"opus\"\n[review]\nmax_line = 10\n");
    let mock = MockServer::start(vec![]);
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "task"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "{}:3: unknown field `max_line`",
            project.display()
        )),
        "{stderr}"
    );
    assert!(mock.requests().is_empty());
}

#[test]
fn a_run_takes_model_review_and_bash_timeout_from_config_and_flags_win() {
    let host = Host::git(&[("a.txt", "a\n")]);
    write(
        &host.project.join(".ah/config.toml"),
        "model = \"fast\"\n[models.fast]\nid = \"claude-fast-9\"\n\
         [review]\nmode = \"auto\"\n[tools]\nbash_timeout = 1\n",
    );
    let mock = MockServer::start(vec![
        Turn::reply(Reply::new().tool_use("toolu_1", "bash", json!({"command": "sleep 5"}))),
        Turn::reply(Reply::new().tool_use(
            "toolu_2",
            "write",
            json!({"path": "a.txt", "content": "b\n"}),
        )),
        Turn::reply(Reply::new().text("done")),
    ]);
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "task"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let requests = mock.requests();
    assert_eq!(requests[0].body["model"], json!("claude-fast-9"));
    let result = &requests[1].body["messages"][2]["content"][0];
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .contains("timed out after 1 s"),
        "{result}"
    );
    assert_eq!(host.read("a.txt"), "b\n", "review.mode = auto applied it");

    // Flags beat the configuration.
    let mock = MockServer::start(vec![
        Turn::reply(Reply::new().tool_use(
            "toolu_1",
            "write",
            json!({"path": "a.txt", "content": "c\n"}),
        )),
        Turn::reply(Reply::new().text("done")),
    ]);
    let out = host
        .ah(&mock.url())
        .args([
            "--backend",
            "none",
            "-m",
            "haiku",
            "--review",
            "never",
            "-n",
            "task",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(
        mock.requests()[0].body["model"],
        json!("claude-haiku-4-5-20251001")
    );
    assert_eq!(host.read("a.txt"), "b\n", "--review never saved only");
}

#[test]
fn configured_network_rules_do_not_stop_an_unsandboxed_run() {
    // The same rules given as flags are refused with --backend none; as the
    // user's defaults for sandboxed runs they are simply not used.
    let host = Host::git(&[("a.txt", "a\n")]);
    write(
        &host.project.join(".ah/config.toml"),
        "[network]\nmode = \"proxy\"\nallow = [\"crates.io:443\"]\n[sandbox]\nenv = [\"CI\"]\n",
    );
    let mock = MockServer::start(vec![Turn::reply(Reply::new().text("done"))]);
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "never", "task"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--allow-host", "x.org:443", "task"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
}
