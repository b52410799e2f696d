//! The read policy attacked through the real binary: a secret that appears
//! in the project while the run goes on (a `.env`, an editor's swap or
//! backup of it), the target of a withheld link, a nested repository's git
//! configuration, and a project's own policy that tries to turn withholding
//! off. Nothing of the secrets may reach the model, on every backend where
//! the case applies.

use std::os::unix::fs::symlink;
use std::process::Output;
use std::time::Duration;

use crate::support::host::{Host, describe, json_file, wait_until};
use crate::support::mock::{MockServer, Reply, Turn};
use crate::support::podman::podman_ready_blocking;
use crate::support::steps::{bash, script};
use serde_json::json;

const SECRET: &str = "sk-live-0wned1234567890";

/// Runs `steps` on `host` with `backend`; ah's output and all the model
/// was told (every request after the first), which must not hold the secret.
fn run(host: &Host, backend: &str, steps: Vec<(&str, serde_json::Value)>) -> (Output, String) {
    let mock = MockServer::start(script(steps));
    let out = host
        .ah(&mock.url())
        .args(["--backend", backend, "--review", "never", "look"])
        .output()
        .unwrap();
    let told = told(&mock, &out);
    (out, told)
}

/// All the model was told after its first request, once the run succeeded;
/// it must not hold the secret.
fn told(mock: &MockServer, out: &Output) -> String {
    assert_eq!(out.status.code(), Some(0), "{}", describe(out));
    let told: Vec<String> = mock.requests()[1..].iter().map(|r| r.told()).collect();
    let told = told.join("\n");
    assert!(
        !told.contains(SECRET),
        "the secret reached the model:\n{told}"
    );
    told
}

/// A podman run of `host` with the mock, going on in the background.
fn spawn_podman(host: &Host, mock: &MockServer) -> std::process::Child {
    host.ah(&mock.url())
        .args(["--backend", "podman", "--review", "never", "look"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

fn backends() -> Vec<&'static str> {
    let mut backends = vec!["none"];
    if podman_ready_blocking().is_some() {
        backends.push("podman");
    }
    backends
}

#[test]
fn the_target_of_a_withheld_link_is_withheld_too() {
    for backend in backends() {
        let host = Host::git(&[("README.md", "hi\n")]);
        host.write("config/local.env", &format!("KEY={SECRET}\n"));
        symlink("config/local.env", host.project.join(".env")).unwrap();
        let (_, told) = run(
            &host,
            backend,
            vec![bash(
                "cat config/local.env; cat .env; ls config; echo looked",
            )],
        );
        assert!(told.contains("looked"), "{backend}: {told}");
        let manifest = json_file(&host.run().join("manifest.json"));
        assert_eq!(
            manifest["withheld"],
            json!([".env", "config/local.env"]),
            "{backend}"
        );
    }
}

#[test]
fn a_nested_repositorys_git_configuration_is_withheld() {
    for backend in backends() {
        let host = Host::git(&[("README.md", "hi\n")]);
        let nested = host.project.join("vendor/lib");
        std::fs::create_dir_all(&nested).unwrap();
        crate::support::host::git(&nested, &["init", "-q", "-b", "main"]);
        std::fs::write(nested.join("lib.c"), "int x;\n").unwrap();
        crate::support::host::git(&nested, &["add", "-A"]);
        crate::support::host::git(&nested, &["commit", "-q", "-m", "lib"]);
        let config = nested.join(".git/config");
        let mut text = std::fs::read_to_string(&config).unwrap();
        text.push_str(&format!(
            "[http \"https://github.com/\"]\n\textraheader = AUTHORIZATION: basic {SECRET}\n"
        ));
        std::fs::write(&config, text).unwrap();
        let (_, told) = run(
            &host,
            backend,
            vec![bash(
                "cat vendor/lib/.git/config; grep -r extraheader vendor/lib/.git; \
                 git -C vendor/lib log --format=%s; echo looked",
            )],
        );
        assert!(
            told.contains("looked") && told.lines().any(|line| line == "lib"),
            "{backend}: git still works in the nested repository:\n{told}"
        );
    }
}

#[test]
fn a_projects_policy_cannot_let_withheld_files_in() {
    for backend in backends() {
        let host = Host::git(&[("README.md", "hi\n")]);
        host.write(".env", &format!("KEY={SECRET}\n"));
        host.write(".ah/policy.toml", "[read]\ndeny = []\nallow = [\"**\"]\n");
        let (out, told) = run(&host, backend, vec![bash("cat .env; echo looked")]);
        assert!(told.contains("looked"), "{told}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("ignored [read] allow = [\"**\"]")
                && stderr.contains("never let a withheld file into the sandbox"),
            "{backend}: {stderr}"
        );
        let manifest = json_file(&host.run().join("manifest.json"));
        assert_eq!(manifest["withheld"], json!([".env"]), "{backend}");
    }
}

/// Waits until the run's upper folder holds `name` (made by the model's
/// command in the container).
fn wait_for_upper(host: &Host, name: &str) {
    wait_until(name, Duration::from_secs(60), || {
        host.runs()
            .first()
            .is_some_and(|run| run.join("upper").join(name).exists())
    });
}

#[test]
fn files_that_appear_between_steps_stay_withheld() {
    if podman_ready_blocking().is_none() {
        return;
    }
    let host = Host::git(&[("README.md", "hi\n")]);
    let look = "cat .env .env.swp '#.env#' .env~ 2>&1; ls -a; echo looked";
    let turns = vec![
        Turn::reply(Reply::new().tool_use("toolu_1", "bash", json!({"command": "touch started"}))),
        // The model thinks a while: the user's files appear meanwhile.
        Turn::stall(
            Reply::new().tool_use("toolu_2", "bash", json!({ "command": look })),
            0,
            Duration::from_secs(3),
        ),
        Turn::reply(Reply::new().tool_use("toolu_3", "read", json!({"path": ".env"}))),
        Turn::reply(Reply::new().text("done")),
    ];
    let mock = MockServer::start(turns);
    let child = spawn_podman(&host, &mock);
    mock.wait_for_requests(2, Duration::from_secs(120));
    for name in [".env", ".env.swp", "#.env#", ".env~"] {
        host.write(name, &format!("KEY={SECRET}\n"));
    }
    let out = child.wait_with_output().unwrap();
    let told = told(&mock, &out);
    assert!(told.contains("looked"), "{told}");
    assert!(told.contains(".env: No such file"), "{told}");
    let manifest = json_file(&host.run().join("manifest.json"));
    assert_eq!(
        manifest["withheld"],
        json!(["#.env#", ".env", ".env.swp", ".env~"]),
        "{manifest}"
    );
    assert_eq!(host.read(".env"), format!("KEY={SECRET}\n"), "untouched");
}

#[test]
fn a_file_that_appears_while_a_command_runs_withholds_its_output() {
    if podman_ready_blocking().is_none() {
        return;
    }
    let host = Host::git(&[("README.md", "hi\n")]);
    // Waits for the secret (by listing the folder: a lookup of a name not
    // there yet would be remembered by the overlay) and copies it where the
    // next steps would find it.
    let wait = "touch started; for i in $(seq 300); do \
                  if ls -a | grep -qx .env; then cat .env; cp .env stolen.txt; break; fi; \
                  sleep 0.1; \
                done; echo waited";
    let mock = MockServer::start(script(vec![
        bash(wait),
        bash("cat stolen.txt .env 2>&1; echo looked"),
    ]));
    let child = spawn_podman(&host, &mock);
    wait_for_upper(&host, "started");
    host.write(".env", &format!("KEY={SECRET}\n"));
    let out = child.wait_with_output().unwrap();
    told(&mock, &out);
    let requests = mock.requests();
    let first = requests[1].told();
    assert!(
        first.contains("output is withheld and its changes are undone: .env appeared"),
        "{first}"
    );
    let second = requests[2].told();
    assert!(
        second.contains("stolen.txt: No such file") && second.contains(".env: No such file"),
        "{second}"
    );
    let patch = std::fs::read_to_string(host.run().join("session.patch")).unwrap_or_default();
    assert!(!patch.contains(SECRET), "{patch}");
}
