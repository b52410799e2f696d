//! Tool input validation through the real binary (`--backend none`): a call
//! that breaks its tool's schema is answered with one error result listing
//! every violation, runs nothing, and the model can correct itself.

use crate::support::host::{Host, describe, json_file};
use crate::support::mock::{MockServer, Reply, Turn};
use serde_json::{Value, json};

#[test]
fn a_bad_edit_gets_every_violation_at_once_and_the_corrected_call_succeeds() {
    let host = Host::git(&[("greet.txt", "hello world\n")]);
    let mock = MockServer::start(vec![
        Turn::reply(Reply::new().text("Editing.").tool_use(
            "toolu_1",
            "edit",
            json!({"path": "greet.txt", "new_string": "hi", "replace_all": "false"}),
        )),
        Turn::reply(Reply::new().text("Fixing my call.").tool_use(
            "toolu_2",
            "edit",
            json!({"path": "greet.txt", "old_string": "hello", "new_string": "hi", "replace_all": false}),
        )),
        Turn::reply(Reply::new().text("Done.")),
    ]);
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "auto", "shorten it"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));

    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    let refused = requests[1].tool_result();
    assert_eq!(refused["type"], json!("tool_result"));
    assert_eq!(refused["tool_use_id"], json!("toolu_1"));
    assert_eq!(refused["is_error"], json!(true));
    assert_eq!(
        refused["content"],
        json!(
            "invalid input for edit: missing required field \"old_string\"; \
             field \"replace_all\" must be a boolean, got a string"
        )
    );
    let done = requests[2].tool_result();
    assert_eq!(done["tool_use_id"], json!("toolu_2"));
    assert_ne!(done["is_error"], json!(true), "{done}");
    assert!(
        done["content"]
            .as_str()
            .unwrap()
            .starts_with("Edited /work/greet.txt: 1 replacement"),
        "{done}"
    );

    assert_eq!(host.read("greet.txt"), "hi world\n");
    let steps = host.run().join("steps");
    let refused_step = json_file(&steps.join("step-1.meta.json"));
    assert_eq!(refused_step["is_error"], json!(true));
    assert_eq!(refused_step["commit"], Value::Null, "nothing to commit");
    let edit_step = json_file(&steps.join("step-2.meta.json"));
    assert_eq!(edit_step["is_error"], json!(false));
    assert_eq!(edit_step["changed"][0]["path"], json!("greet.txt"));
}

#[test]
fn a_bash_call_over_the_timeout_limit_runs_nothing() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(vec![
        Turn::reply(Reply::new().tool_use(
            "toolu_1",
            "bash",
            json!({"command": "touch ran.txt", "timeout": 601, "cwd": "/work"}),
        )),
        Turn::reply(Reply::new().text("I see the limit.")),
    ]);
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "auto", "run it"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let result = mock.requests()[1].tool_result().clone();
    assert_eq!(result["is_error"], json!(true));
    assert_eq!(
        result["content"],
        json!(
            "invalid input for bash: field \"timeout\" must be at most 600, got 601; \
             unknown field \"cwd\" (the fields are command, timeout)"
        )
    );
    assert!(!host.project.join("ran.txt").exists());
    let step = json_file(&host.run().join("steps/step-1.meta.json"));
    assert_eq!(step["commit"], Value::Null, "the command never ran: {step}");
}
