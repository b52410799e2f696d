//! `manifest.json`: the summary of one run (task, model, backend, shadow
//! commits, withheld files, steps, violations, patch stats or why there is
//! no patch, artifacts kept and not, outputs left out of the patch, review,
//! apply). Every field has a
//! default so that a manifest written early in a run, or by an older ah, still
//! loads; it is rewritten atomically as the run goes on.

use std::io::Write;
use std::path::Path;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::{Result, RunDirError, io_err};
use crate::artifacts::Skipped;
use ah_base::format_rfc3339;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Manifest {
    pub run_id: String,
    pub task: String,
    pub model: String,
    /// `podman` or `none`.
    pub backend: String,
    pub image: Option<String>,
    /// The sandbox's network mode (`none`, `proxy`, `full`; podman only).
    pub network: Option<String>,
    /// Path of the session database the run's conversation lives in.
    pub session_db: Option<String>,
    /// Shadow commit the run's patch is taken against (hex). A run restored
    /// from an earlier run's step keeps that run's baseline.
    pub baseline: Option<String>,
    /// Where the run's files came from when it started from an earlier
    /// run's step rather than the project (time travel).
    pub restored_from: Option<RestoredFrom>,
    /// Last shadow commit of the run (hex).
    pub head: Option<String>,
    /// Project files the read policy kept out of the work copy, relative to
    /// the project root.
    pub withheld: Vec<String>,
    /// RFC 3339, UTC (see [`format_rfc3339`]).
    pub started_at: String,
    pub finished_at: Option<String>,
    /// How many steps the run took.
    pub steps: u32,
    pub violations: Vec<ViolationRecord>,
    pub patch: Option<PatchStats>,
    /// The saved patch's files as the review was shown them, for a review
    /// opened again later (`ah review`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<crate::patch::FileStat>,
    pub review: Option<ReviewRecord>,
    pub applied: bool,
    /// Why `session.patch` was not saved (it would pass the disk budget);
    /// the run's changes are then only in its shadow repo.
    pub patch_not_saved: Option<String>,
    /// Artifact paths, relative to `artifacts/`.
    pub artifacts: Vec<String>,
    /// The run's new files not copied to `artifacts/`, and why (over the
    /// size cap or the disk budget, a link, …).
    pub artifacts_skipped: Vec<Skipped>,
    /// Files the run added that are build or cache outputs (`[outputs]` of
    /// the policy), left out of `session.patch`; relative to the work root.
    pub left_out: Vec<String>,
    /// What went wrong after the patch was saved (e.g. the sandbox could not
    /// be removed).
    pub warnings: Vec<String>,
    /// The sandbox's limits and what held each (`by`: `cgroup`, `rlimit`
    /// where a per-process limit stood in, `ah`, `none`, `not_asked`), as
    /// the started container's init reported them where it could be read.
    pub limits: Vec<ah_sandbox::limits::Held>,
    /// Why the run is poisoned (a violating step could not be undone), when
    /// it is: such a run's patch must never be applied.
    pub poisoned: Option<String>,
    /// The check an attempt of a task was judged by (`ah -N --check`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check: Option<CheckRecord>,
    /// What went to and from a remote engine, in bytes (`--engine
    /// podman-remote` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub traffic: Option<ah_sandbox::Traffic>,
}

/// The step of an earlier run whose files a run started from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RestoredFrom {
    pub run_id: String,
    pub step: u32,
    /// That run's commit at the step (hex): the new run's starting point.
    pub commit: String,
    /// The session message the conversation was forked at, or the head it
    /// went on from (its id and its number `@N`).
    pub message_id: String,
    pub message_seq: i64,
    /// Why: `fork` (the conversation was forked or checked out there) or
    /// `not_applied` (the session's previous run was not applied, so the
    /// conversation goes on with the files that run left).
    pub because: String,
}

/// A path a step wrote against the write policy (the step was reverted).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ViolationRecord {
    pub step: u32,
    pub path: String,
    /// The policy rule the path broke.
    pub rule: String,
}

/// Size of `session.patch`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PatchStats {
    pub files: u32,
    pub added: u64,
    pub removed: u64,
}

/// How the patch was reviewed and what was decided.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ReviewRecord {
    pub mode: ReviewMode,
    pub decision: ReviewDecision,
    pub reason: Option<String>,
    /// The rounds in which the user sent the model back to revise its
    /// work, in order, before the decision above.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rounds: Vec<ReviseRound>,
    /// Each unit's decision when the user chose hunk by hunk, in patch
    /// order; absent otherwise.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hunks: Vec<HunkRecord>,
}

/// A check run in a run's sandbox once its agent was done.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CheckRecord {
    pub command: String,
    /// `None`: it was killed at its timeout or could not run.
    pub exit_code: Option<i32>,
    pub passed: bool,
    pub duration_ms: u64,
}

/// One round of a review that sent the model back to work: the user's
/// note and the hunks they rejected, with their reasons.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ReviseRound {
    /// The shadow repo's head the round's patch was made at.
    pub head: String,
    pub note: String,
    /// The hunks the user rejected (each `rejected`, with its reason).
    pub rejected: Vec<HunkRecord>,
}

/// What became of one unit of a patch chosen hunk by hunk: a hunk, a piece
/// of a split hunk, or a file section taken whole.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct HunkRecord {
    /// The file, relative to the project (the new path of a rename).
    pub path: String,
    /// The hunk's `@@ -A,B +C,D @@`, or what the section taken whole does
    /// (`new file (+3 −0)`, `mode 100644 → 100755`, …).
    pub header: String,
    pub decision: HunkOutcome,
    /// Why the user rejected it, when they said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// What became of one unit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HunkOutcome {
    /// Chosen, and applied with the other chosen units.
    Applied,
    /// Chosen, but the apply failed: it is in `chosen.patch`.
    NotApplied,
    /// Rejected by the user: it is in `rest.patch`.
    #[default]
    Rejected,
    /// Left undecided (the user quit the choice): it is in `rest.patch`.
    Undecided,
}

/// What becomes of a finished run's patch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReviewMode {
    /// Shown to the user, who decides.
    Ask,
    /// Applied when the auto-review rules allow, else saved.
    Auto,
    /// Saved only.
    #[default]
    Never,
}

impl ReviewMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ReviewMode::Ask => "ask",
            ReviewMode::Auto => "auto",
            ReviewMode::Never => "never",
        }
    }
}

/// What became of a run's patch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReviewDecision {
    Applied,
    /// Some of its files, chosen by the user, were applied.
    PartlyApplied,
    ApplyFailed,
    #[default]
    Saved,
    /// The run changed nothing.
    Empty,
    /// The run was poisoned: its patch must not be applied.
    Refused,
    Discarded,
    /// The run was interrupted.
    Aborted,
    /// The engine stopped before it was done.
    Stopped,
}

impl ReviewDecision {
    pub fn as_str(self) -> &'static str {
        match self {
            ReviewDecision::Applied => "applied",
            ReviewDecision::PartlyApplied => "partly_applied",
            ReviewDecision::ApplyFailed => "apply_failed",
            ReviewDecision::Saved => "saved",
            ReviewDecision::Empty => "empty",
            ReviewDecision::Refused => "refused",
            ReviewDecision::Discarded => "discarded",
            ReviewDecision::Aborted => "aborted",
            ReviewDecision::Stopped => "stopped",
        }
    }
}

impl Manifest {
    /// A manifest for a run that starts now.
    pub fn new(run_id: &str, task: &str, model: &str, backend: &str) -> Manifest {
        Manifest {
            run_id: run_id.to_string(),
            task: task.to_string(),
            model: model.to_string(),
            backend: backend.to_string(),
            started_at: format_rfc3339(SystemTime::now()),
            ..Manifest::default()
        }
    }

    pub fn load(path: &Path) -> Result<Manifest> {
        let bytes = std::fs::read(path).map_err(io_err("read", path))?;
        serde_json::from_slice(&bytes).map_err(|source| RunDirError::Manifest {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Writes the manifest as pretty JSON to a temporary file next to `path`,
    /// then renames it over `path`, so a reader never sees half a manifest.
    pub fn save(&self, path: &Path) -> Result<()> {
        let mut json = serde_json::to_vec_pretty(self).map_err(|source| RunDirError::Manifest {
            path: path.to_path_buf(),
            source,
        })?;
        json.push(b'\n');
        let json = ah_base::redact::bytes(&json);
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut tmp =
            tempfile::NamedTempFile::new_in(dir).map_err(io_err("create a file in", dir))?;
        tmp.write_all(&json)
            .and_then(|()| tmp.as_file().sync_all())
            .map_err(io_err("write", tmp.path()))?;
        tmp.persist(path)
            .map_err(|e| io_err("replace", path)(e.error))?;
        Ok(())
    }
}
