//! `--review ask` in a real terminal (tmux): the diffstat and the patch are
//! shown, then a choice; what the user picks is what happens to the host.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;
use support::host::{Host, json_file};
use support::mock::{MockServer, Reply, Turn};

/// A tmux server of its own, running one command in a 120x40 pane.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn start(script: &Path) -> Option<Tmux> {
        if which::which("tmux").is_err() {
            assert!(
                std::env::var_os("CI").is_none(),
                "tmux is missing: scripts/setup installs it"
            );
            eprintln!("skipping: tmux is not installed");
            return None;
        }
        // The script lives in the test's own temp dir: its name is unique.
        let dir = script.parent().and_then(Path::file_name).unwrap();
        let socket = format!("ah-test-{}", dir.to_string_lossy());
        let status = Command::new("tmux")
            .args([
                "-L",
                &socket,
                "new-session",
                "-d",
                "-x",
                "120",
                "-y",
                "40",
                "bash",
            ])
            .arg(script)
            .status()
            .unwrap();
        assert!(status.success());
        Some(Tmux { socket })
    }

    fn screen(&self) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket, "capture-pane", "-p"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn wait_for(&self, text: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let screen = self.screen();
            if screen.contains(text) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "never saw {text:?}; screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn keys(&self, keys: &[&str]) {
        let status = Command::new("tmux")
            .args(["-L", &self.socket, "send-keys"])
            .args(keys)
            .status()
            .unwrap();
        assert!(status.success());
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .status();
    }
}

/// A script that runs ah at the terminal (no --review: ask is the default
/// there) and records its exit code.
fn script(host: &Host, url: &str) -> (PathBuf, PathBuf) {
    let exit_file = host.root.path().join("exit-code");
    let script = host.root.path().join("run.sh");
    let body = format!(
        "cd '{project}'\nenv -i PATH=\"$PATH\" HOME='{home}' TERM=xterm-256color PAGER=cat NO_COLOR=1 \
         ANTHROPIC_BASE_URL='{url}' ANTHROPIC_API_KEY=test-key GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t \
         GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t '{ah}' --backend none 'change a'\necho $? > '{exit}'\nsleep 30\n",
        project = host.project.display(),
        home = host.home.display(),
        ah = env!("CARGO_BIN_EXE_ah"),
        exit = exit_file.display(),
    );
    std::fs::write(&script, body).unwrap();
    (script, exit_file)
}

fn exit_code(file: &Path) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(text) = std::fs::read_to_string(file)
            && let Ok(code) = text.trim().parse()
        {
            return code;
        }
        assert!(Instant::now() < deadline, "ah did not finish");
        std::thread::sleep(Duration::from_millis(50));
    }
}

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
    let (script, exit_file) = script(&host, &mock.url());
    let Some(tmux) = Tmux::start(&script) else {
        return;
    };
    let screen = tmux.wait_for("What should happen to this patch?");
    assert!(screen.contains("a.txt | 2 +-"), "diffstat shown:\n{screen}");
    assert!(screen.contains("+two"), "patch shown:\n{screen}");
    tmux.keys(&["Enter"]);
    assert_eq!(exit_code(&exit_file), 0, "{}", tmux.screen());
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
    let (script, exit_file) = script(&host, &mock.url());
    let Some(tmux) = Tmux::start(&script) else {
        return;
    };
    tmux.wait_for("What should happen to this patch?");
    tmux.keys(&["Down", "Down", "Down", "Enter"]);
    assert_eq!(exit_code(&exit_file), 3, "{}", tmux.screen());
    assert_eq!(host.read("a.txt"), "one\n");
    let run = host.run();
    assert!(run.join("session.patch").is_file());
    let manifest = json_file(&run.join("manifest.json"));
    assert_eq!(manifest["review"]["decision"], json!("discarded"));
    assert_eq!(manifest["review"]["mode"], json!("ask"));
}

#[test]
fn ask_choose_files_applies_only_the_chosen_ones_and_saves_the_rest() {
    let host = Host::git(&[("a.txt", "one\n"), ("b.txt", "bee\n")]);
    let mock = MockServer::start(vec![
        Turn::reply(
            Reply::new()
                .tool_use(
                    "toolu_1",
                    "write",
                    json!({"path": "a.txt", "content": "two\n"}),
                )
                .tool_use(
                    "toolu_2",
                    "write",
                    json!({"path": "b.txt", "content": "bee2\n"}),
                ),
        ),
        Turn::reply(Reply::new().text("changed both")),
    ]);
    let (script, exit_file) = script(&host, &mock.url());
    let Some(tmux) = Tmux::start(&script) else {
        return;
    };
    tmux.wait_for("What should happen to this patch?");
    tmux.keys(&["Down", "Enter"]);
    let screen = tmux.wait_for("Files to apply");
    assert!(screen.contains("a.txt  +1 −1"), "counts shown:\n{screen}");
    // Every file starts chosen: un-choose a.txt, keep b.txt.
    tmux.keys(&["Space", "Enter"]);
    assert_eq!(exit_code(&exit_file), 0, "{}", tmux.screen());
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
    let out = Command::new("git")
        .current_dir(&host.project)
        .args(["apply", "--3way"])
        .arg(run.join("rest.patch"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(host.read("a.txt"), "two\n");
}
