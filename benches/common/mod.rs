//! What the benchmarks that run the real binary share: which `ah` to
//! measure, and a git project of generated files with a home of its own in
//! which `ah` runs against the tests' mock model server.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The binary to measure: `AH_BENCH_BIN` (another build, an older commit
/// say), else this build's.
pub(crate) fn ah_binary() -> PathBuf {
    if which::which("git").is_err() {
        eprintln!("bench: `git` is needed (apt-get install git)");
        std::process::exit(1);
    }
    let ah = std::env::var_os("AH_BENCH_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_ah")));
    println!("ah: {}", ah.display());
    ah
}

/// A project with a few files, committed, and a home of its own.
pub(crate) struct Project {
    root: tempfile::TempDir,
    /// The project's folder in `root`.
    name: &'static str,
}

impl Project {
    pub(crate) fn new() -> Project {
        Project::with_files(20)
    }

    /// A project of `files` small source files, 100 to a folder.
    pub(crate) fn with_files(files: usize) -> Project {
        Project::named(files, "project")
    }

    /// [`Project::with_files`] in a folder called `name`.
    pub(crate) fn named(files: usize, name: &'static str) -> Project {
        let root = tempfile::tempdir().expect("temp dir");
        let project = root.path().join(name);
        std::fs::create_dir_all(root.path().join("home")).expect("home dir");
        for i in 0..files {
            let dir = project.join(format!("src/m{}", i / 100));
            if i % 100 == 0 {
                std::fs::create_dir_all(&dir).expect("project dir");
            }
            let body = format!("fn f{i}() -> u32 {{ {i} }}\n").repeat(20);
            std::fs::write(dir.join(format!("f{i}.rs")), body).expect("write");
        }
        for args in [
            &["init", "-q", "-b", "main"][..],
            &["add", "-A"],
            &["-c", "gc.auto=0", "commit", "-q", "-m", "initial"],
            // Packed, as a project with history is (and not packing in
            // the background while runs are timed).
            &["gc", "-q"],
        ] {
            git(&project, args);
        }
        // Files written in the second the index was are "racily clean"
        // and hashed again by every reader: past it, then refreshed, the
        // index vouches for every file, as in a project at rest.
        std::thread::sleep(Duration::from_millis(1100));
        let refreshed = Command::new("git")
            .args(["update-index", "-q", "--really-refresh"])
            .current_dir(&project)
            .status()
            .expect("run git");
        assert!(refreshed.success(), "git update-index failed");
        Project { root, name }
    }

    pub(crate) fn path(&self) -> PathBuf {
        self.root.path().join(self.name)
    }

    /// `ah` in the project with the model at `mock_url` and an environment
    /// of its own, output captured.
    #[allow(
        dead_code,
        reason = "a bench that runs ah as another user makes its own command"
    )]
    pub(crate) fn command(&self, ah: &Path, mock_url: &str) -> Command {
        let mut command = Command::new(ah);
        command
            .current_dir(self.path())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.root.path().join("home"))
            .env("ANTHROPIC_BASE_URL", mock_url)
            .env("ANTHROPIC_API_KEY", "bench-key")
            .env("NO_COLOR", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }
}

/// Runs `git ARGS` in `project` as the benches' author; panics if it fails.
pub(crate) fn git(project: &Path, args: &[&str]) {
    let status = Command::new("git")
        .args(args)
        .current_dir(project)
        .env("GIT_AUTHOR_NAME", "Bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.com")
        .env("GIT_COMMITTER_NAME", "Bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.com")
        .status()
        .expect("run git");
    assert!(status.success(), "git {args:?} failed");
}

/// Why the podman runs cannot be measured here, if they cannot.
#[allow(dead_code, reason = "the benches without podman runs do not ask")]
pub(crate) fn podman_missing() -> Option<String> {
    let Ok(podman) = which::which("podman") else {
        return Some("podman is not installed".to_string());
    };
    let image = "localhost/ah-sandbox:latest";
    let exists = Command::new(podman)
        .args(["image", "exists", image])
        .status()
        .is_ok_and(|s| s.success());
    (!exists).then(|| format!("the image {image} is missing (`ah image build` makes it)"))
}

/// `min / median / max`, in milliseconds.
#[allow(
    dead_code,
    reason = "a bench with statistics of its own does not use it"
)]
pub(crate) fn spread(times: &mut [Duration]) -> String {
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    format!(
        "min {:6.1} ms  median {:6.1} ms  max {:6.1} ms",
        ms(times[0]),
        ms(times[times.len() / 2]),
        ms(times[times.len() - 1])
    )
}

/// Waits (up to `limit`) until no process keeps any run of the project at
/// `project` live: their detached cleanups have ended, so that they do not
/// slow the next run. False when one still is at the limit (true when
/// there is no run).
#[allow(dead_code, reason = "the benches without podman runs do not ask")]
pub(crate) fn cleanup_over(project: &Path, limit: Duration) -> bool {
    let runs: Vec<PathBuf> = std::fs::read_dir(project.join(".ah/runs"))
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    let held = |run: &PathBuf| {
        std::fs::File::open(run.join("live.lock")).is_ok_and(|file| {
            rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockShared).is_err()
        })
    };
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if !runs.iter().any(held) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// How long the benches give a run's detached cleanup before the next.
#[allow(dead_code, reason = "the benches without podman runs do not ask")]
pub(crate) const CLEANUP_LIMIT: Duration = Duration::from_secs(60);

/// A part of a bench: its name, and what it measures with what it is given.
#[allow(dead_code, reason = "only the benches made of named parts ask")]
pub(crate) type Part<T> = (&'static str, fn(&T));

/// Runs each of `parts` whose name holds a word of the command line (every
/// part when there is none; cargo bench passes `--bench` first), with
/// `with`.
#[allow(dead_code, reason = "only the benches made of named parts ask")]
pub(crate) fn run_parts<T: ?Sized>(parts: &[Part<T>], with: &T) {
    let words: Vec<String> = std::env::args()
        .skip(1)
        .filter(|word| !word.starts_with("--"))
        .collect();
    for (name, part) in parts {
        if words.is_empty() || words.iter().any(|word| name.contains(word.as_str())) {
            part(with);
        }
    }
}
