//! `ah org` at a real terminal (tmux): an agent's `@@user` question is
//! shown with its name, answered on a `You:` line, and the answer reaches
//! the asking agent, which runs next, as an answer given to the continued
//! org does; each agent's text opens with its name; the terminal is as it
//! was afterwards.

use crate::support::host::{Host, describe};
use crate::support::mock::{MockServer, Reply, Turn};
use crate::support::org::{agents_of, last_user_text, org, say, session_id};
use crate::support::tmux::{Tmux, ah_script};

#[test]
fn a_question_is_answered_at_the_terminal_and_reaches_the_asker() {
    let host = Host::git(&[("README.md", "hello\n")]);
    let mock = MockServer::start_agents(vec![
        (
            "lead",
            vec![say("@@user Red or blue?"), say("Blue then. All done.")],
        ),
        ("coder", vec![say("Nothing to add.")]),
    ]);
    let script = ah_script(
        &host,
        &mock.url(),
        &format!(
            "-C '{}' org --review never --agents lead:opus,coder:opus 'Paint it.'",
            host.project.display()
        ),
    );
    let Some(tmux) = Tmux::start(&script.path) else {
        return;
    };
    tmux.wait_for("lead asks you:");
    // The command that answers later, as it can be typed (long lines wrap).
    let asked = tmux.wait_for("You:").replace('\n', "");
    let later = format!(
        "answer later with `ah org -C {} -S {} \"answer\"`",
        host.project.display(),
        session_id(&host)
    );
    assert!(asked.contains(&later), "{later} in {asked}");
    tmux.keys(&["-l", "Blue"]);
    tmux.keys(&["Enter"]);
    assert_eq!(script.exit_code(), 0, "{}", tmux.screen());
    let screen = tmux.screen();
    assert!(screen.contains("lead: Blue then. All done."), "{screen}");
    assert!(screen.contains("tick 3: coder"), "{screen}");
    assert!(screen.contains("org over after 3 ticks"), "{screen}");

    let requests = mock.requests();
    let agents: Vec<String> = requests.iter().filter_map(|r| r.agent()).collect();
    // The asker runs next with the answer; the coder's task comes after.
    assert_eq!(agents, ["lead", "lead", "coder"]);
    let answer = last_user_text(&requests[1]);
    assert!(
        answer.contains("The user's answer to your question:\n\nBlue"),
        "{answer}"
    );
    let (before, after) = script.stty();
    assert_eq!(before, after, "the terminal is as it was before ah");
}

/// The lead names the coder and asks the user in one message.
fn ask_and_name() -> MockServer {
    MockServer::start_agents(vec![
        (
            "lead",
            vec![
                say("@@coder paint the wall. @@user Red or blue?"),
                say("Blue then."),
            ],
        ),
        ("coder", vec![say("Painted.")]),
    ])
}

#[test]
fn an_answer_schedules_alike_at_the_terminal_and_through_a_continued_org() {
    let agents = ["--review", "never", "--agents", "lead:opus,coder:opus"];
    // Unattended: the run stops at the question; the answer continues it.
    let host = Host::git(&[("README.md", "hello\n")]);
    let mock = ask_and_name();
    let out = org(&host, &mock, &[&agents[..], &["Paint it."]].concat());
    assert_eq!(out.status.code(), Some(5), "{}", describe(&out));
    let id = session_id(&host);
    let out = org(&host, &mock, &["--review", "never", "-S", &id, "Blue"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let unattended = agents_of(&mock);

    let host = Host::git(&[("README.md", "hello\n")]);
    let mock = ask_and_name();
    let script = ah_script(
        &host,
        &mock.url(),
        &format!("org {} 'Paint it.'", agents.join(" ")),
    );
    let Some(tmux) = Tmux::start(&script.path) else {
        return;
    };
    tmux.wait_for("You:");
    tmux.keys(&["-l", "Blue"]);
    tmux.keys(&["Enter"]);
    assert_eq!(script.exit_code(), 0, "{}", tmux.screen());
    let at_terminal = agents_of(&mock);
    // The asker, waiting for its answer, runs next; the coder after it.
    assert_eq!(unattended, ["lead", "lead", "coder"]);
    assert_eq!(at_terminal, unattended);
}

#[test]
fn esc_finishes_the_org_after_the_running_step_and_goes_to_review() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let root = host.root.path();
    let (started, go) = (root.join("started"), root.join("go"));
    let wait = format!(
        "echo two > a.txt; touch '{}'; while [ ! -e '{}' ]; do sleep 0.05; done",
        started.display(),
        go.display()
    );
    let mock = MockServer::start_agents(vec![
        (
            "lead",
            vec![Turn::reply(Reply::new().tool_use(
                "t1",
                "bash",
                serde_json::json!({ "command": wait }),
            ))],
        ),
        ("coder", vec![say("never asked")]),
    ]);
    let script = ah_script(
        &host,
        &mock.url(),
        "org --agents lead:opus,coder:opus 'Change a.'",
    );
    let Some(tmux) = Tmux::start(&script.path) else {
        return;
    };
    tmux.wait_for("keys: i = message the model");
    crate::support::host::wait_until(
        "the command to start",
        std::time::Duration::from_secs(30),
        || started.exists(),
    );
    tmux.keys(&["Escape"]);
    tmux.wait_for("finishing:");
    std::fs::write(&go, "").unwrap();
    let screen = tmux.wait_for("What should happen to this patch?");
    assert!(
        screen.contains("org over after 1 tick: finished by the user"),
        "{screen}"
    );
    // Save only.
    tmux.keys(&["Down", "Down", "Down", "Enter"]);
    assert_eq!(script.exit_code(), 3, "{}", tmux.screen());
    // The coder never ran; the lead's change is in the saved patch.
    assert_eq!(mock.pending_turns_for("coder"), 1);
    let runs = host.runs();
    let patch = std::fs::read_to_string(runs[0].join("session.patch")).unwrap();
    assert!(patch.contains("+two"), "{patch}");
}
