//! The results file of `ah batch`: one JSON object a line, appended as
//! each task ends, so that the same command again skips the tasks that
//! have a result and runs the others (those a killed batch left without
//! one). One batch at a time works on a results file: it holds
//! `RESULTS.lock` while it runs.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::Serialize;

use ah_session::Tokens;

/// What became of one task, as its line says.
#[derive(Debug, Clone, Default, Serialize)]
pub(super) struct TaskResult {
    pub id: String,
    /// Its runs (several with attempts), in order.
    pub runs: Vec<String>,
    /// `done`, `not_applied`, `stopped`, `aborted`, `none_passed`,
    /// `failed` or `error`.
    pub status: String,
    /// What `ah` would have exited with for the task alone.
    pub exit_code: i32,
    /// The chosen run's check passed, when a check ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check_passed: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    pub applied: bool,
    pub files: usize,
    pub added: u64,
    pub removed: u64,
    pub tokens: Tokens,
    /// In US dollars, by the configured prices (`None`: a model had none).
    pub cost_usd: Option<f64>,
    pub duration_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// An open results file, its lock held.
pub(super) struct Results {
    file: File,
    path: PathBuf,
    _lock: File,
}

impl Results {
    /// Opens (or makes) the results at `path`, locked for this batch; the
    /// ids that have a result already.
    pub(super) fn open(path: &Path) -> Result<(Results, HashSet<String>)> {
        let lock_path = path.with_extension("lock");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .with_context(|| format!("cannot open {}", lock_path.display()))?;
        if lock.try_lock().is_err() {
            bail!(
                "another ah batch is working on {} (it holds {}): wait for it to end",
                path.display(),
                lock_path.display()
            );
        }
        let mut file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        let mut text = String::new();
        file.read_to_string(&mut text)
            .with_context(|| format!("cannot read {}", path.display()))?;
        // A line cut short by a killed batch is not a result: its task
        // runs again, and the next result starts on a line of its own.
        if !text.is_empty() && !text.ends_with('\n') {
            file.seek(SeekFrom::End(0))?;
            file.write_all(b"\n")?;
        }
        let done = text
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter_map(|value| value.get("id")?.as_str().map(str::to_string))
            .collect();
        let results = Results {
            file,
            path: path.to_path_buf(),
            _lock: lock,
        };
        Ok((results, done))
    }

    /// Appends `result` as one line, flushed to the disk.
    pub(super) fn append(&mut self, result: &TaskResult) -> Result<()> {
        let mut line = serde_json::to_string(result)?;
        line.push('\n');
        self.file
            .write_all(line.as_bytes())
            .and_then(|()| self.file.sync_data())
            .with_context(|| format!("cannot write to {}", self.path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_batch_on_one_file_is_refused_and_results_are_remembered() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.jsonl");
        std::fs::write(&path, "{\"id\":\"a\"}\n{\"id\":\"b\",\"stat").unwrap();
        let (mut results, done) = Results::open(&path).unwrap();
        assert_eq!(done, HashSet::from(["a".to_string()]));
        let refused = Results::open(&path).err().unwrap().to_string();
        assert!(refused.contains("another ah batch"), "{refused}");
        results
            .append(&TaskResult {
                id: "c".into(),
                ..TaskResult::default()
            })
            .unwrap();
        drop(results);
        let (_, done) = Results::open(&path).unwrap();
        assert_eq!(
            done,
            HashSet::from(["a".to_string(), "c".to_string()]),
            "the cut line is not a result"
        );
    }
}
