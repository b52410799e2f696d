//! The command line's shape: options before a command mean what they mean
//! after it (`ah -C DIR tree` is `ah tree -C DIR`, never a task "tree"),
//! every command runs as itself either way without asking the model
//! anything, a task that is a command's name goes after `--`, and `-n
//! --name X` starts a new session named X.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::Output;

use crate::support::host::{Host, describe, query, run_id};
use crate::support::mock::{MockServer, Reply, Turn};
use crate::support::work::{all_text, phase_of};
use serde_json::{Value, json};

/// `ah ARGS` from outside the project (so only `-C` can find it).
fn ah(host: &Host, mock: &MockServer, args: &[&str]) -> Output {
    host.ah(&mock.url())
        .current_dir(host.root.path())
        .args(args)
        .output()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A run in the session named alpha that writes `file`, its patch saved.
fn write_run(host: &Host, task: &str, file: &str) {
    let mock = MockServer::start(vec![
        Turn::reply(Reply::new().tool_use(
            "t1",
            "write",
            json!({"path": file, "content": "new\n"}),
        )),
        Turn::reply(Reply::new().text(format!("wrote {file}"))),
    ]);
    let project = host.project.to_str().unwrap();
    let args = ["-C", project, "--backend", "none", "--review", "never"];
    let out = ah(
        host,
        &mock,
        &[&args[..], &["--name", "alpha", task]].concat(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
}

/// One command, its own words, the options to give before or after them,
/// the exit code and what its output shows.
struct Case {
    words: Vec<String>,
    options: Vec<String>,
    code: i32,
    shows: String,
}

fn case(words: &str, options: &[&str], code: i32, shows: &str) -> Case {
    Case {
        words: words.split(' ').map(String::from).collect(),
        options: options.iter().map(|o| o.to_string()).collect(),
        code,
        shows: shows.to_string(),
    }
}

fn check(host: &Host, mock: &MockServer, case: &Case, before: bool) -> String {
    let args: Vec<String> = if before {
        [&case.options[..], &case.words[..]].concat()
    } else {
        [&case.words[..], &case.options[..]].concat()
    };
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = ah(host, mock, &args);
    let all = format!("{}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(case.code), "ah {args:?}: {all}");
    assert!(
        all.contains(&case.shows),
        "ah {args:?} should show {:?}: {all}",
        case.shows
    );
    assert!(
        mock.requests().is_empty(),
        "ah {args:?} asked the model: {all}"
    );
    all
}

fn session_id(host: &Host) -> String {
    let db = &host.sessions()[0];
    db.file_stem().unwrap().to_string_lossy().into_owned()
}

#[test]
fn every_command_runs_as_itself_with_options_before_or_after_it() {
    let host = Host::git(&[("a.txt", "one\n")]);
    write_run(&host, "first task", "b.txt");
    write_run(&host, "second task", "c.txt");
    let project = host.project.to_str().unwrap();
    let runs = host.runs();
    let (first, second) = (run_id(&runs[0]), run_id(&runs[1]));
    let id = session_id(&host);
    // Both runs went to alpha: @1–@4 the first, @5–@8 the second.
    assert_eq!(
        query(&host.sessions()[0], "SELECT max(seq) FROM messages"),
        [[json!(8)]]
    );

    let c = ["-C", project];
    let alpha = ["-C", project, "--name", "alpha"];
    let by_id = ["-C", project, "-S", &id[..12]];
    let in_session = |extra: &[&'static str]| [&alpha[..], extra].concat();
    let twice = [
        case("runs", &c, 0, "second task"),
        case("runs prune --dry-run", &c, 0, "would free"),
        case(
            "config",
            &["-C", project, "-c", "model=sonnet"],
            0,
            "sonnet",
        ),
        case(
            "sessions",
            &["-C", project, "--json"],
            0,
            "\"name\":\"alpha\"",
        ),
        case("scan", &in_session(&["--json"]), 0, "\"seq\":8"),
        case("tree", &alpha, 0, "second task"),
        case("branches", &by_id, 0, "@8"),
        case("diff @2 @6", &alpha, 0, "common ancestor: @2"),
        case("show @2", &by_id, 0, "b.txt"),
        case("usage", &alpha, 0, "calls"),
        case("completions bash", &c, 0, "_ah()"),
    ];
    for case in &twice {
        let before = check(&host, &MockServer::start(vec![]), case, true);
        let after = check(&host, &MockServer::start(vec![]), case, false);
        assert_eq!(before, after, "{:?}", case.words);
    }

    // Commands that change something: once each way, on different targets.
    let mock = MockServer::start(vec![]);
    let apply = |run: &str| {
        case(
            &format!("apply {run}"),
            &["-C", project, "--no-commit"],
            0,
            "applied:",
        )
    };
    check(&host, &mock, &apply(&first), true);
    check(&host, &mock, &apply(&second), false);
    assert_eq!(host.read("b.txt"), "new\n");
    assert_eq!(host.read("c.txt"), "new\n");
    assert_eq!(
        host.git_out(&["log", "--format=%s"]).lines().count(),
        1,
        "--no-commit held"
    );

    check(
        &host,
        &mock,
        &case("checkout @4", &alpha, 0, "head is now @4"),
        true,
    );
    check(
        &host,
        &mock,
        &case("checkout @8", &alpha, 0, "head is now @8"),
        false,
    );
    let rm = |at: &str| case(&format!("branch rm {at} --force"), &alpha, 0, "removed");
    check(&host, &mock, &rm("@8"), true);
    check(&host, &mock, &rm("@7"), false);
    assert_eq!(
        query(&host.sessions()[0], "SELECT max(seq) FROM messages"),
        [[json!(6)]]
    );

    // compact asks the model for the summary: the one from -m either way.
    for before in [true, false] {
        let mock = MockServer::start(vec![Turn::reply(Reply::new().text("the summary"))]);
        let (options, words) = (in_session(&["-m", "haiku"]), ["compact"]);
        let args = if before {
            [&options[..], &words[..]].concat()
        } else {
            [&words[..], &options[..]].concat()
        };
        let out = ah(&host, &mock, &args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "ah {args:?}: {}",
            describe(&out)
        );
        let requests = mock.requests();
        assert_eq!(requests.len(), 1, "ah {args:?}");
        let model = requests[0].body["model"].as_str().unwrap_or_default();
        assert!(model.contains("haiku"), "ah {args:?} asked {model}");
    }

    // The sandbox commands, against a podman that records what it is asked
    // and fails: they reach it with the image given either way.
    let bin = host.root.path().join("fake-bin");
    let asked = host.root.path().join("podman-asked");
    std::fs::create_dir_all(&bin).unwrap();
    let podman = bin.join("podman");
    std::fs::write(
        &podman,
        format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\nexit 125\n",
            asked.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&podman, std::fs::Permissions::from_mode(0o755)).unwrap();
    for before in [true, false] {
        for (words, image) in [
            (&["doctor"][..], "doctor-image:1"),
            (&["image", "build", "--registry"], "build-image:1"),
        ] {
            let options = ["-C", project, "--image", image];
            let args = if before {
                [&options[..], words].concat()
            } else {
                [words, &options[..]].concat()
            };
            let out = host
                .ah(&mock.url())
                .current_dir(host.root.path())
                .env("PATH", &bin)
                .args(&args)
                .output()
                .unwrap();
            assert_eq!(
                out.status.code(),
                Some(1),
                "ah {args:?}: {}",
                describe(&out)
            );
            let podman_asked = std::fs::read_to_string(&asked).unwrap_or_default();
            assert!(podman_asked.contains(image), "ah {args:?}: {podman_asked}");
            std::fs::remove_file(&asked).unwrap();
        }
    }
    assert!(mock.requests().is_empty());
}

#[test]
fn work_with_options_before_it_works_on_the_issue() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let issue = host.root.path().join("ISSUE.md");
    std::fs::write(&issue, "Make a.txt say two\n").unwrap();
    let issue = issue.to_str().unwrap();
    let project = host.project.to_str().unwrap();
    let options = ["-C", project, "--backend", "none", "-m", "sonnet"];
    for args in [
        [&options[..], &["work", issue]].concat(),
        [&["work", issue], &options[..]].concat(),
    ] {
        // The plan phase's first request is all this needs to see.
        let mock = MockServer::start(vec![Turn::error(400, "invalid_request_error", "enough")]);
        let out = ah(&host, &mock, &args);
        assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
        let requests = mock.requests();
        assert_eq!(requests.len(), 1, "{}", describe(&out));
        assert_eq!(phase_of(&requests[0]), "plan");
        assert!(all_text(&requests[0]).contains("Make a.txt say two"));
        assert!(
            requests[0].body["model"]
                .as_str()
                .unwrap_or_default()
                .contains("sonnet"),
            "{}",
            requests[0].body["model"]
        );
    }
}

#[test]
fn run_options_before_or_after_a_command_that_has_no_use_for_them_are_ignored() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(vec![]);
    let project = host.project.to_str().unwrap();
    for args in [
        vec!["-C", project, "--backend", "none", "runs"],
        vec!["runs", "-C", project, "--backend", "none"],
        vec!["-C", project, "--backend=none", "-n", "runs"],
        vec!["-n", "runs", "prune", "--dry-run", "-C", project],
    ] {
        let out = ah(&host, &mock, &args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "ah {args:?}: {}",
            describe(&out)
        );
    }
    // Any other option a command does not take is refused, before or after.
    for args in [
        vec!["-C", project, "-m", "haiku", "runs"],
        vec!["runs", "-C", project, "--max-tools", "3"],
        vec!["-C", project, "help"],
    ] {
        let out = ah(&host, &mock, &args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "ah {args:?}: {}",
            describe(&out)
        );
    }
    // Before it, the error also says how to give a task of that name.
    let out = ah(&host, &mock, &["-C", project, "-m", "haiku", "tree"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unexpected argument '-m'"), "{err}");
    assert!(err.contains("ah [OPTIONS] -- tree"), "{err}");
    assert!(mock.requests().is_empty());
    assert!(host.sessions().is_empty(), "no session was started");
}

/// The texts of a request's last message.
fn last_texts(request: &crate::support::mock::RecordedRequest) -> Vec<String> {
    match &request.last_message()["content"] {
        Value::String(text) => vec![text.clone()],
        blocks => blocks
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|b| b["text"].as_str().map(String::from))
            .collect(),
    }
}

#[test]
fn a_command_alone_is_the_command_and_after_dashes_or_among_words_a_task() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let project = host.project.to_str().unwrap();
    // `ah tree` alone is the command: with no session yet it says so.
    let mock = MockServer::start(vec![]);
    let out = ah(&host, &mock, &["-C", project, "tree"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no session"));
    assert!(mock.requests().is_empty());

    let mock = MockServer::start(
        (0..3)
            .map(|i| Turn::reply(Reply::new().text(format!("answer {i}"))))
            .collect(),
    );
    let run = ["-C", project, "--backend", "none", "--review", "never"];
    for task in [
        vec!["--", "tree"],
        vec!["fix the tree view"],
        vec!["-n", "--", "runs", "are", "slow"],
    ] {
        let out = ah(&host, &mock, &[&run[..], &task[..]].concat());
        assert_eq!(out.status.code(), Some(0), "{task:?}: {}", describe(&out));
    }
    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    for (request, prompt) in requests
        .iter()
        .zip(["tree", "fix the tree view", "runs are slow"])
    {
        let texts = last_texts(request);
        assert!(texts.iter().any(|t| t == prompt), "{prompt:?} in {texts:?}");
    }
}

#[test]
fn new_with_a_name_starts_a_named_session_and_refuses_a_name_in_use() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(
        (0..3)
            .map(|i| Turn::reply(Reply::new().text(format!("answer {i}"))))
            .collect(),
    );
    let project = host.project.to_str().unwrap();
    let run = |args: &[&str]| {
        let base = ["-C", project, "--backend", "none", "--review", "never"];
        ah(&host, &mock, &[&base[..], args].concat())
    };
    let ok = |out: Output| assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    ok(run(&["first"]));
    // -n --name: a new session, though the first one is the latest.
    ok(run(&["-n", "--name", "batch-1", "second"]));
    ok(run(&["--name", "batch-1", "third"]));
    let sessions = host.sessions();
    assert_eq!(sessions.len(), 2);
    let named: Vec<&Path> = sessions
        .iter()
        .filter(|db| {
            query(db, "SELECT value FROM context WHERE key = 'name'") == [[json!("batch-1")]]
        })
        .map(|db| db.as_path())
        .collect();
    assert_eq!(named.len(), 1);
    assert_eq!(
        query(
            named[0],
            "SELECT count(*) FROM messages WHERE role = 'user'"
        ),
        [[json!(2)]]
    );

    // The name is taken now: -n says how to continue it instead.
    let out = run(&["-n", "--name", "batch-1", "fourth"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("a session named \"batch-1\" exists already")
            && err.contains("`--name \"batch-1\"` without -n continues it"),
        "{err}"
    );
    // -n still refuses the flags that name another session.
    let out = run(&["-n", "-S", "01", "fifth"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert_eq!(mock.requests().len(), 3);
    assert_eq!(host.sessions().len(), 2);
}
