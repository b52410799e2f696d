//! The run directory, `<project>/.ah/runs/<run-ulid>/`: where one run keeps its
//! step records, violations, manifest, patch, artifacts and shadow repo. This
//! module owns the names and formats of those files (an on-disk contract that
//! `ah runs` and later tools read back) and makes sure the host repository
//! never sees `.ah/`, and that no other user can enter it (`private`). Run
//! directories stay after the run (a forked
//! conversation restores its files from their shadow repos) until
//! `ah runs prune` removes them.

mod live;
mod manifest;
mod private;
pub mod prune;
pub mod sweep;

pub use live::{LiveLock, Liveness};
pub use manifest::{
    CheckRecord, HunkOutcome, HunkRecord, Manifest, PatchStats, RestoredFrom, ReviewDecision,
    ReviewMode, ReviewRecord, ReviseRound, ViolationRecord,
};

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use ulid::Ulid;

use super::Change;

#[derive(Debug, thiserror::Error)]
pub enum RunDirError {
    #[error("could not {action} {}: {source}; check that the directory exists and is writable", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error("{} is not a valid run manifest: {source}; fix or delete the file", path.display())]
    Manifest {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error(
        "\"{0}\" is not a run id: run ids are ULIDs such as 01HZY8J5Q8W3V4N1T2C6B7D9EF (see `ah runs`)"
    )]
    BadId(String),
    #[error("no run {id} under {}: `ah runs` lists the runs of this project", dir.display())]
    NotFound { id: String, dir: PathBuf },
}

pub type Result<T, E = RunDirError> = std::result::Result<T, E>;

fn io_err(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> RunDirError {
    let path = path.to_path_buf();
    move |source| RunDirError::Io {
        action,
        path,
        source,
    }
}

/// What `steps/step-N.meta.json` holds for one tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    pub step: u32,
    pub tool: String,
    pub input: serde_json::Value,
    pub exit_code: Option<i32>,
    pub is_error: bool,
    pub duration_ms: u64,
    /// The shadow commit of the step (hex), if the step committed anything.
    pub commit: Option<String>,
    /// The run's last accepted commit after the step (hex): the files as
    /// they stood once the step was over, whether or not it changed any.
    /// `None` only in records written before ah kept it.
    #[serde(default)]
    pub head: Option<String>,
    pub changed: Vec<Change>,
}

/// One run's directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunDir {
    id: Ulid,
    path: PathBuf,
}

impl RunDir {
    /// Makes a new run directory (with `steps/`, only its owner can enter it)
    /// under `<ah_dir>/runs/`, once [`ensure_ah_dir`] has made `<ah_dir>`
    /// ready.
    pub fn create(ah_dir: &Path) -> Result<RunDir> {
        RunDir::create_as(ah_dir, Ulid::generate())
    }

    /// [`RunDir::create`] for the run whose id was given out already (its
    /// events carry it from the start).
    pub fn create_as(ah_dir: &Path, id: Ulid) -> Result<RunDir> {
        ensure_ah_dir(ah_dir)?;
        let path = runs_dir(ah_dir).join(id.to_string());
        private::private_dir(&path).map_err(io_err("create a private folder", &path))?;
        let run = RunDir { id, path };
        let steps = run.steps_dir();
        std::fs::create_dir(&steps).map_err(io_err("create", &steps))?;
        Ok(run)
    }

    /// Opens the existing run `run_id` under `<ah_dir>/runs/`.
    pub fn open(ah_dir: &Path, run_id: &str) -> Result<RunDir> {
        let id: Ulid = run_id
            .parse()
            .map_err(|_| RunDirError::BadId(run_id.to_string()))?;
        let path = runs_dir(ah_dir).join(id.to_string());
        if !path.is_dir() {
            return Err(RunDirError::NotFound {
                id: run_id.to_string(),
                dir: runs_dir(ah_dir),
            });
        }
        Ok(RunDir { id, path })
    }

    pub fn id(&self) -> Ulid {
        self.id
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The copy of the project the tools act on (`/work` in the sandbox).
    pub fn work_dir(&self) -> PathBuf {
        self.path.join("work")
    }

    /// An overlay run's upper folder: every change its container made.
    pub fn upper_dir(&self) -> PathBuf {
        self.path.join("upper")
    }

    /// An overlay run's scratch folder, which the overlay needs beside
    /// `upper/`.
    pub fn overlay_scratch_dir(&self) -> PathBuf {
        Self::overlay_scratch_of(&self.path)
    }

    /// The overlay scratch folder of the run directory `run`.
    pub fn overlay_scratch_of(run: &Path) -> PathBuf {
        run.join("overlay")
    }

    pub fn shadow_dir(&self) -> PathBuf {
        self.path.join("shadow.git")
    }

    pub fn patch_path(&self) -> PathBuf {
        self.path.join("session.patch")
    }

    pub fn artifacts_dir(&self) -> PathBuf {
        self.path.join("artifacts")
    }

    /// Where a work session (`ah work`) keeps its phases' files
    /// (`plan/`, `do/`, `check/`, `act/`) and `work.json`; `work/` is the
    /// work copy.
    pub fn phases_dir(&self) -> PathBuf {
        self.path.join("phases")
    }

    pub fn manifest_path(&self) -> PathBuf {
        self.path.join("manifest.json")
    }

    /// Where the egress proxy logs its decisions (`--network proxy`).
    pub fn network_log_path(&self) -> PathBuf {
        self.path.join("network.log")
    }

    pub fn steps_dir(&self) -> PathBuf {
        self.path.join("steps")
    }

    /// `steps/step-N.<suffix>`.
    pub fn step_file(&self, n: u32, suffix: &str) -> PathBuf {
        self.steps_dir().join(format!("step-{n}.{suffix}"))
    }

    /// Writes `step-N.out`, `step-N.err` and `step-N.meta.json`.
    pub fn write_step(
        &self,
        n: u32,
        record: &StepRecord,
        stdout: &[u8],
        stderr: &[u8],
    ) -> Result<()> {
        let meta = serde_json::to_vec_pretty(record).map_err(|e| RunDirError::Io {
            action: "encode the step record for",
            path: self.step_file(n, "meta.json"),
            source: e.into(),
        })?;
        write_file(&self.step_file(n, "out"), stdout)?;
        write_file(&self.step_file(n, "err"), stderr)?;
        write_file(&self.step_file(n, "meta.json"), &meta)
    }

    /// Writes `step-N.violation.txt`: which paths broke which rule.
    pub fn write_violation(&self, n: u32, text: &str) -> Result<()> {
        write_file(&self.step_file(n, "violation.txt"), text.as_bytes())
    }

    pub fn read_manifest(&self) -> Result<Manifest> {
        Manifest::load(&self.manifest_path())
    }
}

fn runs_dir(ah_dir: &Path) -> PathBuf {
    ah_dir.join("runs")
}

/// Every file of a run directory is written here, with no secret in it.
fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::write(path, ah_base::redact::bytes(bytes)).map_err(io_err("write", path))
}

/// Makes `ah_dir` and its `runs/` ready before anything is kept there:
/// created if needed, only their owner can enter them (and the run folders
/// an older ah left open are made so too), and `.gitignore` holds a `*`
/// line, so that git in the host project ignores everything ah keeps there.
pub fn ensure_ah_dir(ah_dir: &Path) -> Result<()> {
    if let Some(parent) = ah_dir.parent() {
        std::fs::create_dir_all(parent).map_err(io_err("create", parent))?;
    }
    for dir in [ah_dir, &runs_dir(ah_dir)] {
        private::private_dir(dir).map_err(io_err("make a private folder of", dir))?;
    }
    private::mend_runs(&runs_dir(ah_dir));
    let path = ah_dir.join(".gitignore");
    let existing = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(io_err("read", &path)(e)),
    };
    if existing.lines().any(|line| line.trim() == "*") {
        return Ok(());
    }
    let line = if existing.is_empty() || existing.ends_with('\n') {
        "*\n"
    } else {
        "\n*\n"
    };
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut file| file.write_all(line.as_bytes()))
        .map_err(io_err("write", &path))
}

/// One run as `ah runs` lists it.
#[derive(Debug)]
pub struct RunSummary {
    pub id: Ulid,
    pub path: PathBuf,
    /// The run's manifest, or why it could not be read (a run that crashed
    /// before writing one still shows up).
    pub manifest: Result<Manifest>,
}

/// The runs under `<ah_dir>/runs/`, newest first. Entries whose name is not a
/// run id are skipped.
pub fn list_runs(ah_dir: &Path) -> Result<Vec<RunSummary>> {
    let runs = runs_dir(ah_dir);
    let entries = match std::fs::read_dir(&runs) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err("list", &runs)(e)),
    };
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.map_err(io_err("list", &runs))?;
        let Some(id) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<Ulid>().ok())
        else {
            continue;
        };
        if entry.path().is_dir() {
            found.push(RunDir {
                id,
                path: entry.path(),
            });
        }
    }
    found.sort_by_key(|run| std::cmp::Reverse(run.id));
    Ok(found
        .into_iter()
        .map(|run| RunSummary {
            id: run.id,
            manifest: run.read_manifest(),
            path: run.path,
        })
        .collect())
}

#[cfg(test)]
mod tests;
