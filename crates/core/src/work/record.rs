//! `phases/work.json` in the run directory: which session branch each phase
//! is, what it left and how the session ended, rewritten after every phase
//! so a crashed session still tells how far it got.

use std::path::Path;

use serde::Serialize;

use super::phase::Phase;
use super::tools::Decision;
use super::{WorkEnd, WorkError};

/// The whole work session, as `work.json` holds it.
#[derive(Debug, Clone, Serialize)]
pub struct WorkRecord {
    pub issue: String,
    pub max_rounds: u32,
    /// The session message holding the issue; every phase branches from it.
    pub root_message: String,
    /// Do rounds started.
    pub rounds: u32,
    /// `None` while the session runs or when it failed.
    pub end: Option<WorkEnd>,
    pub phases: Vec<PhaseRecord>,
}

/// One phase of the session.
#[derive(Debug, Clone, Serialize)]
pub struct PhaseRecord {
    pub phase: Phase,
    pub round: u32,
    /// The phase's first message (its brief) and its last.
    pub first_message: String,
    pub last_message: Option<String>,
    /// The phase's file relative to `phases/`, when it was written.
    pub file: Option<String>,
    /// Whether it had to be reminded of its file.
    pub reminded: bool,
    /// The act phase's decision.
    pub decision: Option<Decision>,
}

impl WorkRecord {
    pub fn new(issue: &str, max_rounds: u32, root_message: &str) -> WorkRecord {
        WorkRecord {
            issue: issue.to_string(),
            max_rounds,
            root_message: root_message.to_string(),
            rounds: 0,
            end: None,
            phases: Vec::new(),
        }
    }

    /// Writes `<phases_dir>/work.json`.
    pub fn save(&self, phases_dir: &Path) -> Result<(), WorkError> {
        std::fs::create_dir_all(phases_dir).map_err(|source| WorkError::Record {
            path: phases_dir.to_path_buf(),
            source,
        })?;
        write_json(&phases_dir.join("work.json"), self)
    }
}

impl PhaseRecord {
    pub fn new(phase: Phase, round: u32, first_message: &str) -> PhaseRecord {
        PhaseRecord {
            phase,
            round,
            first_message: first_message.to_string(),
            last_message: None,
            file: None,
            reminded: false,
            decision: None,
        }
    }
}

/// Writes `value` as pretty JSON to `path`.
pub(super) fn write_json(path: &Path, value: &impl Serialize) -> Result<(), WorkError> {
    let record = |source| WorkError::Record {
        path: path.to_path_buf(),
        source,
    };
    let text = serde_json::to_string_pretty(value).map_err(|e| record(e.into()))?;
    std::fs::write(path, text + "\n").map_err(record)
}
