//! The patch at `--review ask` in a real terminal (tmux): coloured like git
//! with its changed words highlighted, or without any escape sequence when
//! colours are off; shown in a pager the user chose (a real diff pager from
//! the user's own git configuration gets the patch as it is), never in one
//! the repository names.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use crate::support::host::{Host, git};
use crate::support::mock::{MockServer, Reply, Turn};
use crate::support::tmux::{Tmux, ah_script_with};
use serde_json::json;

/// A model that changes one word of a line.
fn one_word_changed() -> MockServer {
    MockServer::start(vec![
        Turn::reply(Reply::new().tool_use(
            "toolu_1",
            "write",
            json!({"path": "a.txt", "content": "let width = 2;\n"}),
        )),
        Turn::reply(Reply::new().text("changed a")),
    ])
}

const QUESTION: &str = "What should happen to this patch?";
/// The keys that answer the question with "discard" (exit code 3).
const DISCARD: [&str; 5] = ["Down", "Down", "Down", "Down", "Enter"];

#[test]
fn a_pager_the_repository_names_never_runs() {
    let host = Host::git(&[("a.txt", "let width = 1;\n")]);
    let marker = host.root.path().join("pager-ran");
    let pager = host.root.path().join("evil-pager");
    std::fs::write(
        &pager,
        format!("#!/bin/sh\ntouch '{}'\ncat\n", marker.display()),
    )
    .unwrap();
    std::fs::set_permissions(&pager, std::fs::Permissions::from_mode(0o755)).unwrap();
    let pager = pager.display().to_string();
    for key in ["core.pager", "pager.diff", "interactive.diffFilter"] {
        git(&host.project, &["config", key, &pager]);
    }
    host.write(
        ".ah/config.toml",
        &format!("[review]\npager = \"{pager}\"\n"),
    );
    let mock = one_word_changed();
    // No GIT_PAGER, no PAGER: the choice goes on to the user's files.
    let script = ah_script_with(&host, &mock.url(), "NO_COLOR=1", "'change a'");
    let Some(tmux) = Tmux::start(&script.path) else {
        return;
    };
    let screen = tmux.wait_for(QUESTION);
    assert!(screen.contains("+let width = 2;"), "patch shown:\n{screen}");
    let history = tmux.history();
    assert!(
        history.contains("ah: project setting ignored: review.pager (.ah/config.toml)"),
        "the project's setting named:\n{history}"
    );
    tmux.keys(&["Enter"]);
    assert_eq!(script.exit_code(), 0, "{}", tmux.screen());
    assert_eq!(host.read("a.txt"), "let width = 2;\n", "applied");
    assert!(!marker.exists(), "the repository's pager ran");
}

/// The screen, with its escape sequences, once the question is asked,
/// for a run with `vars` and `args`; `None` when tmux is missing.
fn coloured_screen(vars: &str, args: &str) -> Option<String> {
    let host = Host::git(&[("a.txt", "let width = 1;\n")]);
    let mock = one_word_changed();
    let script = ah_script_with(&host, &mock.url(), vars, args);
    let tmux = Tmux::start(&script.path)?;
    tmux.wait_for(QUESTION);
    let screen = tmux.screen_with_escapes();
    tmux.keys(&DISCARD);
    assert_eq!(script.exit_code(), 3, "{}", tmux.screen());
    Some(screen)
}

#[test]
fn no_color_and_color_never_write_no_escape_sequence() {
    for (vars, args) in [
        ("PAGER=cat NO_COLOR=1", "'change a'"),
        ("PAGER=cat", "--color never 'change a'"),
    ] {
        let Some(screen) = coloured_screen(vars, args) else {
            return;
        };
        assert!(
            screen.contains("+let width = 2;"),
            "{vars} {args}: patch shown:\n{screen}"
        );
        assert!(
            !screen.contains('\x1b'),
            "{vars} {args}: an escape sequence:\n{screen:?}"
        );
    }
}

#[test]
fn color_always_colours_the_patch_for_a_plain_pager_and_highlights_the_word() {
    // NO_COLOR is set too: an explicit --color always wins over it.
    let Some(screen) = coloured_screen("PAGER=cat NO_COLOR=1", "--color always 'change a'") else {
        return;
    };
    let line = |text: &str| {
        screen
            .lines()
            .find(|line| strip(line).starts_with(text))
            .unwrap_or_else(|| panic!("no line {text:?}:\n{screen:?}"))
            .to_string()
    };
    let removed = line("-let width = 1;");
    let added = line("+let width = 2;");
    assert!(removed.contains("\x1b[31m"), "red: {removed:?}");
    assert!(added.contains("\x1b[32m"), "green: {added:?}");
    // Only the changed word is in reverse video.
    for (text, word) in [(&removed, "1"), (&added, "2")] {
        let reverse = text.find("\x1b[7m").unwrap_or_else(|| panic!("{text:?}"));
        assert!(
            strip(&text[reverse..]).starts_with(word),
            "the highlight starts at {word:?}: {text:?}"
        );
        assert!(!strip(&text[..reverse]).contains(word), "{text:?}");
    }
    assert!(line("@@ -1 +1 @@").contains("\x1b[36m"), "cyan hunk line");
}

/// `text` without its escape sequences (`ESC [ … letter`).
fn strip(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `diff-so-fancy` on the PATH: installed from npm when missing (as
/// scripts/setup does); `false` when it cannot be.
fn diff_so_fancy() -> bool {
    if which::which("diff-so-fancy").is_ok() {
        return true;
    }
    if which::which("npm").is_ok() {
        let installed = Command::new("npm")
            .args(["install", "-g", "--silent", "diff-so-fancy"])
            .status();
        if installed.is_ok_and(|status| status.success()) {
            return which::which("diff-so-fancy").is_ok();
        }
    }
    false
}

#[test]
fn a_diff_pager_of_the_users_git_configuration_gets_the_patch_as_it_is() {
    if !diff_so_fancy() {
        eprintln!(
            "skipping: diff-so-fancy is not installed and npm cannot install it \
             (scripts/setup installs it: npm install -g diff-so-fancy)"
        );
        return;
    }
    let host = Host::git(&[("a.txt", "let width = 1;\n")]);
    let input = host.root.path().join("pager-input");
    write_user_git_config(
        &host.home,
        &format!(
            "[pager]\n\tdiff = tee '{}' | diff-so-fancy\n",
            input.display()
        ),
    );
    let mock = one_word_changed();
    // Colours on (a terminal, no NO_COLOR): the diff pager still gets the
    // patch uncoloured, as it is.
    let script = ah_script_with(&host, &mock.url(), "", "'change a'");
    let Some(tmux) = Tmux::start(&script.path) else {
        return;
    };
    let screen = tmux.wait_for(QUESTION);
    // diff-so-fancy's own headers stand for git's.
    assert!(screen.contains("modified: a.txt"), "{screen}");
    assert!(screen.contains("@ a.txt:1 @"), "{screen}");
    assert!(!screen.contains("diff --git"), "{screen}");
    assert!(screen.contains("let width = 2;"), "{screen}");
    tmux.keys(&DISCARD);
    assert_eq!(script.exit_code(), 3, "{}", tmux.screen());
    let patch = std::fs::read_to_string(host.run().join("session.patch")).unwrap();
    assert_eq!(
        std::fs::read_to_string(&input).unwrap(),
        patch,
        "the pager got the patch as it is"
    );
}

fn write_user_git_config(home: &Path, text: &str) {
    std::fs::write(home.join(".gitconfig"), text).unwrap();
}
