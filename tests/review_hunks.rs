//! "Choose hunks" in a real terminal (tmux): each hunk or whole unit shown
//! and decided with one key; exactly the chosen ones reach the host, the
//! rest is saved so that it completes the model's version, and the
//! manifest and the `review_done` event keep each decision.

use std::os::unix::fs::PermissionsExt;

use crate::support::host::{Host, events, git, json_file};
use crate::support::mock::{MockServer, Reply, Turn};
use crate::support::steps::{self, bash, write};
use crate::support::tmux::{Tmux, ah_script};
use serde_json::{Value, json};

/// The host's `t.txt`: the lines `l1` to `l40`.
fn original() -> String {
    (1..=40).map(|i| format!("l{i}\n")).collect()
}

/// `t.txt` with these of the model's changes made: A (line 3 becomes two),
/// B (line 5 removed), C (line 8 changed) form one hunk that splits in
/// three; D (a line after 20) and E (line 40 becomes three) are hunks of
/// their own.
fn changed(a: bool, b: bool, c: bool, d: bool, e: bool) -> String {
    let mut out = String::new();
    for i in 1..=40 {
        match i {
            3 if a => out.push_str("A1\nA2\n"),
            5 if b => {}
            8 if c => out.push_str("C\n"),
            20 if d => out.push_str("l20\nD\n"),
            40 if e => out.push_str("E1\nE2\nE3\n"),
            _ => out.push_str(&format!("l{i}\n")),
        }
    }
    out
}

/// Chooses "choose hunks" at the review's question.
fn choose_hunks(tmux: &Tmux) {
    tmux.wait_for("What should happen to this patch?");
    tmux.keys(&["Down", "Down", "Enter"]);
}

/// Waits for the prompt of unit `at` of `of` and answers `keys`.
fn answer(tmux: &Tmux, at: usize, of: usize, keys: &[&str]) -> String {
    let screen = tmux.wait_for(&format!("({at}/{of})"));
    tmux.keys(keys);
    screen
}

/// Sends `keys`, then waits until the screen's last line is `text` again
/// (a prompt drawn anew, not the one before the keys), so that the next
/// key goes to it.
fn keys_then_again(tmux: &Tmux, keys: &[&str], text: &str) {
    tmux.keys(keys);
    let last = |screen: &str| {
        screen
            .lines()
            .rev()
            .find(|line| !line.trim().is_empty())
            .unwrap_or_default()
            .to_string()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !last(&tmux.screen()).contains(text) {
        assert!(
            std::time::Instant::now() < deadline,
            "{text:?} not drawn again:\n{}",
            tmux.screen()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Each unit's decision in the manifest and in the session's
/// `review_done` event, which must agree.
fn decisions(host: &Host) -> Vec<Value> {
    let manifest = json_file(&host.run().join("manifest.json"));
    let hunks = manifest["review"]["hunks"].as_array().unwrap().clone();
    let db = &host.sessions()[0];
    let done = events(db, "review_done");
    assert_eq!(done.len(), 1);
    assert_eq!(done[0]["hunks"], json!(hunks), "event and manifest agree");
    hunks
}

#[test]
fn hunks_split_and_chosen_one_by_one_apply_exactly_and_the_rest_completes_them() {
    let host = Host::git(&[("t.txt", &original())]);
    let full = changed(true, true, true, true, true);
    let mock = MockServer::start(steps::script(vec![write("t.txt", &full)]));
    mock.push(Turn::reply(Reply::new().text("kept as it is")));
    let script = ah_script(&host, &mock.url(), "'change t'");
    let Some(tmux) = Tmux::start(&script.path) else {
        return;
    };
    choose_hunks(&tmux);
    let screen = answer(&tmux, 1, 3, &["s"]);
    assert!(screen.contains("t.txt (1/3)"), "{screen}");
    assert!(screen.contains("@@ -1,11 +1,11 @@"), "{screen}");
    assert!(
        screen.contains("Apply this hunk [y,n,a,d,s,r,q,?]?"),
        "{screen}"
    );
    let screen = answer(&tmux, 1, 5, &["y"]);
    assert!(screen.contains("Split into 3 hunks."), "{screen}");
    answer(&tmux, 2, 5, &["n"]);
    answer(&tmux, 3, 5, &["y"]);
    answer(&tmux, 4, 5, &["r"]);
    tmux.wait_for("Why not (Enter ends, Esc goes back)?");
    // Esc goes back to the hunk; the second time a reason is given.
    keys_then_again(&tmux, &["Escape"], "Apply this hunk [y,n,a,d,r,k,q,?]?");
    tmux.keys(&["r"]);
    tmux.wait_for("Why not (Enter ends, Esc goes back)?");
    tmux.keys(&["-l", "not D"]);
    tmux.keys(&["Enter"]);
    answer(&tmux, 5, 5, &["y"]);
    // A reason sends the model back with the rejected hunks; it changes
    // nothing, and the same patch is chosen again, without reasons.
    let requests = mock.wait_for_requests(3, std::time::Duration::from_secs(30));
    let sent = crate::support::org::last_user_text(&requests[2]);
    assert!(
        sent.contains("- t.txt @@ -18,6 +18,7 @@: not D")
            && sent.contains("- t.txt @@ -4,4 +5,3 @@"),
        "{sent}"
    );
    tmux.wait_for_after("kept as it is", "What should happen to this patch?");
    tmux.keys(&["Down", "Down", "Enter"]);
    answer(&tmux, 1, 3, &["s"]);
    answer(&tmux, 1, 5, &["y"]);
    answer(&tmux, 2, 5, &["n"]);
    answer(&tmux, 3, 5, &["y"]);
    answer(&tmux, 4, 5, &["n"]);
    answer(&tmux, 5, 5, &["y"]);
    assert_eq!(script.exit_code(), 0, "{}", tmux.screen());
    assert_eq!(host.read("t.txt"), changed(true, false, true, false, true));
    let run = host.run();
    let rest = run.join("rest.patch");
    git(&host.project, &["apply", "--3way", rest.to_str().unwrap()]);
    assert_eq!(
        host.read("t.txt"),
        full,
        "the rest completes the model's version"
    );
    let manifest = json_file(&run.join("manifest.json"));
    assert_eq!(manifest["review"]["decision"], json!("partly_applied"));
    let round = &manifest["review"]["rounds"][0];
    assert_eq!(round["rejected"][1]["reason"], json!("not D"), "{round}");
    let said: Vec<(Value, Value, Value)> = decisions(&host)
        .into_iter()
        .map(|h| {
            (
                h["header"].clone(),
                h["decision"].clone(),
                h["reason"].clone(),
            )
        })
        .collect();
    let row =
        |header: &str, decision: &str, reason: Value| (json!(header), json!(decision), reason);
    assert_eq!(
        said,
        [
            row("@@ -1,4 +1,5 @@", "applied", Value::Null),
            row("@@ -4,4 +5,3 @@", "rejected", Value::Null),
            row("@@ -6,6 +6,6 @@", "applied", Value::Null),
            row("@@ -18,6 +18,7 @@", "rejected", Value::Null),
            row("@@ -37,4 +38,6 @@", "applied", Value::Null),
        ]
    );
    // `ah apply` knows the run was partly applied and where the rest is.
    let out = host
        .ah(&mock.url())
        .args(["apply", &crate::support::host::run_id(&run)])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("was partly applied") && stderr.contains("rest.patch"),
        "{stderr}"
    );
    // The session's next run tells the model which hunks went in.
    mock.push(Turn::reply(Reply::new().text("noted")));
    let next = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "never", "go on"])
        .output()
        .unwrap();
    assert!(next.status.success(), "{next:?}");
    let requests = mock.requests();
    let told = crate::support::org::last_user_text(requests.last().unwrap());
    assert!(told.contains("applied only part of the changes"), "{told}");
    assert!(
        told.contains("- t.txt @@ -1,4 +1,5 @@: applied")
            && told.contains("- t.txt @@ -18,6 +18,7 @@: not applied (rejected)"),
        "{told}"
    );
}

#[test]
fn a_binary_file_a_mode_change_a_symlink_and_created_and_deleted_files_are_units() {
    let host = Host::git(&[("gone.txt", "bye\n"), ("run.sh", "echo hi\n")]);
    std::fs::write(host.project.join("bin.dat"), [0u8, 1, 2, 3]).unwrap();
    host.commit_all("binary");
    let mock = MockServer::start(steps::script(vec![bash(
        "printf 'x\\0y' > bin.dat && chmod +x run.sh && rm gone.txt && ln -s run.sh link && printf 'new\\n' > made.txt",
    )]));
    let script = ah_script(&host, &mock.url(), "'change them'");
    let Some(tmux) = Tmux::start(&script.path) else {
        return;
    };
    choose_hunks(&tmux);
    for (at, what, key) in [
        (1, "binary file changed", "y"),
        (2, "deleted file (+0 −1)", "n"),
        (3, "new symlink (+1 −0)", "y"),
        (4, "new file (+1 −0)", "y"),
        (5, "mode 100644 → 100755", "n"),
    ] {
        let screen = answer(&tmux, at, 5, &[key]);
        assert!(screen.contains(what), "{what}:\n{screen}");
        assert!(screen.contains("Apply this change ["), "{screen}");
    }
    assert_eq!(script.exit_code(), 0, "{}", tmux.screen());
    assert_eq!(
        std::fs::read(host.project.join("bin.dat")).unwrap(),
        b"x\0y"
    );
    assert_eq!(host.read("gone.txt"), "bye\n", "rejected: still there");
    let link = std::fs::read_link(host.project.join("link")).unwrap();
    assert_eq!(link, std::path::Path::new("run.sh"));
    assert_eq!(host.read("made.txt"), "new\n");
    let mode = std::fs::metadata(host.project.join("run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o111, 0, "the mode change was rejected");
    let decided: Vec<Value> = decisions(&host)
        .into_iter()
        .map(|h| h["decision"].clone())
        .collect();
    assert_eq!(
        decided,
        [
            json!("applied"),
            json!("rejected"),
            json!("applied"),
            json!("applied"),
            json!("rejected")
        ]
    );
}

#[test]
fn quitting_early_leaves_the_rest_unapplied_and_ctrl_c_leaves_the_choice() {
    let files = [("a.txt", "one\n"), ("b.txt", "bee\n")];
    let changes = vec![write("a.txt", "two\n"), write("b.txt", "bee2\n")];
    let host = Host::git(&files);
    let mock = MockServer::start(steps::script(changes.clone()));
    let script = ah_script(&host, &mock.url(), "'change a and b'");
    let Some(tmux) = Tmux::start(&script.path) else {
        return;
    };
    choose_hunks(&tmux);
    answer(&tmux, 1, 2, &["y"]);
    let screen = answer(&tmux, 2, 2, &["?"]);
    assert!(screen.contains("a.txt (1/2)"), "{screen}");
    let screen = tmux.wait_for("q - done: the hunks not decided yet are not applied");
    assert!(
        screen.contains("k - go back to the previous hunk"),
        "{screen}"
    );
    tmux.keys(&["q"]);
    assert_eq!(script.exit_code(), 0, "{}", tmux.screen());
    assert_eq!(
        (host.read("a.txt"), host.read("b.txt")),
        ("two\n".into(), "bee\n".into())
    );
    let decided: Vec<Value> = decisions(&host)
        .into_iter()
        .map(|h| h["decision"].clone())
        .collect();
    assert_eq!(decided, [json!("applied"), json!("undecided")]);

    let host = Host::git(&files);
    let mock = MockServer::start(steps::script(changes));
    let script = ah_script(&host, &mock.url(), "'change a and b'");
    let Some(tmux) = Tmux::start(&script.path) else {
        return;
    };
    choose_hunks(&tmux);
    answer(&tmux, 1, 2, &["y"]);
    tmux.wait_for("Apply this hunk [y,n,a,d,r,k,q,?]?");
    tmux.keys(&["C-c"]);
    assert_eq!(script.exit_code(), 3, "{}", tmux.screen());
    assert_eq!(
        (host.read("a.txt"), host.read("b.txt")),
        ("one\n".into(), "bee\n".into())
    );
    let manifest = json_file(&host.run().join("manifest.json"));
    assert_eq!(manifest["review"]["decision"], json!("saved"));
    assert_eq!(
        manifest["review"]["reason"],
        json!("the hunk choice was left")
    );
}
