//! `ah work -N` through the real binary, with the mock model: each attempt
//! is a work loop of its own (plan → do → check → act) in a run of its own,
//! all from the one issue message of one work session; the work loop's own
//! verdict decides which attempts passed, and the passing one is applied.
//! `-j 1` makes the attempts take turns, so that each gets its own turns of
//! the mock.

use serde_json::{Value, json};

use crate::support::host::{Host, describe, json_file, query};
use crate::support::mock::MockServer;
use crate::support::podman::{no_container_left, podman_ready_blocking};
use crate::support::work::{Script, work_db};

/// One attempt's phases: it writes `to` into greet.txt, and its act phase
/// says `verdict`. `look` adds a bash call to the plan (another length).
fn attempt(script: Script, to: &str, verdict: &str, look: bool) -> Script {
    let script = match look {
        true => script.bash("cat greet.txt"),
        false => script,
    };
    script
        .report("## Approach\nReplace hello.\n")
        .end("planned")
        .call(
            "edit",
            json!({"path": "greet.txt", "old_string": "hello", "new_string": to}),
        )
        .report("changed")
        .end("done")
        .bash("grep -qx hi greet.txt; echo exit=$?")
        .report(&format!("overall: {verdict}\n"))
        .end("checked")
        .verdict(
            match verdict {
                "pass" => "done",
                _ => "fix",
            },
            "as checked",
        )
        .end("verdict given")
}

fn attempts_of_work_are_judged_by_their_own_verdict(backend: &str) -> Host {
    let host = Host::git(&[("greet.txt", "hello\n")]);
    // Attempt 1 still fails after its one round; attempt 2 passes.
    let script = attempt(Script::new(), "hey", "fail", true);
    let script = attempt(script, "hi", "pass", false);
    let mock = MockServer::start(script.turns());
    let issue = host.root.path().join("ISSUE.md");
    std::fs::write(&issue, "Shorten the greeting\n\ngreet.txt must say `hi`.\n").unwrap();
    let out = host
        .ah(&mock.url())
        .args(["work", "--backend", backend, "--review", "auto", "--json"])
        .args(["-N", "2", "-j", "1", "--max-rounds", "1"])
        .arg(&issue)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(
        host.read("greet.txt"),
        "hi\n",
        "the passing attempt applied"
    );
    assert_eq!(mock.pending_turns(), 0);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("winner: attempt 2"), "{stderr}");

    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let of = |kind: &str| -> Vec<&Value> { events.iter().filter(|e| e["type"] == kind).collect() };
    let starts = of("attempt_start");
    assert_eq!(starts.len(), 2);
    let runs: Vec<&Value> = starts.iter().map(|e| &e["run"]).collect();
    assert_eq!(starts[0]["attempt"], json!(1));
    assert_eq!(starts[1]["attempt"], json!(2));
    let by_run = |kind: &str, run: &Value| -> Vec<Value> {
        of(kind)
            .into_iter()
            .filter(|e| &e["run"] == run)
            .cloned()
            .collect()
    };
    let ends: Vec<Value> = runs
        .iter()
        .map(|run| by_run("attempt_end", run).remove(0))
        .collect();
    assert_eq!(ends[0]["status"], json!("unfinished"));
    assert_eq!(ends[1]["status"], json!("finished"));
    // Each attempt's phases, and only its own tokens: 11 answers of 30
    // tokens against 10 (its plan looked at nothing).
    for (run, answers) in runs.iter().zip([11, 10]) {
        assert_eq!(by_run("phase_start", run).len(), 4);
        let end = by_run("run_end", run).remove(0);
        assert_eq!(end["usage"]["output_tokens"], json!(answers * 30), "{end}");
    }

    // One issue message in the session; both attempts' phases branch from it.
    let db = work_db(&host);
    let roots = query(&db, "SELECT id FROM messages WHERE parent_id IS NULL");
    assert_eq!(roots.len(), 1, "{roots:?}");
    for run in &runs {
        let dir = host.project.join(".ah/runs").join(run.as_str().unwrap());
        let record = json_file(&dir.join("phases/work.json"));
        assert_eq!(record["root_message"], roots[0][0]);
    }
    let briefs = query(
        &db,
        &format!(
            "SELECT count(*) FROM messages WHERE parent_id = '{}'",
            roots[0][0].as_str().unwrap()
        ),
    );
    assert_eq!(briefs[0][0], json!(8), "four phases of two attempts");
    host
}

#[test]
fn attempts_of_work_are_judged_by_their_own_verdict_without_a_sandbox() {
    attempts_of_work_are_judged_by_their_own_verdict("none");
}

#[test]
fn attempts_of_work_are_judged_by_their_own_verdict_on_podman() {
    let Some(podman) = podman_ready_blocking() else {
        return;
    };
    let host = attempts_of_work_are_judged_by_their_own_verdict("podman");
    for run in host.runs() {
        let id = run.file_name().unwrap().to_string_lossy().into_owned();
        no_container_left(&podman, &id);
    }
}
