//! Time travel in the podman sandbox: a run forked after step 1 of an
//! earlier run sees that step's files at `/work` inside the container, and
//! its patch applies to the host; a run whose sandbox cannot start leaves
//! the fork point for the next attempt. Skipped only when podman is absent and
//! `AH_REQUIRE_PODMAN` is unset (see `support::podman`).

use crate::support::fork::{context, fork_at, result_message};
use crate::support::host::{Host, describe, json_file, run_id};
use crate::support::mock::{MockServer, Reply, Turn};
use crate::support::podman::podman_ready_blocking;
use crate::support::steps::{bash, script};
use serde_json::json;

#[test]
fn a_forked_run_sees_the_files_of_that_step_in_the_container() {
    if podman_ready_blocking().is_none() {
        return;
    }
    let host = Host::git(&[("keep.txt", "keep\n"), (".gitignore", "build/\n")]);
    host.write("build/cache.txt", "cached\n");
    let db = host.root.path().join("session.db");
    let ah = |mock: &MockServer, review: &str, task: &str| {
        host.ah(&mock.url())
            .arg("--db")
            .arg(&db)
            .args(["--review", review, task])
            .output()
            .unwrap_or_else(|e| panic!("run ah: {e}"))
    };

    let first = MockServer::start(script(vec![
        bash("echo one > /work/a.txt"),
        bash("cat a.txt"),
        bash("echo three > a.txt && echo other > b.txt"),
    ]));
    let out = ah(&first, "never", "first");
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let first_run = host.run();
    let fork_point = result_message(&db, "toolu_1");
    fork_at(&db, &fork_point);

    // A run whose sandbox cannot start leaves the fork point for the next.
    // (Its model answers slower than the start fails: a run that needs no
    // tool does not wait for a start still under way.)
    let unused = MockServer::start(vec![Turn::stall(
        Reply::new().text("hello"),
        1,
        std::time::Duration::from_secs(10),
    )]);
    let out = host
        .ah(&unused.url())
        .arg("--db")
        .arg(&db)
        .args(["--runtime", "/bin/false", "--review", "never", "second"])
        .output()
        .unwrap_or_else(|e| panic!("run ah: {e}"));
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("files restored from run"),
        "{}",
        describe(&out)
    );
    assert_eq!(context(&db, "workspace_at"), Some(fork_point));

    let second = MockServer::start(script(vec![
        bash("pwd; cat /work/a.txt /work/build/cache.txt; ls /work"),
        bash("echo two >> a.txt"),
    ]));
    let out = ah(&second, "auto", "second");
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "files restored from run {} step 1",
            run_id(&first_run)
        )),
        "{stderr}"
    );

    let requests = second.requests();
    let seen = requests[1].told();
    assert!(seen.contains("/work\none\ncached\n"), "{seen}");
    assert!(!seen.contains("three") && !seen.contains("b.txt"), "{seen}");

    assert_eq!(host.read("a.txt"), "one\ntwo\n");
    assert!(!host.project.join("b.txt").exists());
    let second_run = host.runs().pop().unwrap();
    let manifest = json_file(&second_run.join("manifest.json"));
    assert_eq!(manifest["backend"], json!("podman"));
    assert_eq!(manifest["restored_from"]["step"], json!(1));
    assert_eq!(
        manifest["baseline"],
        json_file(&first_run.join("manifest.json"))["baseline"]
    );
    assert_eq!(context(&db, "workspace_at"), None);
}

#[test]
fn a_saved_run_is_continued_in_the_container_with_its_changes() {
    if podman_ready_blocking().is_none() {
        return;
    }
    let host = Host::git(&[("a.txt", "one\n"), ("b.txt", "b\n")]);
    let ah = |mock: &MockServer, task: &str| {
        host.ah(&mock.url())
            .args(["--review", "never", task])
            .output()
            .unwrap_or_else(|e| panic!("run ah: {e}"))
    };
    let first = MockServer::start(script(vec![bash(
        "echo two > /work/a.txt && rm /work/b.txt && mkdir -p /work/n && echo n > /work/n/x",
    )]));
    let out = ah(&first, "change a");
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let saved = host.run();
    assert_eq!(host.read("a.txt"), "one\n", "saved, not applied");

    let second = MockServer::start(script(vec![bash(
        "cd /work && cat a.txt n/x && ls && grep ' /work ' /proc/self/mountinfo",
    )]));
    let out = ah(&second, "go on");
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let requests = second.requests();
    let seen = requests[1].told();
    assert!(seen.starts_with("two\nn\na.txt\nn\n"), "{seen}");
    // Restored without a copy: the run's files lie over the project.
    assert!(seen.contains(" - overlay "), "{seen}");
    let run = host.runs().pop().unwrap();
    let from = &json_file(&run.join("manifest.json"))["restored_from"];
    assert_eq!(from["because"], json!("not_applied"));
    assert_eq!(from["run_id"], json!(run_id(&saved)));
    assert_eq!(host.read("b.txt"), "b\n", "the project is not written");
    assert!(!host.project.join("n").exists());
}
