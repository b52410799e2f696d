//! A real terminal for tests: a tmux server of its own runs a script in a
//! 120x40 pane; the test reads the screen, waits for text on it and types.
//! [`ah_script`] runs `ah` there and records its exit code and the
//! terminal's settings (`stty -a`) before and after it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::host::Host;

/// How long a wait for the screen (or for ah to finish) lasts.
const WAIT: Duration = Duration::from_secs(30);

/// A tmux server of its own, running one script in a 120x40 pane.
pub(crate) struct Tmux {
    socket: String,
}

impl Tmux {
    /// Starts `bash script`, or `None` (after saying why) when tmux is not
    /// installed outside CI.
    pub(crate) fn start(script: &Path) -> Option<Tmux> {
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

    pub(crate) fn screen(&self) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket, "capture-pane", "-p"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The screen with its colours and attributes, as escape sequences.
    pub(crate) fn screen_with_escapes(&self) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket, "capture-pane", "-p", "-e"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Everything the pane showed since it started, scrolled-off lines
    /// first, without the blank rows below the last line written.
    pub(crate) fn history(&self) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket, "capture-pane", "-p", "-S", "-"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        format!("{}\n", text.trim_end())
    }

    /// Waits until `text` is on the screen; returns the screen.
    pub(crate) fn wait_for(&self, text: &str) -> String {
        let deadline = Instant::now() + WAIT;
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

    /// Waits until the pane has shown `text` after the last `marker`;
    /// returns what it showed from that `marker` on.
    pub(crate) fn wait_for_after(&self, marker: &str, text: &str) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let history = self.history();
            if let Some(at) = history.rfind(marker)
                && history[at..].contains(text)
            {
                return history[at..].to_string();
            }
            assert!(
                Instant::now() < deadline,
                "never saw {text:?} after {marker:?}; pane:\n{history}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Types `keys` (tmux key names, or text with `-l` first).
    pub(crate) fn keys(&self, keys: &[&str]) {
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

/// A script run in the pane: `ah <args>` in the project with an isolated
/// environment wired to the mock at `url` (no `--review`: at a terminal,
/// ask is the default).
pub(crate) struct AhScript {
    pub path: PathBuf,
    exit_file: PathBuf,
    stty_before: PathBuf,
    stty_after: PathBuf,
}

/// Writes the script that runs `ah <args>` (`args` as shell words), with
/// `PAGER=cat` and `NO_COLOR=1`.
pub(crate) fn ah_script(host: &Host, url: &str, args: &str) -> AhScript {
    ah_script_in(host, url, "none", "PAGER=cat NO_COLOR=1", args)
}

/// [`ah_script`] on the sandbox `backend` (`none`, `podman`).
pub(crate) fn ah_script_on(host: &Host, url: &str, backend: &str, args: &str) -> AhScript {
    ah_script_in(host, url, backend, "PAGER=cat NO_COLOR=1", args)
}

/// [`ah_script`] with `vars` (shell words, `NAME=value …`) instead of its
/// pager and colour variables; the machine's system git configuration is
/// left out.
pub(crate) fn ah_script_with(host: &Host, url: &str, vars: &str, args: &str) -> AhScript {
    ah_script_in(host, url, "none", vars, args)
}

/// The script of `ah --backend BACKEND <args>` with `vars` set.
fn ah_script_in(host: &Host, url: &str, backend: &str, vars: &str, args: &str) -> AhScript {
    let root = host.root.path();
    let script = AhScript {
        path: root.join("run.sh"),
        exit_file: root.join("exit-code"),
        stty_before: root.join("stty-before"),
        stty_after: root.join("stty-after"),
    };
    let body = format!(
        "cd '{project}'\nstty -a > '{before}'\n\
         env -i PATH=\"$PATH\" HOME='{home}' TERM=xterm-256color GIT_CONFIG_NOSYSTEM=1 {vars} \
         ANTHROPIC_BASE_URL='{url}' ANTHROPIC_API_KEY=test-key GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t \
         GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t '{ah}' --backend {backend} {args}\n\
         code=$?\nstty -a > '{after}'\necho $code > '{exit}'\nsleep 30\n",
        project = host.project.display(),
        home = host.home.display(),
        ah = env!("CARGO_BIN_EXE_ah"),
        before = script.stty_before.display(),
        after = script.stty_after.display(),
        exit = script.exit_file.display(),
    );
    std::fs::write(&script.path, body).unwrap();
    script
}

impl AhScript {
    /// Waits for ah to finish; its exit code.
    pub(crate) fn exit_code(&self) -> i32 {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Ok(text) = std::fs::read_to_string(&self.exit_file)
                && let Ok(code) = text.trim().parse()
            {
                return code;
            }
            assert!(Instant::now() < deadline, "ah did not finish");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// After [`AhScript::exit_code`]: the terminal's settings as `stty -a`
    /// showed them before and after ah.
    pub(crate) fn stty(&self) -> (String, String) {
        let read = |path: &Path| std::fs::read_to_string(path).unwrap();
        (read(&self.stty_before), read(&self.stty_after))
    }
}
