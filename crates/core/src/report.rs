//! `ah report`: one self-contained HTML page on a project's runs (or the
//! runs a batch's results file names), for a person to look at in a
//! browser: a sortable table of the runs, and for each run a timeline of
//! its turns, its check's output and its coloured patch. Everything a run
//! left is hostile (the task, file names, the patch, the check's output):
//! it is read only through bounded reads (`report::bounded`) and reaches the
//! page only escaped (`report::html`). The page asks for nothing from a network.

mod bounded;
mod diff;
mod html;
mod timeline;

use std::path::Path;

use anyhow::{Context, Result};
use serde_json::Value;

use ah_record::rundir::{CheckRecord, Manifest, RunDir, list_runs};
use ah_session::Tokens;
use bounded::Bounded;
use timeline::Turn;

/// The most runs a report shows when none are named.
pub const NEWEST: usize = 50;
/// The most of a check's output shown per run.
const CHECK_LOG_CAP: u64 = 64 * 1024;
/// The most of a patch shown per run.
const PATCH_CAP: u64 = 2 * 1024 * 1024;
/// The largest manifest read.
const MANIFEST_CAP: u64 = 4 * 1024 * 1024;
/// The largest batch results file read.
const RESULTS_CAP: u64 = 16 * 1024 * 1024;

/// Which runs a report is about.
pub enum Select<'a> {
    /// The project's newest [`NEWEST`] runs.
    Newest,
    /// These runs (ids or unambiguous prefixes), in this order.
    Runs(&'a [String]),
    /// The tasks of a batch's results file, and the runs each names.
    Batch(&'a Path),
}

/// What the report knows of one run.
struct RunView {
    id: String,
    /// `None`: the run's manifest could not be read (why is in `problem`).
    manifest: Option<Manifest>,
    problem: Option<String>,
    tokens: Tokens,
    turns: Vec<Turn>,
    /// What the timeline could not read (the session), if anything.
    timeline_note: Option<String>,
    check_log: Option<Bounded>,
    patch: Option<Bounded>,
}

impl RunView {
    fn status(&self) -> String {
        match &self.manifest {
            Some(m) if m.poisoned.is_some() => "poisoned".to_string(),
            Some(m) => match &m.review {
                Some(review) => review.decision.as_str().to_string(),
                None if m.finished_at.is_none() => "unfinished".to_string(),
                None => "saved".to_string(),
            },
            None => "unreadable".to_string(),
        }
    }

    fn check(&self) -> Option<&CheckRecord> {
        self.manifest.as_ref().and_then(|m| m.check.as_ref())
    }

    /// From the manifest's start to its end, when both are there.
    fn duration_ms(&self) -> Option<u64> {
        let m = self.manifest.as_ref()?;
        let start = timeline::parse_rfc3339_ms(&m.started_at)?;
        let end = timeline::parse_rfc3339_ms(m.finished_at.as_deref()?)?;
        end.checked_sub(start)
    }
}

/// One task of a batch's results file (its fields as the file says;
/// missing or odd ones read as empty).
struct TaskRow {
    id: String,
    status: String,
    runs: Vec<String>,
    files: u64,
    added: u64,
    removed: u64,
    tokens: Tokens,
    duration_ms: u64,
    applied: bool,
}

/// The report's page for `project`'s runs as `select` picks them.
pub fn report(project: &Path, select: Select<'_>) -> Result<String> {
    let ah_dir = project.join(".ah");
    match select {
        Select::Newest => {
            let runs = list_runs(&ah_dir)?
                .into_iter()
                .take(NEWEST)
                .map(|summary| view(&ah_dir, &summary.id.to_string()))
                .collect::<Vec<_>>();
            Ok(html::page(&runs, None))
        }
        Select::Runs(ids) => {
            let runs = ids
                .iter()
                .map(|id| {
                    crate::runs::find_run(&ah_dir, id)
                        .map(|run| view(&ah_dir, &run.id().to_string()))
                })
                .collect::<Result<Vec<_>>>()?;
            Ok(html::page(&runs, None))
        }
        Select::Batch(results) => {
            let tasks = read_results(results)?;
            let mut runs = Vec::new();
            for id in tasks.iter().flat_map(|t| &t.runs) {
                if let Ok(run) = RunDir::open(&ah_dir, id) {
                    runs.push(view(&ah_dir, &run.id().to_string()));
                }
            }
            Ok(html::page(&runs, Some(&tasks)))
        }
    }
}

/// Everything the report shows of run `id`.
fn view(ah_dir: &Path, id: &str) -> RunView {
    let dir = ah_dir.join("runs").join(id);
    let (manifest, problem) = match bounded::read(&dir, "manifest.json", MANIFEST_CAP) {
        Ok(Some(b)) if !b.cut => match serde_json::from_slice::<Manifest>(&b.bytes) {
            Ok(m) => (Some(m), None),
            Err(e) => (None, Some(format!("manifest.json: {e}"))),
        },
        Ok(Some(_)) => (None, Some("manifest.json is too large".to_string())),
        Ok(None) => (None, Some("no manifest.json".to_string())),
        Err(e) => (None, Some(format!("manifest.json: {e}"))),
    };
    let session = manifest.as_ref().and_then(|m| m.session_db.as_deref());
    let (turns, tokens, timeline_note) = match session.map(|db| timeline::turns(Path::new(db), id))
    {
        Some(Ok((turns, tokens))) => (turns, tokens, None),
        Some(Err(e)) => (Vec::new(), Tokens::default(), Some(format!("{e:#}"))),
        None => (
            Vec::new(),
            Tokens::default(),
            Some("the manifest names no session".to_string()),
        ),
    };
    RunView {
        id: id.to_string(),
        manifest,
        problem,
        tokens,
        turns,
        timeline_note,
        check_log: bounded::read(&dir, "check.log", CHECK_LOG_CAP)
            .ok()
            .flatten(),
        patch: bounded::read(&dir, "session.patch", PATCH_CAP)
            .ok()
            .flatten(),
    }
}

/// The tasks of a batch's results file, in its order.
fn read_results(path: &Path) -> Result<Vec<TaskRow>> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty());
    let dir = dir.unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .with_context(|| format!("{} names no file", path.display()))?;
    let read = bounded::read(dir, name, RESULTS_CAP)
        .with_context(|| format!("cannot read {}", path.display()))?
        .with_context(|| format!("{} does not exist", path.display()))?;
    if read.cut {
        anyhow::bail!(
            "{} is larger than {} MiB: give a smaller results file",
            path.display(),
            RESULTS_CAP / (1024 * 1024)
        );
    }
    let text = String::from_utf8_lossy(&read.bytes);
    Ok(text
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(Value::is_object)
        .map(|v| task_row(&v))
        .collect())
}

fn task_row(v: &Value) -> TaskRow {
    let text = |key: &str| v[key].as_str().unwrap_or_default().to_string();
    let number = |key: &str| v[key].as_u64().unwrap_or_default();
    TaskRow {
        id: text("id"),
        status: text("status"),
        runs: v["runs"]
            .as_array()
            .map(|runs| {
                runs.iter()
                    .filter_map(|r| r.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default(),
        files: number("files"),
        added: number("added"),
        removed: number("removed"),
        tokens: Tokens {
            input_tokens: v["tokens"]["input_tokens"].as_u64().unwrap_or_default(),
            output_tokens: v["tokens"]["output_tokens"].as_u64().unwrap_or_default(),
        },
        duration_ms: number("duration_ms"),
        applied: v["applied"].as_bool().unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests;
