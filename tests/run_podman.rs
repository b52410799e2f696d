//! Whole runs through the real binary with the default backend (podman), a
//! scripted mock model and a real git host repo: what the sandbox lets a
//! step do and what it stops, how the write policy undoes a step, what
//! `--review auto` decides, how the host moving on during a run is merged,
//! and that no container, secret or network access outlives or escapes a run.
//!
//! Skipped only when podman is absent and `AH_REQUIRE_PODMAN` is unset (see
//! `support::podman`). Where a test must act while a run is going (change the
//! host, kill ah), the scripted bash step waits for the test: it polls for a
//! file the test drops into the run's work copy (and removes it, so the step
//! changes nothing by it), so no step relies on a sleep for its timing.

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use crate::support::host::{Host, describe, files_containing, git, json_file, run_id, wait_until};
use crate::support::mock::{MockServer, Reply, Turn};
use crate::support::podman::{
    containers_of, no_container_left, podman_ready_blocking, sandbox_folders_gone, work_view,
};
use crate::support::steps::{bash, script, write};
use serde_json::{Value, json};

/// How long a test waits for a run to reach a point it synchronises on.
const SYNC: Duration = Duration::from_secs(60);

/// Exit code of a run whose patch was saved but not applied.
const NOT_APPLIED: i32 = 3;

/// Runs ah on `host` with the default backend, `--review review`, to the end.
fn run_ah(host: &Host, mock: &MockServer, review: &str, task: &str) -> Output {
    host.ah(&mock.url())
        .args(["--review", review, task])
        .output()
        .unwrap_or_else(|e| panic!("run ah: {e}"))
}

/// Starts ah on `host` in the background, output captured.
fn spawn_ah(host: &Host, mock: &MockServer, review: &str, task: &str) -> Child {
    host.ah(&mock.url())
        .args(["--review", review, task])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn ah: {e}"))
}

/// The file the test drops into the run's work copy to let a waiting step
/// go on.
const GO: &str = ".ah-test-go";

/// A shell snippet that waits (up to a minute) for the test's [`go`], then
/// removes the file it dropped.
fn wait_for_test() -> String {
    format!(
        "for i in $(seq 600); do [ -e /work/{GO} ] && rm /work/{GO} && exit 0; sleep 0.1; done; \
         echo 'the test never said go' >&2; exit 1"
    )
}

/// Lets the step waiting in [`wait_for_test`] go on.
fn go(host: &Host) {
    let file = work_view(&host.run()).join(GO);
    std::fs::write(&file, "").unwrap_or_else(|e| panic!("{}: {e}", file.display()));
}

/// `line 1\n` … `line n\n`.
fn numbered_lines(n: usize) -> String {
    (1..=n).map(|i| format!("line {i}\n")).collect()
}

/// Paths changed by the host commit `rev`, one per element.
fn committed_paths(host: &Host, rev: &str) -> Vec<String> {
    host.git_out(&["show", "--name-only", "--format=", rev])
        .lines()
        .map(str::to_string)
        .collect()
}

/// Subjects of the shadow repo's history, newest first.
fn shadow_log(run: &Path) -> Vec<String> {
    let git_dir = run.join("shadow.git");
    git(
        run,
        &[
            "--git-dir",
            &git_dir.display().to_string(),
            "log",
            "--format=%s",
            "HEAD",
        ],
    )
    .lines()
    .map(str::to_string)
    .collect()
}

#[test]
fn a_copy_of_ah_under_another_name_keeps_the_command_channel() {
    if podman_ready_blocking().is_none() {
        return;
    }
    let host = Host::git(&[("a.txt", "one\n")]);
    let bin = tempfile::tempdir().unwrap();
    let renamed = bin.path().join("ah-bin");
    std::fs::copy(env!("CARGO_BIN_EXE_ah"), &renamed).unwrap();
    let mock = MockServer::start(script(vec![bash("tr '\\0' ' ' < /proc/$PPID/cmdline")]));
    let ah = host.ah(&mock.url());
    let mut renamed_ah = Command::new(&renamed);
    renamed_ah
        .current_dir(&host.project)
        .env_clear()
        .envs(ah.get_envs().filter_map(|(k, v)| Some((k, v?))));
    let out = renamed_ah
        .args(["--review", "never", "show the agent"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("podman exec each"), "{stderr}");
    let told = mock.requests()[1].told();
    assert!(told.contains("/run/ah-agent __sandbox-agent"), "{told}");
}

#[test]
fn the_project_is_not_in_the_sandbox_and_work_writes_reach_the_host() {
    if podman_ready_blocking().is_none() {
        return;
    }
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(script(vec![
        bash("ls /project; tr '\\0' ' ' < /proc/$PPID/cmdline; echo; touch /x"),
        bash("echo made > /work/made.txt && echo two >> a.txt"),
    ]));
    let out = run_ah(&host, &mock, "auto", "make a file");
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));

    // Outside /work there is no project and nothing to write, and the model
    // was told.
    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    let first = requests[1].told();
    assert!(
        first.contains("cannot access '/project': No such file or directory")
            && first.contains("Read-only file system")
            && first.contains("exit code: 1"),
        "{first}"
    );
    // The command ran under the channel's agent, not a podman exec of its
    // own.
    assert!(first.contains("/run/ah-agent __sandbox-agent"), "{first}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("podman exec each"), "{stderr}");
    let run = host.run();
    let step1 = json_file(&run.join("steps/step-1.meta.json"));
    assert_eq!(step1["exit_code"], json!(1), "{step1}");
    assert_eq!(step1["commit"], Value::Null, "{step1}");
    let err = std::fs::read_to_string(run.join("steps/step-1.err")).unwrap_or_default();
    assert!(err.contains("Read-only file system"), "{err}");

    // The /work writes are the patch, and the host has them.
    let step2 = json_file(&run.join("steps/step-2.meta.json"));
    assert!(step2["commit"].is_string(), "{step2}");
    let patch = std::fs::read_to_string(run.join("session.patch")).unwrap_or_default();
    assert!(
        patch.contains("diff --git a/made.txt b/made.txt")
            && patch.contains("diff --git a/a.txt b/a.txt"),
        "{patch}"
    );
    assert_eq!(host.read("made.txt"), "made\n");
    assert_eq!(host.read("a.txt"), "one\ntwo\n");
    assert_eq!(committed_paths(&host, "HEAD"), ["a.txt", "made.txt"]);
    let manifest = json_file(&run.join("manifest.json"));
    assert_eq!(manifest["backend"], json!("podman"));
    assert_eq!(manifest["image"], json!("localhost/ah-sandbox:latest"));
    assert_eq!(manifest["applied"], json!(true));
    let system = requests[0].body["system"].as_str().unwrap_or_default();
    assert!(
        system.contains("sandbox container") && system.contains("the original is not in the"),
        "{system}"
    );
}

#[test]
fn a_violating_bash_step_is_undone_entirely_and_the_run_goes_on() {
    if podman_ready_blocking().is_none() {
        return;
    }
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(script(vec![
        bash(
            "echo TOKEN=x > .env && mkdir -p .github/workflows \
             && echo 'on: push' > .github/workflows/x.yml && echo fine > normal.txt",
        ),
        bash("ls -A /work"),
        write("ok.txt", "allowed\n"),
    ]));
    let out = run_ah(&host, &mock, "auto", "configure");
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));

    let run = host.run();
    let violation = std::fs::read_to_string(run.join("steps/step-1.violation.txt"))
        .unwrap_or_else(|e| panic!("step-1.violation.txt: {e}"));
    assert!(
        violation.contains(r#"".env" is denied by rule "**/.env""#)
            && violation.contains(r#"".github/workflows/x.yml" is denied by rule ".github/**""#),
        "{violation}"
    );
    assert!(
        !violation.contains("normal.txt"),
        "normal.txt broke no rule: {violation}"
    );
    assert!(!run.join("steps/step-2.violation.txt").exists());
    assert!(!run.join("steps/step-3.violation.txt").exists());

    // The step is recorded with what it changed, but has no commit.
    let step1 = json_file(&run.join("steps/step-1.meta.json"));
    assert_eq!(step1["commit"], Value::Null, "{step1}");
    assert_eq!(step1["is_error"], json!(true), "{step1}");
    let mut changed: Vec<&str> = step1["changed"]
        .as_array()
        .unwrap_or_else(|| panic!("{step1}"))
        .iter()
        .filter_map(|c| c["path"].as_str())
        .collect();
    changed.sort_unstable();
    assert_eq!(changed, [".env", ".github/workflows/x.yml", "normal.txt"]);

    let manifest = json_file(&run.join("manifest.json"));
    assert_eq!(
        manifest["violations"],
        json!([
            {"step": 1, "path": ".env", "rule": "**/.env"},
            {"step": 1, "path": ".github/workflows/x.yml", "rule": ".github/**"},
        ])
    );
    assert_eq!(manifest["steps"], json!(3));

    // The model learnt which paths broke which rule and that all was undone.
    let requests = mock.requests();
    assert_eq!(requests.len(), 4);
    let result = requests[1].tool_result();
    assert_eq!(result["is_error"], json!(true), "{result}");
    let text = requests[1].told();
    assert!(
        text.contains(r#"".env" is denied by rule "**/.env""#)
            && text.contains(r#"".github/workflows/x.yml" is denied by rule ".github/**""#)
            && text.contains("step undone")
            && text.contains("All changes of this step were reverted"),
        "{text}"
    );
    // Inside the container, the next step sees none of the undone files.
    let listing = requests[2].told();
    for gone in [".env", ".github", "normal.txt"] {
        assert!(!listing.contains(gone), "{gone} survived: {listing}");
    }
    assert!(listing.contains("a.txt"), "{listing}");
    for gone in [".env", ".github", "normal.txt"] {
        assert!(
            std::fs::symlink_metadata(run.join("work").join(gone)).is_err(),
            "{gone} is still in the work dir"
        );
    }

    // The later allowed step stood and reached the host, alone.
    assert_eq!(shadow_log(&run)[0], "step 3: write");
    assert_eq!(host.read("ok.txt"), "allowed\n");
    assert_eq!(committed_paths(&host, "HEAD"), ["ok.txt"]);
    for gone in [".env", ".github", "normal.txt"] {
        assert!(!host.project.join(gone).exists(), "{gone} reached the host");
    }
}

#[test]
fn a_denied_write_is_refused_before_it_happens() {
    if podman_ready_blocking().is_none() {
        return;
    }
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(script(vec![
        write(".env", "TOKEN=x\n"),
        write("ok.txt", "fine\n"),
    ]));
    let out = run_ah(&host, &mock, "never", "write env");
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));

    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    let result = requests[1].tool_result();
    assert_eq!(result["is_error"], json!(true), "{result}");
    let text = requests[1].told();
    assert!(
        text.contains("not allowed")
            && text.contains(r#"denied by rule "**/.env""#)
            && text.contains("Nothing was changed"),
        "{text}"
    );

    let run = host.run();
    assert!(std::fs::symlink_metadata(run.join("work/.env")).is_err());
    let step1 = json_file(&run.join("steps/step-1.meta.json"));
    assert_eq!(step1["commit"], Value::Null, "{step1}");
    assert_eq!(step1["changed"], json!([]), "{step1}");
    assert!(
        !run.join("steps/step-1.violation.txt").exists(),
        "a refused write changed nothing, so nothing was undone"
    );
    let manifest = json_file(&run.join("manifest.json"));
    assert_eq!(manifest["violations"], json!([]));
    // Only the allowed write is in the shadow history: baseline, step 2.
    let log = shadow_log(&run);
    assert_eq!(log.len(), 2, "{log:?}");
    assert_eq!(log[0], "step 2: write");
    assert!(!host.project.join(".env").exists());
}

#[test]
fn a_symlink_to_a_host_file_is_a_violation_and_undone() {
    if podman_ready_blocking().is_none() {
        return;
    }
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(script(vec![bash(
        "ln -s /etc/passwd passwd-link && echo fine > also.txt",
    )]));
    let out = run_ah(&host, &mock, "auto", "link");
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));

    let run = host.run();
    let violation = std::fs::read_to_string(run.join("steps/step-1.violation.txt"))
        .unwrap_or_else(|e| panic!("step-1.violation.txt: {e}"));
    assert!(
        violation.contains(r#""passwd-link" is a symlink to "/etc/passwd", outside /work"#),
        "{violation}"
    );
    let manifest = json_file(&run.join("manifest.json"));
    let violations = manifest["violations"]
        .as_array()
        .unwrap_or_else(|| panic!("{manifest}"));
    assert_eq!(violations.len(), 1, "{manifest}");
    assert_eq!(violations[0]["path"], json!("passwd-link"));
    assert_eq!(violations[0]["step"], json!(1));
    let requests = mock.requests();
    assert_eq!(requests[1].tool_result()["is_error"], json!(true));
    assert!(requests[1].told().contains("passwd-link"));
    for gone in ["passwd-link", "also.txt"] {
        assert!(
            std::fs::symlink_metadata(run.join("work").join(gone)).is_err(),
            "{gone} is still in the work dir"
        );
        assert!(std::fs::symlink_metadata(host.project.join(gone)).is_err());
    }
    assert_eq!(
        std::fs::read_to_string(run.join("session.patch")).unwrap_or_default(),
        ""
    );
    assert_eq!(manifest["review"]["decision"], json!("empty"));
}

#[test]
fn files_added_during_the_run_are_copied_out_as_artifacts() {
    if podman_ready_blocking().is_none() {
        return;
    }
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(script(vec![bash(
        "mkdir -p out/logs && echo report > out/logs/report.txt && echo two >> a.txt",
    )]));
    let out = run_ah(&host, &mock, "never", "write a report");
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));

    let run = host.run();
    assert_eq!(
        std::fs::read_to_string(run.join("artifacts/out/logs/report.txt")).unwrap_or_default(),
        "report\n"
    );
    assert!(
        !run.join("artifacts/a.txt").exists(),
        "a changed file is not an added one"
    );
    let manifest = json_file(&run.join("manifest.json"));
    assert_eq!(manifest["artifacts"], json!(["out/logs/report.txt"]));
    assert_eq!(host.read("a.txt"), "one\n", "never leaves the host alone");
}

#[test]
fn auto_review_applies_a_small_clean_patch_and_commits_only_its_paths() {
    if podman_ready_blocking().is_none() {
        return;
    }
    let host = Host::git(&[("a.txt", "one\ntwo\n"), ("mine.txt", "v1\n")]);
    host.write("mine.txt", "v2, not committed\n");
    host.write("scratch.txt", "untracked\n");
    let mock = MockServer::start(script(vec![bash("sed -i s/two/TWO/ a.txt")]));
    let out = run_ah(&host, &mock, "auto", "shout two");
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));

    assert_eq!(host.read("a.txt"), "one\nTWO\n");
    assert_eq!(committed_paths(&host, "HEAD"), ["a.txt"]);
    assert_eq!(
        host.git_out(&["log", "-1", "--format=%s"]).trim(),
        "ah: shout two"
    );
    assert_eq!(host.read("mine.txt"), "v2, not committed\n");
    let status = host.git_out(&["status", "--porcelain"]);
    assert_eq!(status, " M mine.txt\n?? scratch.txt\n");
    let manifest = json_file(&host.run().join("manifest.json"));
    assert_eq!(manifest["applied"], json!(true));
    assert_eq!(manifest["review"]["mode"], json!("auto"));
    assert_eq!(manifest["review"]["decision"], json!("applied"));
    assert_eq!(
        manifest["patch"],
        json!({"files": 1, "added": 1, "removed": 1})
    );
}

/// Runs one bash step with `--review auto` and checks that the patch was
/// saved, not applied, for `reason`, and that the host did not change.
fn assert_saved_not_applied(files: &[(&str, &str)], command: &str, reason: &str) {
    let host = Host::git(files);
    let mock = MockServer::start(script(vec![bash(command)]));
    let out = run_ah(&host, &mock, "auto", "change it");
    assert_eq!(out.status.code(), Some(NOT_APPLIED), "{}", describe(&out));

    let stderr = String::from_utf8_lossy(&out.stderr);
    let run = host.run();
    assert!(
        stderr.contains(&format!("not applied automatically: {reason}"))
            && stderr.contains(&format!("ah apply {}", run_id(&run))),
        "{stderr}"
    );
    let manifest = json_file(&run.join("manifest.json"));
    assert_eq!(manifest["applied"], json!(false));
    assert_eq!(manifest["review"]["decision"], json!("saved"));
    assert_eq!(manifest["review"]["reason"], json!(reason));
    assert!(
        std::fs::metadata(run.join("session.patch")).is_ok_and(|m| m.len() > 0),
        "the patch is saved"
    );
    assert_eq!(host.git_out(&["log", "--format=%s"]).trim(), "initial");
    assert_eq!(host.git_out(&["status", "--porcelain"]), "");
}

#[test]
fn auto_review_saves_a_patch_that_touches_restricted_paths() {
    if podman_ready_blocking().is_none() {
        return;
    }
    assert_saved_not_applied(
        &[("a.txt", "one\n")],
        "printf 'FROM scratch\\n' > Dockerfile && mkdir -p policy && echo 'x = 1' > policy/x.toml",
        "touches restricted path Dockerfile (rule **/Dockerfile); \
         touches restricted path policy/x.toml (rule policy/**)",
    );
}

#[test]
fn auto_review_saves_a_patch_that_is_too_big() {
    if podman_ready_blocking().is_none() {
        return;
    }
    assert_saved_not_applied(
        &[("a.txt", "one\n")],
        "seq 1 401 > big.txt",
        "patch too large: 401 changed lines > 400",
    );
}

#[test]
fn auto_review_saves_a_patch_that_conflicts_with_the_host() {
    if podman_ready_blocking().is_none() {
        return;
    }
    let host = Host::git(&[("conf.txt", &numbered_lines(10))]);
    let mock = MockServer::start(script(vec![bash(&format!(
        "sed -i 's/^line 5$/line 5 by the run/' conf.txt && {}",
        wait_for_test()
    ))]));
    let child = spawn_ah(&host, &mock, "auto", "change line 5");

    // The step has changed the line; now the host changes the same line.
    mock.wait_for_requests(1, SYNC);
    wait_until("the step's change", SYNC, || {
        std::fs::read_to_string(work_view(&host.run()).join("conf.txt"))
            .is_ok_and(|text| text.contains("by the run"))
    });
    let host_version = numbered_lines(10).replace("line 5\n", "line 5 by the host\n");
    host.write("conf.txt", &host_version);
    host.commit_all("host change");
    go(&host);
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("wait for ah: {e}"));
    assert_eq!(out.status.code(), Some(NOT_APPLIED), "{}", describe(&out));

    let run = host.run();
    let step1 = json_file(&run.join("steps/step-1.meta.json"));
    assert_eq!(step1["exit_code"], json!(0), "the step saw the host change");
    let reason = "does not apply cleanly to the host";
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(reason),
        "{}",
        describe(&out)
    );
    let manifest = json_file(&run.join("manifest.json"));
    assert_eq!(manifest["review"]["decision"], json!("saved"));
    assert_eq!(manifest["review"]["reason"], json!(reason));
    assert_eq!(manifest["applied"], json!(false));
    assert_eq!(host.read("conf.txt"), host_version, "host untouched");
    assert_eq!(host.git_out(&["status", "--porcelain"]), "");
    assert_eq!(
        host.git_out(&["log", "--format=%s"]).trim(),
        "host change\ninitial"
    );
}

#[test]
fn a_host_that_moved_on_elsewhere_in_the_file_is_merged_three_way() {
    if podman_ready_blocking().is_none() {
        return;
    }
    let host = Host::git(&[("merge.txt", &numbered_lines(20))]);
    let mock = MockServer::start(script(vec![bash(&format!(
        "sed -i 's/^line 10$/line 10 by the run/' merge.txt && {}",
        wait_for_test()
    ))]));
    let child = spawn_ah(&host, &mock, "auto", "change line 10");

    // Line 13 is inside the patch's 3 lines of context, so only a 3-way
    // merge (not a plain apply) brings both changes together. The host
    // moves on once the step has changed the file: before that the work
    // copy still shows the project's own version of it.
    mock.wait_for_requests(1, SYNC);
    wait_until("the step's change", SYNC, || {
        std::fs::read_to_string(work_view(&host.run()).join("merge.txt"))
            .is_ok_and(|text| text.contains("by the run"))
    });
    host.write(
        "merge.txt",
        &numbered_lines(20).replace("line 13\n", "line 13 by the host\n"),
    );
    host.commit_all("host moved on");
    go(&host);
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("wait for ah: {e}"));
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("3-way apply"),
        "{}",
        describe(&out)
    );

    let expected = numbered_lines(20)
        .replace("line 10\n", "line 10 by the run\n")
        .replace("line 13\n", "line 13 by the host\n");
    assert_eq!(host.read("merge.txt"), expected);
    assert_eq!(
        host.git_out(&["log", "--format=%s"]).trim(),
        "ah: change line 10\nhost moved on\ninitial"
    );
    assert_eq!(committed_paths(&host, "HEAD"), ["merge.txt"]);
    assert_eq!(host.git_out(&["status", "--porcelain"]), "");

    // Proof that the merge was needed: the patch alone does not apply to
    // the host's version (an index holding the host commit before ah's).
    let scratch = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let index = scratch.path().join("index");
    let git_with_index = |args: &[&str]| {
        Command::new("git")
            .current_dir(&host.project)
            .env("GIT_INDEX_FILE", &index)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("git {args:?}: {e}"))
    };
    assert!(git_with_index(&["read-tree", "HEAD~1"]).status.success());
    let patch = host.run().join("session.patch");
    let plain = git_with_index(&["apply", "--cached", "--check", &patch.display().to_string()]);
    assert!(
        !plain.status.success(),
        "a plain apply would have worked, so no merge was tested"
    );
}

#[test]
fn no_container_is_left_after_a_run() {
    let Some(podman) = podman_ready_blocking() else {
        return;
    };
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(script(vec![bash(&wait_for_test())]));
    let child = spawn_ah(&host, &mock, "never", "wait");

    // The container starts while the model is asked; the step runs in it.
    mock.wait_for_requests(1, SYNC);
    let id = run_id(&host.run());
    wait_until("the run's container", SYNC, || {
        !containers_of(&podman, &id).is_empty()
    });
    go(&host);
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("wait for ah: {e}"));
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    no_container_left(&podman, &id);
}

#[test]
fn after_ah_is_killed_the_next_run_removes_its_container_and_continues_the_session() {
    let Some(podman) = podman_ready_blocking() else {
        return;
    };
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(vec![Turn::reply(Reply::new().tool_use(
        "toolu_1",
        "bash",
        json!({"command": "sleep 1000", "timeout": 600}),
    ))]);
    let mut child = spawn_ah(&host, &mock, "never", "sleep");

    mock.wait_for_requests(1, SYNC);
    let killed = run_id(&host.run());
    let container = format!("ah-{killed}");
    wait_until("sleep 1000 in the container", SYNC, || {
        Command::new(&podman)
            .args(["exec", &container, "pgrep", "-fx", "sleep 1000"])
            .output()
            .is_ok_and(|out| out.status.success())
    });
    child.kill().unwrap_or_else(|e| panic!("kill ah: {e}"));
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("wait for ah: {e}"));
    assert_eq!(out.status.code(), None, "ah died of SIGKILL");

    // The next run continues the session, whose last step never finished.
    let again = MockServer::start(vec![Turn::reply(Reply::new().text("nothing to do"))]);
    let out = host
        .ah(&again.url())
        .args(["--review", "never", "again"])
        .output()
        .unwrap_or_else(|e| panic!("run ah: {e}"));
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    // The API rejects a tool_use without a result: the model is told the
    // killed step was interrupted, before the new prompt.
    let messages = again.requests()[0].body["messages"].clone();
    assert_eq!(
        messages[1]["content"][0]["id"],
        json!("toolu_1"),
        "{messages}"
    );
    let next = &messages[2]["content"];
    assert_eq!(next[0]["type"], json!("tool_result"), "{messages}");
    assert_eq!(next[0]["tool_use_id"], json!("toolu_1"));
    assert_eq!(next[0]["is_error"], json!(true));
    assert!(
        next[0]["content"]
            .as_str()
            .is_some_and(|t| t.contains("interrupted")),
        "{messages}"
    );
    assert_eq!(next[1]["text"], json!("again"), "{messages}");
    // Parallel tests start ah too, and any of them may have removed the
    // leftover first; what matters is that it is gone.
    // The next run's cleanup, after it exited, swept what the killed one
    // left: its container and its folders.
    no_container_left(&podman, &killed);
    let runs = host.runs();
    assert_eq!(runs.len(), 2);
    no_container_left(&podman, &run_id(&runs[1]));
    for run in &runs {
        sandbox_folders_gone(run);
    }
}

#[test]
fn host_secrets_never_reach_the_sandbox_or_the_run_record() {
    if podman_ready_blocking().is_none() {
        return;
    }
    let key = "sk-ant-e2e-4f1c9d7a2b";
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(script(vec![bash(
        "env; echo '--- pid 1'; tr '\\0' '\\n' < /proc/1/environ",
    )]));
    let out = host
        .ah(&mock.url())
        .env("MY_SECRET_TOKEN", "s3cret")
        .env("ANTHROPIC_API_KEY", key)
        .args(["--review", "never", "show env"])
        .output()
        .unwrap_or_else(|e| panic!("run ah: {e}"));
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));

    let requests = mock.requests();
    assert_eq!(
        requests[0].header("x-api-key"),
        Some(key),
        "the key was used"
    );
    let env = requests[1].told();
    assert!(
        env.contains("HOME=/tmp") && env.contains("--- pid 1"),
        "{env}"
    );
    for secret in ["s3cret", "MY_SECRET_TOKEN", key, "ANTHROPIC"] {
        assert!(!env.contains(secret), "{secret} is visible inside: {env}");
    }
    let ah_dir = host.project.join(".ah");
    for secret in [key, "s3cret"] {
        let leaks = files_containing(&ah_dir, secret.as_bytes());
        assert!(leaks.is_empty(), "{secret} is stored in {leaks:?}");
    }
}

#[test]
fn a_step_has_no_network() {
    if podman_ready_blocking().is_none() {
        return;
    }
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(vec![]);
    let port = mock
        .url()
        .rsplit(':')
        .next()
        .unwrap_or_else(|| panic!("no port"))
        .to_string();
    let connect = |address: &str, port: &str| {
        format!("python3 -c \"import socket; socket.create_connection(('{address}', {port}), 3)\"")
    };
    mock.push(Turn::reply(Reply::new().tool_use(
        "toolu_1",
        "bash",
        json!({"command": format!(
            "{}; echo tcp=$?; {}; echo mock=$?; getent hosts deb.debian.org; echo dns=$?",
            connect("1.1.1.1", "80"),
            connect("127.0.0.1", &port),
        )}),
    )));
    mock.push(Turn::reply(Reply::new().text("offline")));
    let out = run_ah(&host, &mock, "never", "go online");
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));

    let requests = mock.requests();
    assert_eq!(requests.len(), 2, "the sandbox reached the mock model");
    let text = requests[1].told();
    let status = |name: &str| -> String {
        text.lines()
            .find_map(|line| line.strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("no {name}= in {text}"))
            .to_string()
    };
    assert_ne!(status("tcp"), "0", "TCP connect succeeded: {text}");
    assert_ne!(status("mock"), "0", "the host's loopback answered: {text}");
    assert_ne!(status("dns"), "0", "DNS answered: {text}");
    assert!(
        text.contains("Network is unreachable") || text.contains("Errno"),
        "{text}"
    );
}

#[test]
fn an_out_of_memory_kill_in_a_pipe_is_told_and_leaves_no_file_in_the_project() {
    if podman_ready_blocking().is_none() {
        return;
    }
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(script(vec![
        // The pipeline's status is tail's: 0, whatever happened to python.
        bash("python3 -c \"x = b'x' * (512 << 20); print(len(x))\" | tail -1"),
        bash("echo fine"),
    ]));
    let out = host
        .ah(&mock.url())
        .args(["--memory", "64m", "--review", "auto", "use memory"])
        .output()
        .unwrap_or_else(|e| panic!("run ah: {e}"));
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));

    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    let killed = requests[1].told();
    if ah_sandbox::podman::rootless() {
        // Rootless podman on cgroup v1 ignores --memory: no limit to hit.
        return;
    }
    assert!(
        killed.contains(
            "[ah: the sandbox's memory limit (64m) was hit during this command: the kernel \
             killed a process (out of memory)"
        ) && killed.ends_with("exit code: 0"),
        "the model is told of the kill the exit code hides:\n{killed}"
    );
    let fine = requests[2].told();
    assert_eq!(fine, "fine\nexit code: 0", "a later command is not blamed");

    // conmon's OOM marker did not land in the directory ah ran from.
    let mut entries: Vec<String> = std::fs::read_dir(&host.project)
        .unwrap_or_else(|e| panic!("read the project: {e}"))
        .map(|entry| {
            entry
                .unwrap_or_else(|e| panic!("read the project: {e}"))
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    entries.sort();
    assert_eq!(
        entries,
        [".ah", ".git", "a.txt"],
        "the project is untouched"
    );
    assert_eq!(host.git_out(&["status", "--porcelain"]), "");
}
