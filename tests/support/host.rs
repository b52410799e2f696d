//! Host-side fixtures for tests that run the real `ah` binary: a temporary
//! git project, an isolated HOME, the `ah` command wired to a mock model, and
//! readers for what a run leaves on disk.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::mock::RecordedRequest;

/// A temporary project (a git repo with one commit unless made bare) and an
/// empty HOME, removed when dropped.
pub(crate) struct Host {
    pub root: tempfile::TempDir,
    pub project: PathBuf,
    pub home: PathBuf,
}

impl Host {
    /// A git repository with `files` committed.
    pub(crate) fn git(files: &[(&str, &str)]) -> Host {
        let host = Host::plain(files);
        git(&host.project, &["init", "-q", "-b", "main"]);
        git(&host.project, &["add", "-A"]);
        git(&host.project, &["commit", "-q", "-m", "initial"]);
        host
    }

    /// A plain folder (not a git repository) with `files`.
    pub(crate) fn plain(files: &[(&str, &str)]) -> Host {
        let root = tempfile::tempdir().expect("temp dir");
        let project = root.path().join("project");
        let home = root.path().join("home");
        std::fs::create_dir_all(&project).expect("project dir");
        std::fs::create_dir_all(&home).expect("home dir");
        let host = Host {
            project,
            home,
            root,
        };
        for (path, content) in files {
            host.write(path, content);
        }
        host
    }

    /// Panics when a request the mock received names a folder of this
    /// host's (the project's or HOME's absolute path): the model is told
    /// of `/work`, project-relative paths and neutral names only.
    pub(crate) fn assert_unnamed_in(&self, requests: &[RecordedRequest]) {
        let root = self.root.path();
        let real = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
        for (i, request) in requests.iter().enumerate() {
            let body = request.body.to_string();
            for folder in [root, real.as_path()] {
                let folder = folder.display().to_string();
                if let Some(at) = body.find(&folder) {
                    let from = body[..at]
                        .char_indices()
                        .rev()
                        .nth(200)
                        .map_or(0, |(i, _)| i);
                    let to = (at + folder.len() + 200).min(body.len());
                    let to = (to..=body.len())
                        .find(|&i| body.is_char_boundary(i))
                        .unwrap_or(body.len());
                    panic!("request {i} names {folder}: …{}…", &body[from..to]);
                }
            }
        }
    }

    pub(crate) fn write(&self, path: &str, content: &str) {
        let full = self.project.join(path);
        std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
        std::fs::write(full, content).expect("write");
    }

    pub(crate) fn read(&self, path: &str) -> String {
        std::fs::read_to_string(self.project.join(path))
            .unwrap_or_else(|e| panic!("read {path}: {e}"))
    }

    /// `ah` with the project, the mock model and an isolated environment.
    pub(crate) fn ah(&self, base_url: &str) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ah"));
        cmd.current_dir(&self.project)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("ANTHROPIC_BASE_URL", base_url)
            .env("ANTHROPIC_API_KEY", "test-key")
            .env("AH_RETRY_BASE_MS", "10")
            .env("NO_COLOR", "1")
            .env("GIT_AUTHOR_NAME", "Test User")
            .env("GIT_AUTHOR_EMAIL", "test@example.com")
            .env("GIT_COMMITTER_NAME", "Test User")
            .env("GIT_COMMITTER_EMAIL", "test@example.com");
        cmd
    }

    /// `ah` as [`Host::ah`] does it, with the `openai` provider (and
    /// `AH_OLLAMA_BASE_URL`) pointing at `openai_url` and an OpenAI key set;
    /// pick the model with `-m openai:…`.
    pub(crate) fn ah_openai(&self, openai_url: &str) -> Command {
        let mut cmd = self.ah("http://127.0.0.1:9/anthropic-is-not-used");
        cmd.env("AH_OPENAI_BASE_URL", openai_url)
            .env("AH_OLLAMA_BASE_URL", openai_url)
            .env("OPENAI_API_KEY", "sk-test-openai");
        cmd
    }

    /// The run directories, oldest first.
    pub(crate) fn runs(&self) -> Vec<PathBuf> {
        let mut runs: Vec<PathBuf> = std::fs::read_dir(self.project.join(".ah/runs"))
            .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.path()).collect())
            .unwrap_or_default();
        runs.sort();
        runs
    }

    /// The pid of the ah holding the project's (first) session.
    pub(crate) fn ah_pid(&self) -> u32 {
        let db = &self.sessions()[0];
        let pid = query(&db.with_extension("queue.db"), "SELECT pid FROM lock");
        u32::try_from(pid[0][0].as_i64().expect("a pid")).expect("a pid that fits")
    }

    /// The one run directory (panics if there is not exactly one).
    pub(crate) fn run(&self) -> PathBuf {
        let runs = self.runs();
        assert_eq!(runs.len(), 1, "expected one run, found {runs:?}");
        runs.into_iter().next().expect("one run")
    }

    /// The session databases, oldest first.
    pub(crate) fn sessions(&self) -> Vec<PathBuf> {
        let mut dbs: Vec<PathBuf> = std::fs::read_dir(self.project.join(".ah"))
            .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.path()).collect())
            .unwrap_or_default();
        dbs.retain(|p| {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            name.ends_with(".db") && !name.ends_with(".queue.db")
        });
        dbs.sort();
        dbs
    }

    pub(crate) fn git_out(&self, args: &[&str]) -> String {
        git(&self.project, args)
    }

    /// Stages everything and commits it with `message`.
    pub(crate) fn commit_all(&self, message: &str) {
        git(&self.project, &["add", "-A"]);
        git(&self.project, &["commit", "-q", "-m", message]);
    }
}

/// The id of a run, i.e. the name of its directory.
pub(crate) fn run_id(run: &Path) -> String {
    run.file_name()
        .and_then(|name| name.to_str())
        .unwrap_or_else(|| panic!("{} has no run id", run.display()))
        .to_string()
}

/// Polls `done` every 50 ms until it holds; panics naming `what` when
/// `timeout` passes first.
pub(crate) fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every file under `dir` (recursively, symlinks not followed) whose bytes
/// contain `needle`.
pub(crate) fn files_containing(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        let entries =
            std::fs::read_dir(&next).unwrap_or_else(|e| panic!("{}: {e}", next.display()));
        for entry in entries {
            let path = entry
                .unwrap_or_else(|e| panic!("{}: {e}", next.display()))
                .path();
            let meta = std::fs::symlink_metadata(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            if meta.is_dir() {
                pending.push(path);
            } else if meta.is_file() {
                let bytes =
                    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                if bytes.windows(needle.len()).any(|w| w == needle) {
                    found.push(path);
                }
            }
        }
    }
    found
}

/// A git project of `files` at `project`, committed, that `user` owns.
pub(crate) fn project_of(
    user: &crate::support::podman::TestUser,
    project: &Path,
    files: &[(&str, &str)],
) {
    for (path, text) in files {
        let path = project.join(path);
        let parent = path.parent().unwrap_or(project);
        std::fs::create_dir_all(parent).expect("project folder");
        std::fs::write(&path, text).expect("project file");
    }
    git(project, &["init", "-q", "-b", "main"]);
    git(project, &["add", "-A"]);
    git(project, &["commit", "-q", "-m", "initial"]);
    user.chown(project);
}

/// Runs git in `dir` and returns stdout; panics with stderr on failure.
pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "Test User")
        .env("GIT_AUTHOR_EMAIL", "test@example.com")
        .env("GIT_COMMITTER_NAME", "Test User")
        .env("GIT_COMMITTER_EMAIL", "test@example.com")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub(crate) fn json_file(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Stdout and stderr of a finished command, for assertion messages.
pub(crate) fn describe(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Rows of a query on a session DB, each row's columns as JSON values.
pub(crate) fn query(db: &Path, sql: &str) -> Vec<Vec<Value>> {
    let conn = rusqlite::Connection::open(db).expect("open db");
    let mut stmt = conn.prepare(sql).expect("prepare");
    let n = stmt.column_count();
    stmt.query_map([], |row| {
        (0..n)
            .map(|i| {
                let v: rusqlite::types::Value = row.get(i)?;
                Ok(match v {
                    rusqlite::types::Value::Null => Value::Null,
                    rusqlite::types::Value::Integer(i) => Value::from(i),
                    rusqlite::types::Value::Real(f) => Value::from(f),
                    rusqlite::types::Value::Text(t) => Value::from(t),
                    rusqlite::types::Value::Blob(b) => Value::from(b),
                })
            })
            .collect()
    })
    .expect("query")
    .collect::<Result<_, _>>()
    .expect("rows")
}

/// The details (JSON) of the session's events of type `kind`, oldest first.
pub(crate) fn events(db: &Path, kind: &str) -> Vec<Value> {
    query(
        db,
        &format!("SELECT details FROM events WHERE event_type = '{kind}' ORDER BY id"),
    )
    .into_iter()
    .map(|row| {
        let details = row[0].as_str().unwrap_or_else(|| panic!("{kind}: {row:?}"));
        serde_json::from_str(details).unwrap_or_else(|e| panic!("{kind}: {e}: {details}"))
    })
    .collect()
}
