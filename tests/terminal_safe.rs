//! What reaches the terminal from the model, through the real binary: a file
//! name with a newline cannot forge a line of the diffstat, bidi and
//! invisible characters in a patch are named by file and line and keep
//! `--review auto` from applying it, and the model's text and a command's
//! output reach stdout and stderr with escapes and bidi controls shown, not
//! obeyed.

use crate::support::host::{Host, describe, json_file};
use crate::support::mock::{MockServer, Reply, Turn};
use crate::support::steps::{script, write};
use serde_json::json;

/// A name that, printed raw, would add a line to the diffstat.
const FORGED: &str = "a\n nothing else changed | 1 +";
/// The same name, as ah shows it.
const FORGED_SHOWN: &str = "a\\n nothing else changed | 1 +";

/// No right-to-left override, no escape: nothing the terminal would obey.
fn assert_inert(what: &str, text: &str) {
    assert!(!text.contains('\u{202E}'), "raw U+202E in {what}:\n{text}");
    assert!(!text.contains('\u{1b}'), "raw ESC in {what}:\n{text}");
}

#[test]
fn a_forged_name_and_a_bidi_override_are_shown_escaped_and_not_applied_automatically() {
    let host = Host::git(&[("src/lib.rs", "fn a() {}\n")]);
    let mock = MockServer::start(script(vec![
        write(FORGED, "x\n"),
        write(
            "src/lib.rs",
            "fn a() {}\nlet admin = false; /*\u{202E} } if (admin) { \u{2066}*/\n",
        ),
    ]));
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "auto", "make changes"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{}", describe(&out));
    assert_inert("stderr", &stderr);

    // The tool line and the diffstat show the name on one line.
    assert!(
        stderr.contains(&format!("write {FORGED_SHOWN}\n")),
        "tool line:\n{stderr}"
    );
    assert!(
        stderr.contains(&format!(" {FORGED_SHOWN} | 1 +\n")),
        "diffstat:\n{stderr}"
    );
    assert!(
        !stderr
            .lines()
            .any(|l| l.starts_with(" nothing else changed")),
        "a forged diffstat line:\n{stderr}"
    );
    assert!(
        stderr.contains(" 2 files changed, 2 insertions(+)\n"),
        "{stderr}"
    );

    // The review says where the hidden characters are.
    assert!(
        stderr.contains(
            "warning: the patch holds invisible or bidi characters: \
             src/lib.rs:2 (U+202E RIGHT-TO-LEFT OVERRIDE), \
             src/lib.rs:2 (U+2066 LEFT-TO-RIGHT ISOLATE)\n"
        ),
        "warning:\n{stderr}"
    );

    // `--review auto` saved it, and says why.
    let refused = stderr
        .lines()
        .find(|l| l.starts_with("not applied automatically: "))
        .unwrap_or_else(|| panic!("no reason given:\n{stderr}"));
    assert!(
        refused.contains(&format!(
            "file name with control characters: {FORGED_SHOWN}"
        )),
        "{refused}"
    );
    assert!(
        refused.contains("invisible or bidi characters: src/lib.rs:2 (U+202E"),
        "{refused}"
    );
    assert_eq!(host.read("src/lib.rs"), "fn a() {}\n", "host untouched");
    let run = host.run();
    let manifest = json_file(&run.join("manifest.json"));
    assert_eq!(manifest["review"]["decision"], json!("saved"));
    let reason = manifest["review"]["reason"].as_str().unwrap();
    assert!(reason.contains("U+202E RIGHT-TO-LEFT OVERRIDE"), "{reason}");

    // The patch on disk stays exact.
    let patch = std::fs::read_to_string(run.join("session.patch")).unwrap();
    assert!(
        patch.contains("/*\u{202E} } if (admin) { \u{2066}*/"),
        "{patch}"
    );
}

#[test]
fn model_text_and_command_output_reach_the_terminal_escaped() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(vec![
        Turn::reply(
            Reply::new()
                .text("look: \u{202E}txt.exe\u{1b}[2J\u{1b}]52;c;aGk=\u{7} ok\n")
                .tool_use(
                    "toolu_1",
                    "bash",
                    json!({"command": "printf 'out \\342\\200\\256 \\033[31mred\\n'; exit 1"}),
                ),
        ),
        Turn::reply(Reply::new().text("zero\u{200B}width ⚠\u{FE0F} done")),
    ]);
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "never", "look"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_inert("stdout", &stdout);
    assert_inert("stderr", &stderr);
    assert!(
        stdout.contains("look: <U+202E>txt.exe^[[2J^[]52;c;aGk=^G ok\n"),
        "model text:\n{stdout}"
    );
    assert!(
        stdout.contains("zero<U+200B>width ⚠\u{FE0F} done"),
        "model text:\n{stdout}"
    );
    assert!(
        stderr.contains("out <U+202E> ^[[31mred"),
        "command output:\n{stderr}"
    );
}
