//! Snapshots of what a run shows when its output is piped (`NO_COLOR=1`,
//! `--backend none`): the model's text on stdout; the run's first line, one
//! line per tool call with the last lines of a command's output, a write
//! the policy refuses, a step it undoes, steering, the diffstat, what the
//! review did and the end line on stderr; the phase lines of `ah work` and
//! the tick lines of `ah org`. The front end and the run's events are being
//! reworked: these pin today's text so that any change to it is a diff to
//! review, not a surprise (`tests/snapshots/`). What varies between runs is
//! replaced by `support::snap`.

use std::process::{Output, Stdio};
use std::time::Duration;

use serde_json::json;

use crate::support::host::{Host, describe, wait_until};
use crate::support::mock::{MockServer, Reply, Turn};
use crate::support::org::{say, write as org_write};
use crate::support::snap;
use crate::support::work::Script;

/// Text, a command with more output than is shown, a new file, an edit, a
/// command that fails, a write the policy refuses, a command whose step the
/// policy undoes, and the last words (also shown at a terminal by
/// `snapshot_terminal`).
pub(crate) fn whole_run() -> Vec<Turn> {
    vec![
        Turn::reply(
            Reply::new()
                .text("I'll look at the project first.")
                .tool_use(
                    "toolu_1",
                    "bash",
                    json!({"command": "ls; printf 'one\\ntwo\\nthree\\nfour\\n'"}),
                ),
        ),
        Turn::reply(Reply::new().tool_use(
            "toolu_2",
            "write",
            json!({"path": "notes.txt", "content": "hi\nthere\n"}),
        )),
        Turn::reply(Reply::new().tool_use(
            "toolu_3",
            "edit",
            json!({"path": "greet.txt", "old_string": "hello", "new_string": "hi"}),
        )),
        Turn::reply(Reply::new().tool_use(
            "toolu_6",
            "bash",
            json!({"command": "grep -c hello greet.txt"}),
        )),
        Turn::reply(Reply::new().text("CI should check it too.").tool_use(
            "toolu_4",
            "write",
            json!({"path": ".github/workflows/ci.yml", "content": "on: push\n"}),
        )),
        Turn::reply(Reply::new().tool_use(
            "toolu_5",
            "bash",
            json!({"command": "mkdir -p .github/workflows && echo 'on: push' > .github/workflows/ci.yml"}),
        )),
        Turn::reply(Reply::new().text("Done: the greeting is shorter.")),
    ]
}

/// `ah --backend none --review REVIEW` on the whole run, to its end.
fn run_with_review(review: &str) -> (Host, Output) {
    let host = Host::git(&[("greet.txt", "hello world\n")]);
    let mock = MockServer::start(whole_run());
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", review])
        .arg("shorten the greeting")
        .output()
        .unwrap();
    (host, out)
}

#[test]
fn a_whole_run_saved_for_later() {
    let (host, out) = run_with_review("never");
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let _filters = snap::settings(&host).bind_to_scope();
    insta::assert_snapshot!(snap::output(&out));
}

#[test]
fn a_whole_run_applied_on_its_own() {
    let (host, out) = run_with_review("auto");
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let _filters = snap::settings(&host).bind_to_scope();
    insta::assert_snapshot!(snap::output(&out));
}

#[test]
fn a_steered_run() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let started = host.root.path().join("started");
    let go = host.root.path().join("go");
    let wait = format!(
        "touch '{}'; while [ ! -e '{}' ]; do sleep 0.05; done; echo released",
        started.display(),
        go.display()
    );
    let mock = MockServer::start(vec![
        Turn::reply(
            Reply::new()
                .text("Reading it all.")
                .tool_use("toolu_1", "bash", json!({ "command": wait }))
                .tool_use("toolu_2", "read", json!({"path": "a.txt"})),
        ),
        Turn::reply(Reply::new().text("Using grep, then.")),
    ]);
    let first = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "never", "read everything"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("the first ah's command", Duration::from_secs(60), || {
        started.exists()
    });
    let steer = host
        .ah(&mock.url())
        .args(["--steer", "stop reading, use grep"])
        .output()
        .unwrap();
    std::fs::write(&go, "").unwrap();
    let first = first.wait_with_output().unwrap();
    assert_eq!(steer.status.code(), Some(0), "{}", describe(&steer));
    assert_eq!(first.status.code(), Some(0), "{}", describe(&first));
    let _filters = snap::settings(&host).bind_to_scope();
    insta::assert_snapshot!(format!(
        "ah --steer:\n{}\nthe steered ah:\n{}",
        snap::output(&steer),
        snap::output(&first)
    ));
}

#[test]
fn an_ah_work_run() {
    let host = Host::git(&[
        ("greet.txt", "hello\n"),
        ("check.sh", "grep -qx hi greet.txt\n"),
    ]);
    let script = Script::new()
        .bash("cat greet.txt")
        .report("## Approach\nReplace hello.\n## Validation\n```\nsh check.sh\n```\n")
        .end("Planned.")
        .call(
            "edit",
            json!({"path": "greet.txt", "old_string": "hello", "new_string": "hi"}),
        )
        .report("greet.txt now says hi.")
        .end("Done.")
        .bash("sh check.sh && echo pass")
        .report("| sh check.sh | pass |\n\noverall: pass\n")
        .end("Checked.")
        .verdict("done", "check.sh passes")
        .end("Verdict given.");
    let mock = MockServer::start(script.turns());
    let issue = host.root.path().join("ISSUE.md");
    std::fs::write(&issue, "Shorten the greeting\n\ngreet.txt must say `hi`.\n").unwrap();
    let out = host
        .ah(&mock.url())
        .args(["work", "--backend", "none", "--review", "auto"])
        .arg(&issue)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let _filters = snap::settings(&host).bind_to_scope();
    insta::assert_snapshot!(snap::output(&out));
}

#[test]
fn an_ah_org_run() {
    let host = Host::git(&[("README.md", "hello\n")]);
    let mock = MockServer::start_agents(vec![
        (
            "lead",
            vec![
                say("@@coder please write notes.txt saying hi."),
                say("Thanks, all done."),
            ],
        ),
        (
            "coder",
            vec![
                org_write("t1", "notes.txt", "hi\n"),
                say("Written. @@lead have a look."),
            ],
        ),
    ]);
    let out = host
        .ah(&mock.url())
        .args(["org", "--backend", "none", "--review", "never"])
        .args(["--agents", "lead:opus,coder:sonnet", "Write notes."])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let _filters = snap::settings(&host).bind_to_scope();
    insta::assert_snapshot!(snap::output(&out));
}
