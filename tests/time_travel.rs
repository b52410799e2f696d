//! Time travel through the real binary (`--backend none`, a scripted mock
//! model, a real git host repo): a run forked at an earlier message starts
//! from the files of that point, its patch still applies to the host, a
//! fork before any step starts from the host, a pruned source run is a
//! clear error, and `ah runs prune` keeps what it must.
//!
//! The fork itself is made in the session database (`support::fork`), as
//! `ah @N` does.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use crate::support::fork::{context, fork_at, message_at, result_message};
use crate::support::host::{Host, describe, json_file, query, run_id};
use crate::support::mock::{MockServer, Reply, Turn};
use crate::support::steps::{bash, script};
use serde_json::{Value, json};

/// One tool call per turn (`toolu_1`, `toolu_2`, …), then a final answer.
/// The first run: `a.txt` written at step 1, looked at in step 2, changed
/// at step 3 along with a new `b.txt`.
fn first_script() -> Vec<Turn> {
    script(vec![
        ("write", json!({"path": "a.txt", "content": "one\n"})),
        bash("cat a.txt"),
        bash("echo three > a.txt && echo other > b.txt"),
    ])
}

/// `k1\n` … `k10\n`.
const KEEP: &str = "k1\nk2\nk3\nk4\nk5\nk6\nk7\nk8\nk9\nk10\n";

/// A project with an ignored, untracked build folder.
fn project() -> Host {
    let host = Host::git(&[("keep.txt", KEEP), (".gitignore", "build/\n")]);
    host.write("build/cache.txt", "cached\n");
    host
}

fn session_db(host: &Host) -> PathBuf {
    host.root.path().join("session.db")
}

fn ah(host: &Host, mock: &MockServer, extra: &[&str], task: &str) -> Output {
    host.ah(&mock.url())
        .args(["--backend", "none", "--db"])
        .arg(session_db(host))
        .args(extra)
        .arg(task)
        .output()
        .unwrap_or_else(|e| panic!("run ah: {e}"))
}

/// `ah runs prune ARGS` on the project.
fn prune(host: &Host, args: &[&str]) -> String {
    let out = host
        .ah("http://127.0.0.1:9")
        .args(["runs", "prune"])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run ah runs prune: {e}"));
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs the first run to its end (patch saved, not applied); returns its
/// directory.
fn first_run(host: &Host) -> PathBuf {
    let mock = MockServer::start(first_script());
    let out = ah(host, &mock, &["--review", "never"], "first");
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    host.run()
}

#[test]
fn a_fork_restores_the_files_of_that_point_and_its_patch_applies_to_the_host() {
    let host = project();
    let first = first_run(&host);
    let db = session_db(&host);
    // @3 holds the result of step 1 (`ah tree` shows it).
    assert_eq!(message_at(&db, 3), result_message(&db, "toolu_1"));
    // The host moves on meanwhile.
    host.write("keep.txt", &KEEP.replace("k1\n", "K1\n"));
    host.commit_all("host work");

    let mock = MockServer::start(script(vec![
        bash("cat a.txt build/cache.txt; ls"),
        bash("echo two >> a.txt && sed -i s/k9/K9/ keep.txt"),
    ]));
    let out = ah(&host, &mock, &["--review", "auto", "@3"], "second");
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let first_id = run_id(&first);
    assert!(
        stderr(&out).contains(&format!(
            "files restored from run {first_id} step 1 (message @3)"
        )),
        "{}",
        describe(&out)
    );

    // The sandbox saw step 1's files, and the project's ignored ones.
    let requests = mock.requests();
    let seen = requests[1].told();
    assert!(seen.contains("one\ncached\n"), "{seen}");
    assert!(!seen.contains("three") && !seen.contains("b.txt"), "{seen}");
    // The conversation goes on from step 1, and the model is told where
    // its files come from.
    let messages = requests[0].messages();
    assert_eq!(messages.len(), 3, "{messages:?}");
    let prompt = messages[2].to_string();
    assert!(
        prompt.contains("toolu_1") && prompt.contains("after step 1 of run"),
        "{prompt}"
    );

    // The patch (first baseline..new head) went into the host, 3-way.
    assert_eq!(host.read("a.txt"), "one\ntwo\n");
    assert_eq!(
        host.read("keep.txt"),
        KEEP.replace("k1\n", "K1\n").replace("k9", "K9")
    );
    assert!(!host.project.join("b.txt").exists());
    assert_eq!(
        host.git_out(&["log", "-1", "--format=%s"]).trim(),
        "ah: second"
    );
    assert_eq!(host.git_out(&["status", "--porcelain"]), "");
    assert!(stderr(&out).contains("3-way apply"), "{}", describe(&out));

    let second = host.runs().pop().unwrap();
    let manifest = json_file(&second.join("manifest.json"));
    let step_one = json_file(&first.join("steps/step-1.meta.json"));
    let first_manifest = json_file(&first.join("manifest.json"));
    assert_eq!(manifest["baseline"], first_manifest["baseline"]);
    assert_eq!(manifest["restored_from"]["run_id"], json!(first_id));
    assert_eq!(manifest["restored_from"]["step"], json!(1));
    assert_eq!(manifest["restored_from"]["commit"], step_one["commit"]);
    assert_eq!(manifest["restored_from"]["message_seq"], json!(3));
    assert_eq!(manifest["applied"], json!(true));
    assert_eq!(context(&db, "workspace_at"), None);
}

#[test]
fn every_tool_result_records_the_files_after_its_step() {
    let host = project();
    let first = first_run(&host);
    let rows = query(
        &session_db(&host),
        "SELECT details FROM content_blocks WHERE block_type = 'tool_result' ORDER BY rowid",
    );
    let details: Vec<Value> = rows
        .iter()
        .map(|row| serde_json::from_str(row[0].as_str().unwrap()).unwrap())
        .collect();
    assert_eq!(details.len(), 3);
    let meta = |n: u32| json_file(&first.join(format!("steps/step-{n}.meta.json")));
    let baseline = json_file(&first.join("manifest.json"))["baseline"].clone();
    // Step 2 changed nothing: it stands on step 1's commit.
    let heads = [
        meta(1)["commit"].clone(),
        meta(1)["commit"].clone(),
        meta(3)["commit"].clone(),
    ];
    for (n, (detail, head)) in details.iter().zip(&heads).enumerate() {
        assert_eq!(detail["run_id"], json!(run_id(&first)));
        assert_eq!(detail["step"], json!(n + 1));
        assert_eq!(&detail["head"], head, "{detail}");
        assert_eq!(meta(n as u32 + 1)["head"], *head);
        assert_ne!(*head, baseline);
    }
    assert_eq!(details[1]["commit"], Value::Null);
    // The run's end keeps the shadow repo for later forks.
    assert!(first.join("shadow.git/objects").is_dir());
}

#[test]
fn a_fork_before_any_step_starts_from_the_host_files() {
    let host = project();
    first_run(&host);
    let db = session_db(&host);
    fork_at(&db, &message_at(&db, 1));

    let mock = MockServer::start(script(vec![bash(
        "test -e a.txt && echo has-a || echo no-a; cat keep.txt",
    )]));
    let out = ah(&host, &mock, &["--review", "never"], "again");
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(
        stderr(&out).contains("files: the project's current files (no tool ran before message @1)"),
        "{}",
        describe(&out)
    );
    let seen = mock.requests()[1].told();
    assert!(seen.contains("no-a\nk1\n"), "{seen}");
    let manifest = json_file(&host.runs().pop().unwrap().join("manifest.json"));
    assert_eq!(manifest["restored_from"], Value::Null);
    assert_eq!(context(&db, "workspace_at"), None);
}

#[test]
fn a_pruned_source_run_is_a_clear_error_and_no_restore_goes_on() {
    let host = project();
    let first = first_run(&host);
    let db = session_db(&host);
    let fork_point = result_message(&db, "toolu_1");
    fork_at(&db, &fork_point);
    let pruned = prune(&host, &["--older-than", "0s"]);
    assert!(
        pruned.contains(&format!("removed run {}", run_id(&first))),
        "{pruned}"
    );
    assert!(!first.exists());

    let mock = MockServer::start(script(vec![bash(
        "test -e a.txt && echo has-a || echo no-a",
    )]));
    let out = ah(&host, &mock, &["--review", "never"], "second");
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let err = stderr(&out);
    for needle in [
        "message @3",
        "were pruned",
        "ah checkout @N",
        "--no-restore",
    ] {
        assert!(err.contains(needle), "{needle}: {err}");
    }
    assert!(mock.requests().is_empty(), "the model was called");
    assert!(host.runs().is_empty(), "{:?}", host.runs());
    assert_eq!(context(&db, "workspace_at"), Some(fork_point));

    let out = ah(
        &host,
        &mock,
        &["--review", "never", "--no-restore"],
        "second",
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(
        stderr(&out).contains("files: the project's current files (--no-restore)"),
        "{}",
        describe(&out)
    );
    let seen = mock.requests()[1].told();
    assert!(seen.contains("no-a") && !seen.contains("has-a"), "{seen}");
    assert_eq!(context(&db, "workspace_at"), None);
}

#[test]
fn prune_keeps_live_new_and_newest_runs() {
    let host = project();
    let done = |task: &str| {
        let mock = MockServer::start(vec![Turn::reply(Reply::new().text("ok"))]);
        let out = host
            .ah(&mock.url())
            .args(["--backend", "none", "-n", "--review", "never", task])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    };
    done("oldest");
    done("older");
    let [oldest, older] = <[PathBuf; 2]>::try_from(host.runs()).unwrap();

    // A live run: its step waits for a file the test makes.
    let marker = host.root.path().join("go");
    let mock = MockServer::start(script(vec![bash(&wait_for(&marker))]));
    let live = host
        .ah(&mock.url())
        .args(["--backend", "none", "-n", "--review", "never", "live"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    mock.wait_for_requests(1, Duration::from_secs(30));
    let live_run = host.runs().pop().unwrap();
    let ids = [run_id(&oldest), run_id(&older), run_id(&live_run)];

    let dry = prune(&host, &["--older-than", "0s", "--dry-run"]);
    assert!(
        dry.contains(&format!("would remove run {}", ids[0])),
        "{dry}"
    );
    assert!(
        dry.contains(&format!("would remove run {}", ids[1])),
        "{dry}"
    );
    assert!(
        dry.contains(&format!("kept run {}: it is live", ids[2])),
        "{dry}"
    );
    assert_eq!(host.runs().len(), 3);

    let kept_two = prune(&host, &["--older-than", "0s", "--keep", "2"]);
    assert!(
        kept_two.contains(&format!("removed run {}", ids[0])),
        "{kept_two}"
    );
    assert!(kept_two.contains("removed 1 run, freed "), "{kept_two}");
    assert_eq!(host.runs(), [older.clone(), live_run.clone()]);

    let by_default = prune(&host, &[]);
    assert!(by_default.contains("removed 0 runs"), "{by_default}");
    let rest = prune(&host, &["--older-than", "0s"]);
    assert!(rest.contains(&format!("removed run {}", ids[1])), "{rest}");
    assert!(
        rest.contains(&format!("kept run {}: it is live", ids[2])),
        "{rest}"
    );
    assert_eq!(host.runs(), std::slice::from_ref(&live_run));

    std::fs::write(&marker, "").unwrap();
    let out = live.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    // The ended run keeps its shadow repo until it is pruned.
    assert!(live_run.join("shadow.git/objects").is_dir());
    let ended = prune(&host, &["--older-than", "0s", "--dry-run"]);
    assert!(
        ended.contains(&format!("would remove run {}", ids[2])),
        "{ended}"
    );
}

/// A shell snippet that waits (up to a minute) for `path` to exist.
fn wait_for(path: &Path) -> String {
    format!(
        "for i in $(seq 600); do test -e '{}' && exit 0; sleep 0.1; done; exit 1",
        path.display()
    )
}
