//! `ah batch TASKS.jsonl` through the real binary with the mock model: bad
//! lines are reported before anything starts; results are appended as
//! tasks end; a batch killed with SIGKILL and started again skips what has
//! a result and runs the interrupted task again; two `auto` tasks of one
//! project both apply, one after the other.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::host::Host;
use crate::support::mock::{MockServer, Reply, Turn};
use serde_json::{Value, json};

/// A task's work: write `file`, then say it is done.
fn writes(n: usize, file: &str) -> [Turn; 2] {
    crate::support::steps::write_then_say(n, file, &format!("{file}\n"), &format!("task {n} done"))
}

fn task(id: &str, project: &Path, review: &str) -> String {
    json!({"id": id, "project": project, "prompt": format!("write for {id}"), "review": review})
        .to_string()
}

fn results(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn bad_lines_are_named_before_anything_starts() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(writes(1, "x.txt").into_iter().collect());
    let tasks = host.root.path().join("tasks.jsonl");
    let lines = [
        task("a", &host.project, "never"),
        r#"{"id": "b", "prompt": "no project"}"#.to_string(),
        r#"{"id": "c", "project": ".", "prompt": "x", "review": "sometimes"}"#.to_string(),
    ];
    std::fs::write(&tasks, lines.join("\n")).unwrap();
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "batch"])
        .arg(&tasks)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("line 2: missing field `project`"),
        "{stderr}"
    );
    assert!(stderr.contains("line 3: review \"sometimes\""), "{stderr}");
    assert!(stderr.contains("nothing was started"), "{stderr}");
    assert!(mock.requests().is_empty());
    assert!(results(&tasks.with_extension("results.jsonl")).is_empty());
}

#[test]
fn a_killed_batch_goes_on_where_it_stopped() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let projects: Vec<_> = ["p1", "p2", "p3"]
        .iter()
        .map(|name| {
            let project = host.root.path().join(name);
            std::fs::create_dir(&project).unwrap();
            crate::support::host::git(&project, &["init", "-q"]);
            project
        })
        .collect();
    // Task 2's first answer takes long enough to be killed meanwhile.
    let mut turns: Vec<Turn> = writes(1, "one.txt").into_iter().collect();
    turns.push(Turn::reply(Reply::new().text("slow")).delay_ms(60_000));
    let mock = MockServer::start(turns);
    let tasks = host.root.path().join("tasks.jsonl");
    let lines: Vec<String> = ["t1", "t2", "t3"]
        .iter()
        .zip(&projects)
        .map(|(id, project)| task(id, project, "never"))
        .collect();
    std::fs::write(&tasks, lines.join("\n")).unwrap();
    let out = host.root.path().join("out.jsonl");
    let batch = || {
        let mut cmd = host.ah(&mock.url());
        cmd.args(["--backend", "none", "-j", "1", "batch"])
            .arg(&tasks)
            .arg("--out")
            .arg(&out);
        cmd
    };
    let mut first = batch().spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while mock.requests().len() < 3 {
        assert!(Instant::now() < deadline, "task 2 never asked the model");
        std::thread::sleep(Duration::from_millis(50));
    }
    first.kill().unwrap();
    first.wait().unwrap();
    let after_kill = results(&out);
    assert_eq!(after_kill.len(), 1, "{after_kill:?}");
    assert_eq!(after_kill[0]["id"], json!("t1"));
    // Again: t1 is skipped, t2 runs anew, t3 runs.
    for turn in writes(2, "two.txt")
        .into_iter()
        .chain(writes(3, "three.txt"))
    {
        mock.push(turn);
    }
    let again = batch().output().unwrap();
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert_eq!(again.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("1 task(s) have a result"), "{stderr}");
    let all = results(&out);
    let ids: Vec<&str> = all.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["t1", "t2", "t3"]);
    for result in &all {
        assert_eq!(result["status"], json!("done"), "{result}");
        assert_eq!(result["files"], json!(1), "{result}");
    }
    assert_eq!(mock.requests().len(), 7, "t1 did not run again");
    let runs_of = |project: &Path| std::fs::read_dir(project.join(".ah/runs")).unwrap().count();
    assert_eq!(runs_of(&projects[1]), 2, "the interrupted run is kept");
    assert_eq!(runs_of(&projects[0]), 1);
}

#[test]
fn two_auto_tasks_of_one_project_both_apply_one_after_the_other() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mut turns: Vec<Turn> = Vec::new();
    // Whichever task asks first writes f1.txt; each then says it is done.
    let [w1, _] = writes(1, "f1.txt");
    let [w2, _] = writes(2, "f2.txt");
    turns.extend([w1, w2]);
    turns.extend([
        Turn::reply(Reply::new().text("done")),
        Turn::reply(Reply::new().text("done")),
    ]);
    let mock = MockServer::start(turns);
    let tasks = host.root.path().join("tasks.jsonl");
    let lines = [
        task("a", &host.project, "auto"),
        task("b", &host.project, "auto"),
    ];
    std::fs::write(&tasks, lines.join("\n")).unwrap();
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "-j", "2", "batch"])
        .arg(&tasks)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(host.read("f1.txt"), "f1.txt\n");
    assert_eq!(host.read("f2.txt"), "f2.txt\n");
    let log = host.git_out(&["log", "--format=%s"]);
    assert_eq!(
        log.lines().filter(|l| l.starts_with("ah: ")).count(),
        2,
        "{log}"
    );
    for result in results(&tasks.with_extension("results.jsonl")) {
        assert_eq!(result["applied"], json!(true), "{result}");
    }
    assert!(stderr.contains("batch: 2 done"), "{stderr}");
}
