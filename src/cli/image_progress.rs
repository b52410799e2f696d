//! What a person sees while the sandbox image is built (`ah image build`,
//! or a first run without the image): one line per phase and the notes
//! that matter, a spinner with the phase, what the tool is doing and the
//! time taken while stderr is a terminal, and every line the build tools
//! print in a log file whose path is shown (debootstrap alone prints
//! hundreds). The log lives in ah's cache folder, `$XDG_CACHE_HOME/ah`
//! (else `~/.cache/ah`): the image is the user's, not a project's, and a
//! build can run outside any project.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, IsTerminal, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use ah_core::present::{format_rfc3339, terminal_safe};
use ah_core::sandbox::{self, BuildOptions, BuildReport, Phase, Progress};

/// The most characters of a tool's line the spinner shows.
const DETAIL_CHARS: usize = 60;

/// Shows a build's progress and keeps its log.
pub(super) struct BuildDisplay {
    log: Option<BufWriter<File>>,
    log_path: Option<PathBuf>,
    /// The spinner, at a terminal.
    bar: Option<ProgressBar>,
    /// The phase line the spinner shows.
    phase: String,
    /// Without a log, the tools' lines go to stderr as before.
    echo_output: bool,
    /// Where lines go when there is no spinner (stderr).
    out: Box<dyn Write + Send>,
}

impl BuildDisplay {
    /// Starts the display: a spinner when stderr is a terminal and `plain`
    /// is not asked for (`--json`), phase lines only otherwise. The log is
    /// opened in [`cache_dir`]; when it cannot be, the tools' output is
    /// shown instead, so nothing is lost.
    pub(super) fn start(plain: bool) -> BuildDisplay {
        let spinner = !plain && std::io::stderr().is_terminal();
        BuildDisplay::new(spinner, open_log(), Box::new(std::io::stderr()))
    }

    fn new(
        spinner: bool,
        log: Result<(File, PathBuf), String>,
        out: Box<dyn Write + Send>,
    ) -> BuildDisplay {
        let bar = spinner.then(|| {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} {elapsed}") {
                bar.set_style(style);
            }
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        let mut display = BuildDisplay {
            echo_output: log.is_err(),
            log: None,
            log_path: None,
            bar,
            phase: "image: starting".to_string(),
            out,
        };
        match log {
            Ok((file, path)) => {
                display.say(&format!(
                    "image: the build's full log is {}",
                    path.display()
                ));
                display.log = Some(BufWriter::new(file));
                display.log_path = Some(path);
            }
            Err(why) => display.say(&format!(
                "warning: no image build log ({why}); showing the build's output"
            )),
        }
        display
    }

    /// Where the full log is, when there is one.
    pub(super) fn log_path(&self) -> Option<&Path> {
        self.log_path.as_deref()
    }

    /// Shows and logs one piece of progress.
    pub(super) fn show(&mut self, progress: Progress<'_>) {
        self.log_line(&log_text(progress));
        match progress {
            Progress::Phase(phase) => {
                self.phase = phase_line(phase);
                let line = self.phase.clone();
                self.say(&line);
                self.spin(None);
            }
            Progress::Note(note) => self.say(&format!("image: {}", terminal_safe(note))),
            Progress::Output(line) => {
                if self.echo_output {
                    self.say(&format!("  {}", terminal_safe(line)));
                }
                if let Some(detail) = detail(line) {
                    self.spin(Some(&detail));
                }
            }
        }
    }

    /// Stops the spinner and flushes the log.
    pub(super) fn finish(mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
        if let Some(log) = &mut self.log {
            let _ = log.flush();
        }
    }

    /// A line of its own on stderr, above the spinner.
    fn say(&mut self, line: &str) {
        match &self.bar {
            Some(bar) => bar.println(line),
            // Nowhere left to say it: the build goes on.
            None => {
                let _ = writeln!(self.out, "{line}");
            }
        }
    }

    fn spin(&self, detail: Option<&str>) {
        if let Some(bar) = &self.bar {
            match detail {
                Some(detail) => bar.set_message(format!("{} · {detail}", self.phase)),
                None => bar.set_message(self.phase.clone()),
            }
        }
    }

    fn log_line(&mut self, line: &str) {
        let Some(log) = &mut self.log else { return };
        if let Err(err) = writeln!(log, "{line}") {
            // A full disk must not stop the build: the output is shown.
            self.say(&format!(
                "warning: the image build log stopped ({err}); showing the build's output"
            ));
            self.log = None;
            self.echo_output = true;
        }
    }
}

/// Builds the image with `options`, showing its progress (see
/// [`BuildDisplay::start`]); a failure names the log.
pub(super) async fn build_with_display(
    options: &BuildOptions,
    plain: bool,
) -> anyhow::Result<BuildReport> {
    let mut display = BuildDisplay::start(plain);
    let built = sandbox::build_image(options, &mut |progress| display.show(progress)).await;
    let log = display.log_path().map(Path::to_path_buf);
    display.finish();
    built.map_err(|err| match log {
        Some(log) => anyhow::anyhow!("{err}\nthe build's full log: {}", log.display()),
        None => anyhow::Error::new(err),
    })
}

/// `image: debootstrap (1/2)`, or the check's line without a number.
pub(super) fn phase_line(phase: Phase) -> String {
    match phase.step() {
        Some((step, of)) => format!("image: {} ({step}/{of})", phase.name()),
        None => format!("image: {}", phase.name()),
    }
}

/// How a piece of progress reads in the log.
fn log_text(progress: Progress<'_>) -> String {
    match progress {
        Progress::Phase(phase) => format!("== {} ==", phase_line(phase)),
        Progress::Note(note) => format!("== {note}"),
        Progress::Output(line) => line.to_string(),
    }
}

/// What a build tool's line says it is doing, for the spinner: debootstrap's
/// `I:` lines and podman's `STEP n/m:` lines (cut short, made safe to
/// print); other lines (package names by the hundred) say nothing.
pub(super) fn detail(line: &str) -> Option<String> {
    let line = line.trim();
    let said = line
        .strip_prefix("I: ")
        .or_else(|| line.starts_with("STEP ").then_some(line))?;
    let said = terminal_safe(said.trim_end_matches("..."));
    let cut = match said.char_indices().nth(DETAIL_CHARS) {
        Some((at, _)) => format!("{}…", &said[..at]),
        None => said.into_owned(),
    };
    Some(cut)
}

/// ah's cache folder: `$XDG_CACHE_HOME/ah`, else `$HOME/.cache/ah`
/// (absolute paths only); `None` when neither is set.
pub(super) fn cache_dir(xdg_cache_home: Option<&str>, home: Option<&str>) -> Option<PathBuf> {
    let absolute = |value: Option<&str>| {
        value
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    absolute(xdg_cache_home)
        .map(|cache| cache.join("ah"))
        .or_else(|| absolute(home).map(|home| home.join(".cache").join("ah")))
}

/// Creates a new log file in the cache folder, readable by the user only
/// (apt's proxy, with its password if it has one, is in it).
fn open_log() -> Result<(File, PathBuf), String> {
    let env = |name| std::env::var(name).ok();
    let dir = cache_dir(env("XDG_CACHE_HOME").as_deref(), env("HOME").as_deref())
        .ok_or("neither XDG_CACHE_HOME nor HOME is set")?;
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let stamp = log_stamp(SystemTime::now());
    let path = dir.join(format!("image-build-{stamp}-{}.log", std::process::id()));
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    Ok((file, path))
}

/// `20250102T030405Z`: a time that sorts and needs no quoting.
fn log_stamp(at: SystemTime) -> String {
    let text = format_rfc3339(at);
    // Whole seconds: `2025-01-02T03:04:05.000Z` loses `.000`.
    let seconds = text
        .split('.')
        .next()
        .unwrap_or(&text)
        .trim_end_matches('Z');
    format!("{}Z", seconds.replace(['-', ':'], ""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_read_as_lines_with_their_place() {
        assert_eq!(phase_line(Phase::Debootstrap), "image: debootstrap (1/2)");
        assert_eq!(phase_line(Phase::Import), "image: podman import (2/2)");
        assert_eq!(phase_line(Phase::PodmanBuild), "image: podman build (1/1)");
        assert_eq!(
            phase_line(Phase::CheckRegistry),
            "image: checking whether a container registry is reachable"
        );
    }

    #[test]
    fn the_spinner_says_what_debootstrap_and_podman_are_doing() {
        // Lines as the tools print them.
        let cases = [
            ("I: Retrieving InRelease ", Some("Retrieving InRelease")),
            ("I: Validating Packages ", Some("Validating Packages")),
            (
                "I: Installing core packages...",
                Some("Installing core packages"),
            ),
            ("I: Configuring libc-bin...", Some("Configuring libc-bin")),
            (
                "I: Base system installed successfully.",
                Some("Base system installed successfully."),
            ),
            (
                "STEP 2/3: RUN apt-get update && apt-get install -y --no-install-recommends bash",
                Some("STEP 2/3: RUN apt-get update && apt-get install -y --no-inst…"),
            ),
            (
                "Get:1 http://deb.debian.org/debian bookworm InRelease",
                None,
            ),
            ("Setting up libc6:amd64 (2.36-9+deb12u4) ...", None),
            ("Copying blob sha256:1234", None),
            ("", None),
        ];
        for (line, said) in cases {
            assert_eq!(detail(line).as_deref(), said, "{line}");
        }
        // Escape sequences from a tool never reach the terminal raw.
        let shown = detail("I: evil \u{1b}]0;title\u{7}").unwrap_or_default();
        assert!(!shown.contains('\u{1b}'), "{shown:?}");
    }

    /// What the display wrote where stderr would be.
    #[derive(Clone, Default)]
    struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Captured {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    #[test]
    fn piped_the_terminal_gets_phases_and_the_log_every_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("build.log");
        let file = File::create(&path).unwrap();
        let stderr = Captured::default();
        let mut display =
            BuildDisplay::new(false, Ok((file, path.clone())), Box::new(stderr.clone()));
        assert_eq!(display.log_path(), Some(path.as_path()));
        let output: Vec<String> = (0..300).map(|i| format!("I: Unpacking p{i}...")).collect();
        display.show(Progress::Phase(Phase::Debootstrap));
        display.show(Progress::Note("debootstrap bookworm from http://mirror"));
        for line in &output {
            display.show(Progress::Output(line));
        }
        display.show(Progress::Phase(Phase::Import));
        display.finish();
        let log = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = log.lines().collect();
        assert_eq!(lines.len(), 303);
        assert_eq!(lines[0], "== image: debootstrap (1/2) ==");
        assert_eq!(lines[1], "== debootstrap bookworm from http://mirror");
        assert_eq!(lines[2..302], output);
        assert_eq!(lines[302], "== image: podman import (2/2) ==");
        assert_eq!(
            stderr.text(),
            format!(
                "image: the build's full log is {}\n\
                 image: debootstrap (1/2)\n\
                 image: debootstrap bookworm from http://mirror\n\
                 image: podman import (2/2)\n",
                path.display()
            )
        );
    }

    #[test]
    fn without_a_log_the_output_is_shown() {
        let stderr = Captured::default();
        let mut display =
            BuildDisplay::new(false, Err("no HOME".to_string()), Box::new(stderr.clone()));
        display.show(Progress::Phase(Phase::PodmanBuild));
        display.show(Progress::Output("STEP 1/3: FROM debian"));
        display.finish();
        assert_eq!(
            stderr.text(),
            "warning: no image build log (no HOME); showing the build's output\n\
             image: podman build (1/1)\n  STEP 1/3: FROM debian\n"
        );
    }

    #[test]
    fn the_cache_folder_follows_xdg_then_home() {
        assert_eq!(
            cache_dir(Some("/xdg"), Some("/home/u")),
            Some(PathBuf::from("/xdg/ah"))
        );
        assert_eq!(
            cache_dir(Some(""), Some("/home/u")),
            Some(PathBuf::from("/home/u/.cache/ah"))
        );
        assert_eq!(
            cache_dir(Some("relative"), Some("/home/u")),
            Some(PathBuf::from("/home/u/.cache/ah"))
        );
        assert_eq!(cache_dir(None, None), None);
    }

    #[test]
    fn log_names_sort_by_time() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_735_787_045);
        assert_eq!(log_stamp(at), "20250102T030405Z");
    }
}
