//! `ah work` through the real binary with `--backend none`, a scripted mock
//! model and a real git host repo: the phases in order with their tools,
//! fix rounds, friction, the round limit, a phase that forgets its file,
//! the read-only phases (write/edit refused, a bash change undone and
//! flagged), and what the session database, the phase files and the final
//! patch hold.

use std::process::{Output, Stdio};
use std::time::Duration;

use crate::support::host::{Host, describe, json_file, query, wait_until};
use crate::support::mock::{MockServer, RecordedRequest};
use crate::support::work::{Script, all_text, phase_file, phase_of, tools_of, work_db};
use serde_json::{Value, json};

const ISSUE: &str = "Shorten the greeting\n\ngreet.txt must say `hi`.\n";

/// A project whose validation is `sh check.sh`.
fn project() -> Host {
    Host::git(&[
        ("greet.txt", "hello\n"),
        ("check.sh", "grep -qx hi greet.txt\n"),
    ])
}

/// Runs `ah work ISSUE.md` with the none backend and `extra` flags.
fn work(host: &Host, mock: &MockServer, extra: &[&str]) -> Output {
    let issue = host.root.path().join("ISSUE.md");
    std::fs::write(&issue, ISSUE).unwrap();
    host.ah(&mock.url())
        .args(["work", "--backend", "none"])
        .args(extra)
        .arg(&issue)
        .output()
        .unwrap()
}

fn plan(script: Script) -> Script {
    script
        .bash("cat greet.txt check.sh")
        .report("## Approach\nReplace hello.\n## Validation\n```\nsh check.sh\n```\n")
        .end("planned")
}

fn edit(script: Script, from: &str, to: &str) -> Script {
    script.call(
        "edit",
        json!({"path": "greet.txt", "old_string": from, "new_string": to}),
    )
}

fn check(script: Script, verdict: &str) -> Script {
    script
        .bash("sh check.sh; echo exit=$?")
        .report(&format!(
            "| sh check.sh | {verdict} |\n\noverall: {verdict}\n"
        ))
        .end("checked")
}

/// The phase of each request, in order.
fn phases(requests: &[RecordedRequest]) -> Vec<String> {
    requests.iter().map(phase_of).collect()
}

#[test]
fn done_on_the_first_round_applies_the_patch_and_plan_cannot_write() {
    let host = project();
    let script = Script::new()
        // Plan: both ways of writing are stopped.
        .call(
            "write",
            json!({"path": "greet.txt", "content": "plan wrote\n"}),
        )
        .bash("echo planned >> greet.txt");
    let script = plan(script);
    let script = edit(script, "hello", "hi")
        .report("greet.txt now says hi.")
        .end("done");
    let script = check(script, "pass")
        .verdict("done", "check.sh passes")
        .end("verdict given");
    let mock = MockServer::start(script.turns());
    let out = work(&host, &mock, &["--review", "auto"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(host.read("greet.txt"), "hi\n", "the patch reached the host");
    assert_eq!(host.git_out(&["status", "--porcelain"]), "");

    let requests = mock.requests();
    assert_eq!(
        phases(&requests),
        [
            "plan", "plan", "plan", "plan", "plan", "do", "do", "do", "check", "check", "check",
            "act", "act"
        ]
    );
    assert_eq!(tools_of(&requests[0]), ["read", "bash", "report"]);
    assert_eq!(
        tools_of(&requests[5]),
        ["read", "write", "edit", "bash", "report"]
    );
    assert_eq!(tools_of(&requests[8]), ["read", "bash", "report"]);
    assert_eq!(tools_of(&requests[11]), ["read", "verdict"]);
    // Each phase's prompt names the tools of that phase: plan cannot write.
    let plan_system = requests[0].system();
    assert!(
        plan_system.contains("you have `read`, `bash` and `report`."),
        "{plan_system}"
    );
    for absent in ["`write`", "`edit`", "Prefer", "{{"] {
        assert!(!plan_system.contains(absent), "{absent} in {plan_system}");
    }
    let do_system = requests[5].system();
    assert!(
        do_system.contains("with `read`, `write`, `edit`, `bash` and `report`.")
            && do_system.contains("Prefer `edit` for changes to existing files"),
        "{do_system}"
    );
    let refused = requests[1].told();
    assert!(
        refused.contains("/work is read-only in this phase"),
        "{refused}"
    );
    let undone = requests[2].told();
    assert!(
        undone.contains("step undone") && undone.contains("read-only"),
        "{undone}"
    );
    // Each phase starts from the issue and its brief, not the last phase's talk.
    let first_do = &requests[5].body["messages"];
    assert_eq!(first_do.as_array().unwrap().len(), 1, "{first_do}");
    let brief = all_text(&requests[5]);
    assert!(
        brief.starts_with(ISSUE) && brief.contains("Replace hello."),
        "{brief}"
    );
    assert!(all_text(&requests[11]).contains("overall: pass"));

    let run = host.run();
    assert!(phase_file(&run, "plan/plan.md").contains("## Validation"));
    assert_eq!(phase_file(&run, "do/do-1.md"), "greet.txt now says hi.");
    assert!(phase_file(&run, "check/check-1.md").contains("overall: pass"));
    let verdict: Value = serde_json::from_str(&phase_file(&run, "act/verdict-1.json")).unwrap();
    assert_eq!(
        verdict,
        json!({"decision": "done", "summary": "check.sh passes"})
    );
    let record = json_file(&run.join("phases/work.json"));
    assert_eq!(record["end"], json!({"end": "done"}));
    assert_eq!(record["rounds"], json!(1));
    assert_eq!(record["phases"].as_array().unwrap().len(), 4);

    let patch = std::fs::read_to_string(run.join("session.patch")).unwrap();
    assert!(
        patch.contains("-hello\n+hi\n") && !patch.contains("planned"),
        "{patch}"
    );
    let manifest = json_file(&run.join("manifest.json"));
    assert_eq!(manifest["review"]["decision"], json!("applied"));
    assert_eq!(manifest["task"], json!(ISSUE));
    assert_eq!(manifest["violations"][0]["path"], json!("greet.txt"));
    assert_eq!(manifest["violations"][0]["step"], json!(2));

    // The DB: the issue is the root, each phase a branch under it.
    let db = work_db(&host);
    let roots = query(&db, "SELECT id, role FROM messages WHERE parent_id IS NULL");
    assert_eq!(roots.len(), 1);
    let root = roots[0][0].as_str().unwrap().to_string();
    let branches = query(
        &db,
        &format!(
            "SELECT m.id, m.role, c.content FROM messages m JOIN content_blocks c ON c.message_id = m.id \
             WHERE m.parent_id = '{root}' ORDER BY m.seq"
        ),
    );
    let opening: Vec<&str> = branches
        .iter()
        .map(|row| row[2].as_str().unwrap().lines().next().unwrap())
        .collect();
    assert_eq!(
        opening,
        [
            "[ah: work session, plan phase, round 1 of at most 3]",
            "[ah: work session, do phase, round 1 of at most 3]",
            "[ah: work session, check phase, round 1 of at most 3]",
            "[ah: work session, act phase, round 1 of at most 3]",
        ]
    );
    for (row, phase) in branches.iter().zip(record["phases"].as_array().unwrap()) {
        assert_eq!(row[0], phase["first_message"]);
    }
    let events = query(
        &db,
        "SELECT event_type, count(*) FROM events WHERE event_type IN \
         ('phase_start', 'phase_end', 'verdict', 'work_end') GROUP BY event_type ORDER BY event_type",
    );
    assert_eq!(
        events,
        [
            vec![json!("phase_end"), json!(4)],
            vec![json!("phase_start"), json!(4)],
            vec![json!("verdict"), json!(1)],
            vec![json!("work_end"), json!(1)],
        ]
    );
}

#[test]
fn a_failed_check_gets_a_fix_round_and_a_forgotten_verdict_a_reminder() {
    let host = project();
    let script = edit(plan(Script::new()), "hello", "hi there")
        .report("greet.txt says hi there.")
        .end("done");
    let script = check(script, "fail")
        .verdict(
            "fix",
            "check.sh wants exactly `hi`; greet.txt says `hi there`",
        )
        .end("fix it");
    let script = edit(script, "hi there", "hi")
        .report("now exactly hi")
        .end("done");
    // Check cannot change what it checks: edit is refused, rm is undone.
    let script = edit(script, "hi", "hello");
    let script = check(script.bash("rm greet.txt"), "pass")
        .end("all good") // forgets the verdict
        .verdict("done", "check.sh passes")
        .end("verdict given");
    let mock = MockServer::start(script.turns());
    let out = work(&host, &mock, &["--review", "auto"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(host.read("greet.txt"), "hi\n");

    let requests = mock.requests();
    let second_do = requests
        .iter()
        .filter(|r| phase_of(r) == "do")
        .nth(3)
        .unwrap();
    let brief = all_text(second_do);
    assert!(brief.contains("round 2 of at most 3"), "{brief}");
    assert!(
        brief.contains("greet.txt says `hi there`"),
        "findings: {brief}"
    );
    assert!(
        brief.contains("The check phase found problems"),
        "fix.md: {brief}"
    );
    assert!(brief.contains("overall: fail"), "check report: {brief}");
    let last = requests.last().unwrap();
    assert!(all_text(last).contains("the act phase ended without a verdict"));
    let checks: Vec<&RecordedRequest> =
        requests.iter().filter(|r| phase_of(r) == "check").collect();
    let refused = checks[4].told();
    assert!(
        refused.contains("/work is read-only in this phase"),
        "{refused}"
    );
    let undone = checks[5].told();
    assert!(
        undone.contains("\"greet.txt\" was changed while /work is read-only"),
        "{undone}"
    );
    let ran = checks[6].told();
    assert!(
        ran.contains("exit=0"),
        "greet.txt is back for the check: {ran}"
    );

    let run = host.run();
    assert_eq!(phase_file(&run, "do/do-2.md"), "now exactly hi");
    assert!(phase_file(&run, "check/check-1.md").contains("fail"));
    assert!(phase_file(&run, "act/verdict-1.json").contains("\"fix\""));
    assert!(phase_file(&run, "act/verdict-2.json").contains("\"done\""));
    let record = json_file(&run.join("phases/work.json"));
    assert_eq!(record["rounds"], json!(2));
    let reminded: Vec<&Value> = record["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| &p["reminded"])
        .collect();
    assert_eq!(reminded.iter().filter(|r| ***r == json!(true)).count(), 1);
    assert_eq!(record["phases"][6]["reminded"], json!(true), "the last act");
    // One patch for the whole session: both rounds, from the baseline.
    let patch = std::fs::read_to_string(run.join("session.patch")).unwrap();
    assert!(patch.contains("-hello\n+hi\n"), "{patch}");
}

#[test]
fn friction_records_what_blocked_and_stops_without_applying() {
    let host = project();
    let script = edit(plan(Script::new()), "hello", "hi")
        .report("changed")
        .end("done");
    let script = check(script, "fail")
        .call("verdict", json!({"decision": "maybe", "summary": "unsure"}))
        .verdict("friction", "check.sh needs a shell the sandbox lacks")
        .end("blocked");
    let script = script
        .report("# Friction\nNo shell for check.sh.\n")
        .end("noted");
    let mock = MockServer::start(script.turns());
    let out = work(&host, &mock, &["--review", "auto", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("stopped: the act phase found friction"),
        "{stderr}"
    );
    assert!(stderr.contains("friction.md"), "{stderr}");
    assert_eq!(host.read("greet.txt"), "hello\n", "nothing applied");

    let requests = mock.requests();
    let acts: Vec<&RecordedRequest> = requests.iter().filter(|r| phase_of(r) == "act").collect();
    let invalid = acts[1].told();
    assert!(
        invalid.contains("invalid input for verdict") && invalid.contains("maybe"),
        "{invalid}"
    );
    let friction = requests.iter().find(|r| phase_of(r) == "friction").unwrap();
    assert_eq!(tools_of(friction), ["read", "report"]);
    assert!(all_text(friction).contains("needs a shell the sandbox lacks"));

    let run = host.run();
    assert!(phase_file(&run, "act/friction.md").contains("No shell"));
    let manifest = json_file(&run.join("manifest.json"));
    assert_eq!(manifest["review"]["decision"], json!("stopped"));
    assert_eq!(manifest["applied"], json!(false));

    // --json: the work events come with the agent's, in order.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let events: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let starts: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "phase_start")
        .map(|e| e["phase"].as_str().unwrap())
        .collect();
    assert_eq!(starts, ["plan", "do", "check", "act", "friction"]);
    let verdict = events.iter().find(|e| e["type"] == "verdict").unwrap();
    assert_eq!(verdict["decision"], json!("friction"));
    let end = events.iter().find(|e| e["type"] == "work_end").unwrap();
    assert_eq!(end["end"], json!("friction"));
    assert!(events.iter().any(|e| e["type"] == "review_done"));
}

#[test]
fn the_round_limit_stops_a_session_that_keeps_failing() {
    let host = project();
    let script = edit(plan(Script::new()), "hello", "hi there")
        .report("changed")
        .end("done");
    let script = check(script, "fail")
        .verdict("fix", "still wrong")
        .end("fix it");
    let mock = MockServer::start(script.turns());
    // The limit from the project's configuration (`--max-rounds` overrides it).
    let config = host.project.join(".ah/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(&config, "[work]\nmax_rounds = 1\n").unwrap();
    let out = work(&host, &mock, &["--review", "auto"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("the checks still failed after 1 round"),
        "{stderr}"
    );
    assert_eq!(mock.pending_turns(), 0);
    let act = mock
        .requests()
        .into_iter()
        .find(|r| phase_of(r) == "act")
        .unwrap();
    assert!(all_text(&act).contains("This is the last round"));

    let run = host.run();
    assert!(!run.join("phases/do/do-2.md").exists());
    let record = json_file(&run.join("phases/work.json"));
    assert_eq!(record["end"], json!({"end": "max_rounds"}));
    // The patch is saved for a look, not applied.
    let patch = std::fs::read_to_string(run.join("session.patch")).unwrap();
    assert!(patch.contains("+hi there"), "{patch}");
    assert_eq!(host.read("greet.txt"), "hello\n");
}

#[test]
fn a_phase_that_forgets_its_file_is_reminded_once_then_fails() {
    let host = project();
    let script = Script::new()
        .bash("cat greet.txt")
        .end("I know what to do.")
        .end("Still no plan.");
    let mock = MockServer::start(script.turns());
    let out = work(&host, &mock, &["--review", "auto"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("the plan phase ended twice without plan.md"),
        "{stderr}"
    );
    let requests = mock.requests();
    assert_eq!(requests.len(), 3, "no phase after the plan");
    assert!(all_text(&requests[2]).contains("[ah: the plan phase ended without writing plan.md"));

    let run = host.run();
    assert!(!run.join("phases/plan/plan.md").exists());
    let record = json_file(&run.join("phases/work.json"));
    assert_eq!(
        record["end"],
        json!({"end": "missing_output", "phase": "plan"})
    );
    assert!(run.join("manifest.json").is_file());
    assert_eq!(host.read("greet.txt"), "hello\n");
}

#[test]
fn the_tool_limit_counts_per_phase_and_stops_the_session() {
    let host = project();
    // Plan fits in two calls; do needs three and is stopped after two.
    let script = plan(Script::new());
    let script = edit(script, "hello", "hi")
        .bash("cat greet.txt")
        .bash("sh check.sh");
    let mock = MockServer::start(script.turns());
    let out = work(&host, &mock, &["--review", "auto", "--max-tools", "2"]);
    // The exit code of a plain run stopped by the same limit.
    assert_eq!(out.status.code(), Some(4), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("stopped: the do phase reached the tool call limit (--max-tools 2)"),
        "{stderr}"
    );
    let run = host.run();
    let record = json_file(&run.join("phases/work.json"));
    assert_eq!(
        record["end"],
        json!({"end": "stopped", "phase": "do", "reason": "tool_limit"})
    );
    let patch = std::fs::read_to_string(run.join("session.patch")).unwrap();
    assert!(patch.contains("+hi"), "the patch so far is saved: {patch}");
    assert_eq!(host.read("greet.txt"), "hello\n", "not applied");
}

#[test]
fn usage_errors_name_the_way_to_give_the_issue() {
    let host = project();
    let mock = MockServer::start(Vec::new());
    let out = host
        .ah(&mock.url())
        .args(["work", "--backend", "none"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("ah work ISSUE.md"));
    let out = host
        .ah(&mock.url())
        .args(["work", "--backend", "none", "--issue", "x", "file.md"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(mock.requests().is_empty());
}

#[test]
fn an_interrupt_in_a_phase_saves_the_patch_and_exits_130() {
    let host = project();
    let script = edit(plan(Script::new()), "hello", "hi").bash("touch started && sleep 60");
    let mock = MockServer::start(script.turns());
    let child = host
        .ah(&mock.url())
        .args(["work", "--backend", "none", "--review", "auto"])
        .args(["--issue", ISSUE])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("the do phase's sleep", Duration::from_secs(60), || {
        host.runs()
            .iter()
            // In the overlay's upper folder (a copy where none can be mounted).
            .any(|run| {
                ["upper/started", "work/started"]
                    .iter()
                    .any(|f| run.join(f).exists())
            })
    });
    crate::support::send_signal(child.id(), rustix::process::Signal::INT);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", describe(&out));

    let run = host.run();
    let record = json_file(&run.join("phases/work.json"));
    assert_eq!(
        record["end"],
        json!({"end": "stopped", "phase": "do", "reason": "aborted"})
    );
    let manifest = json_file(&run.join("manifest.json"));
    assert_eq!(manifest["review"]["decision"], json!("aborted"));
    let patch = std::fs::read_to_string(run.join("session.patch")).unwrap();
    assert!(patch.contains("+hi"), "the patch so far is saved: {patch}");
    assert_eq!(host.read("greet.txt"), "hello\n", "not applied");
}
