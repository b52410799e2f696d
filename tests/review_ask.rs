//! `--review ask` in a real terminal (tmux): the diffstat and the patch are
//! shown, files that act outside the diff marked, then a choice; what the
//! user picks is what happens to the host.

use crate::support::host::{Host, git, json_file};
use crate::support::mock::{MockServer, Reply, Turn};
use crate::support::tmux::{Tmux, ah_script};
use serde_json::json;

fn scripted_change() -> MockServer {
    MockServer::start(vec![
        Turn::reply(Reply::new().tool_use(
            "toolu_1",
            "write",
            json!({"path": "a.txt", "content": "two\n"}),
        )),
        Turn::reply(Reply::new().text("changed a")),
    ])
}

#[test]
fn ask_shows_the_patch_and_applies_on_enter() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = scripted_change();
    let script = ah_script(&host, &mock.url(), "'change a'");
    let Some(tmux) = Tmux::start(&script.path) else {
        return;
    };
    let screen = tmux.wait_for("What should happen to this patch?");
    assert!(screen.contains("a.txt | 2 +-"), "diffstat shown:\n{screen}");
    assert!(screen.contains("+two"), "patch shown:\n{screen}");
    tmux.keys(&["Enter"]);
    assert_eq!(script.exit_code(), 0, "{}", tmux.screen());
    let (before, after) = script.stty();
    assert_eq!(before, after, "the terminal is as it was before ah");
    assert_eq!(host.read("a.txt"), "two\n");
    assert_eq!(
        host.git_out(&["log", "-1", "--format=%s"]).trim(),
        "ah: change a"
    );
}

#[test]
fn ask_discard_leaves_the_host_alone_and_keeps_the_file() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = scripted_change();
    let script = ah_script(&host, &mock.url(), "'change a'");
    let Some(tmux) = Tmux::start(&script.path) else {
        return;
    };
    tmux.wait_for("What should happen to this patch?");
    tmux.keys(&["Down", "Down", "Down", "Down", "Enter"]);
    assert_eq!(script.exit_code(), 3, "{}", tmux.screen());
    assert_eq!(host.read("a.txt"), "one\n");
    let run = host.run();
    assert!(run.join("session.patch").is_file());
    let manifest = json_file(&run.join("manifest.json"));
    assert_eq!(manifest["review"]["decision"], json!("discarded"));
    assert_eq!(manifest["review"]["mode"], json!("ask"));
}

/// A model that writes `files` in one turn (`toolu_1`, `toolu_2`, …), then
/// says it is done.
fn writes_in_one_turn(files: &[(&str, &str)]) -> MockServer {
    let calls = files
        .iter()
        .enumerate()
        .fold(Reply::new(), |reply, (i, (path, content))| {
            reply.tool_use(
                format!("toolu_{}", i + 1),
                "write",
                json!({"path": path, "content": content}),
            )
        });
    MockServer::start(vec![
        Turn::reply(calls),
        Turn::reply(Reply::new().text("changed")),
    ])
}

#[test]
fn ask_choose_files_applies_only_the_chosen_ones_and_saves_the_rest() {
    let host = Host::git(&[("a.txt", "one\n"), ("b.txt", "bee\n")]);
    let mock = writes_in_one_turn(&[("a.txt", "two\n"), ("b.txt", "bee2\n")]);
    let script = ah_script(&host, &mock.url(), "'change a'");
    let Some(tmux) = Tmux::start(&script.path) else {
        return;
    };
    tmux.wait_for("What should happen to this patch?");
    tmux.keys(&["Down", "Enter"]);
    let screen = tmux.wait_for("Files to apply");
    assert!(
        screen.contains("a.txt  +1 −1  +-"),
        "counts and bar shown:\n{screen}"
    );
    // Every file starts chosen: un-choose a.txt, keep b.txt.
    tmux.keys(&["Space", "Enter"]);
    assert_eq!(script.exit_code(), 0, "{}", tmux.screen());
    assert_eq!(host.read("a.txt"), "one\n", "not chosen, not applied");
    assert_eq!(host.read("b.txt"), "bee2\n");
    assert_eq!(
        host.git_out(&["show", "--name-only", "--format=", "HEAD"])
            .trim(),
        "b.txt"
    );
    let run = host.run();
    let rest = std::fs::read_to_string(run.join("rest.patch")).unwrap();
    assert!(
        rest.contains("+++ b/a.txt") && !rest.contains("b.txt"),
        "{rest}"
    );
    let manifest = json_file(&run.join("manifest.json"));
    assert_eq!(manifest["review"]["decision"], json!("partly_applied"));
    assert_eq!(manifest["applied"], json!(true));
    // The rest still applies to the host later.
    let rest_file = run.join("rest.patch");
    git(
        &host.project,
        &["apply", "--3way", &rest_file.display().to_string()],
    );
    assert_eq!(host.read("a.txt"), "two\n");
}

#[test]
fn ask_shows_hidden_characters_and_forged_names_escaped_in_the_pager_and_the_picker() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = writes_in_one_turn(&[
        ("b\n nothing else changed | 1 +", "x\n"),
        ("a.txt", "one /*\u{202E} } ok {*/\n"),
    ]);
    let script = ah_script(&host, &mock.url(), "'change a'");
    let Some(tmux) = Tmux::start(&script.path) else {
        return;
    };
    let screen = tmux.wait_for("What should happen to this patch?");
    assert!(!screen.contains('\u{202E}'), "raw override:\n{screen}");
    assert!(
        screen.contains(" b\\n nothing else changed | 1 + | 1 +"),
        "diffstat:\n{screen}"
    );
    assert!(
        screen.contains("invisible or bidi characters: a.txt:1 (U+202E RIGHT-TO-LEFT OVERRIDE)"),
        "warning:\n{screen}"
    );
    assert!(
        screen.contains("+one /*<U+202E> } ok {*/"),
        "the pager's copy:\n{screen}"
    );
    tmux.keys(&["Down", "Enter"]);
    let screen = tmux.wait_for("Files to apply");
    assert!(
        screen.contains("b\\n nothing else changed | 1 +  +1 −0  +"),
        "picker:\n{screen}"
    );
    tmux.keys(&["Escape"]);
    assert_eq!(script.exit_code(), 3, "{}", tmux.screen());
    assert_eq!(host.read("a.txt"), "one\n");
}

#[test]
fn ask_marks_files_that_run_code_elsewhere_or_instruct_agents() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = writes_in_one_turn(&[
        (".claude/settings.json", "{\"hooks\": {}}\n"),
        ("AGENTS.md", "Run ./setup.sh first.\n"),
        (".tool/config", "x\n"),
        ("a.txt", "two\n"),
    ]);
    let script = ah_script(&host, &mock.url(), "'change a'");
    let Some(tmux) = Tmux::start(&script.path) else {
        return;
    };
    let screen = tmux.wait_for("What should happen to this patch?");
    for mark in [
        " runs code in other tools: .claude/settings.json",
        " instructions for agents: AGENTS.md",
        " dotfile not known to be inert: .tool/config",
    ] {
        assert!(screen.contains(mark), "{mark}:\n{screen}");
    }
    assert!(
        !screen.contains(": a.txt"),
        "a.txt is not marked:\n{screen}"
    );
    tmux.keys(&["Down", "Enter"]);
    let screen = tmux.wait_for("Files to apply");
    // Names and counts in columns, each with its bar.
    for item in [
        ".claude/settings.json  +1 −0  +  (runs code in other tools)",
        "AGENTS.md              +1 −0  +  (instructions for agents)",
        ".tool/config           +1 −0  +  (dotfile not known to be inert)",
    ] {
        assert!(screen.contains(item), "{item}:\n{screen}");
    }
    assert!(
        screen.contains("a.txt                  +1 −1  +-\n"),
        "a.txt unmarked:\n{screen}"
    );
    tmux.keys(&["Escape"]);
    assert_eq!(script.exit_code(), 3, "{}", tmux.screen());
    assert!(!host.project.join("AGENTS.md").exists());
}
