//! The end of a run: the sandbox is handed off to a cleanup off the run's
//! path (or, where it cannot be, or [`Cleanup::Wait`] says so, stopped
//! here), the work copy goes with it (the shadow repo keeps every step;
//! its bytes count as freed), `session.patch` is written (without the
//! build and cache outputs the run added) and the files the run added,
//! outputs included, are copied out as artifacts. The patch and the
//! artifacts are written out of the shadow repo, where a sparse file or
//! one file under many names takes almost nothing, so both take their
//! bytes from what the disk budget leaves (`DiskBudget::room`): the patch
//! first, kept whole or not at all, then each artifact that still fits.

use std::path::PathBuf;

use super::{Run, RunError};
use crate::artifacts::{self, ArtifactReport};
use crate::patch::{self, PatchInfo};
use crate::rundir::ViolationRecord;
use ah_sandbox::cleanup::{Cleanup, Remains};
use ah_sandbox::disk::Room;
use ah_sandbox::egress::EgressDecision;

/// What a finished run leaves behind.
#[derive(Debug)]
pub struct RunResult {
    /// What `session.patch` holds (nothing when it was not saved).
    pub patch: PatchInfo,
    pub patch_path: PathBuf,
    /// Why `session.patch` was not saved (it would pass the disk budget):
    /// the run's changes are then only in its shadow repo.
    pub patch_not_saved: Option<String>,
    pub baseline: String,
    pub head: String,
    pub steps: u32,
    /// Project files the read policy kept out of the work copy.
    pub withheld: Vec<String>,
    pub violations: Vec<ViolationRecord>,
    pub artifacts: ArtifactReport,
    /// What went wrong after the patch was saved (sandbox removal,
    /// artifacts, cleanup); the run's outcome stands.
    pub warnings: Vec<String>,
    /// Why the patch must never be applied, when a violating step could not
    /// be undone.
    pub poisoned: Option<String>,
    /// Network proxy decisions made after the last step was reported (a
    /// request still being checked when its step ended).
    pub egress: Vec<EgressDecision>,
    /// What went to and from a remote engine (`None`: the sandbox was here).
    pub traffic: Option<ah_sandbox::Traffic>,
    /// What is left to remove (the containers, the work copy), when the
    /// sandbox was handed off: the caller removes it, off the user's path
    /// ([`Remains::detach`]).
    pub remains: Option<Remains>,
}

/// The patch of a run not over yet ([`Run::draft_patch`]).
#[derive(Debug, Clone)]
pub struct Draft {
    pub patch: PatchInfo,
    pub patch_path: PathBuf,
    /// The shadow repo's head it was made at.
    pub head: String,
    /// Why the patch must never be applied, when it must not.
    pub poisoned: Option<String>,
}

impl Run {
    /// The lower layer of an overlay is the live project: a file the user
    /// changed during the run showed through to the commands until the run
    /// changed it. Where that happened to a file the run also changed, the
    /// user is told: the agent may have worked on the newer version, and
    /// the patch may carry the user's change too.
    fn project_moved(&self, overlay: &crate::overlay::Overlay) -> Option<String> {
        let changed: Vec<String> = self
            .shadow
            .changes_between(self.baseline, self.head)
            .ok()?
            .into_iter()
            .map(|c| c.path)
            .collect();
        let moved = match self
            .shadow
            .differs_from(overlay.lower, &overlay.project, &changed)
        {
            Ok(moved) => moved,
            Err(err) => {
                return Some(format!(
                    "the project could not be compared with the run's start: {err}"
                ));
            }
        };
        (!moved.is_empty()).then(|| {
            format!(
                "the project changed during the run where the run changed it too ({}): the agent \
                 may have worked on the newer version, and the patch may show that change as well; \
                 review it before applying",
                moved.join(", ")
            )
        })
    }

    /// Writes `session.patch` as the run stands, its sandbox still up: the
    /// patch a review held before the run's end looks at (the run may go
    /// on after it). `None` when it would pass the disk budget (the end
    /// says so).
    pub async fn draft_patch(&mut self) -> Result<Option<Draft>, RunError> {
        self.settle().await.map_err(|err| {
            RunError::Shadow(format!("the project's baseline could not be taken: {err}"))
        })?;
        let mut room = self.disk_budget.room(self.dir.path());
        let (patch, not_saved) = self.write_patch(&mut room)?;
        self.drafted = not_saved.is_none().then(|| (self.head, patch.clone()));
        Ok(not_saved.is_none().then(|| Draft {
            patch,
            patch_path: self.dir.patch_path(),
            head: self.head.to_string(),
            poisoned: self.poisoned.clone(),
        }))
    }

    /// Hands the sandbox off (see [`Run::set_cleanup`]) or stops it,
    /// writes `session.patch` and copies the added files out as artifacts,
    /// within what the disk budget leaves once the work copy is gone (the
    /// shadow repo keeps every step). Only a patch that cannot be built is
    /// an error: the rest are warnings in the result, so the run's outcome
    /// is never lost.
    pub async fn finish(mut self) -> Result<RunResult, RunError> {
        let mut warnings = Vec::new();
        let settled = self.settle().await.map_err(|err| {
            RunError::Shadow(format!("the project's baseline could not be taken: {err}"))
        });
        self.mcp.shutdown().await;
        let work = match &self.overlay {
            Some(overlay) => overlay.dirs.upper.clone(),
            None => self.dir.work_dir(),
        };
        let remains = match self.cleanup {
            Cleanup::Detached => self.hand_off(&work).await,
            Cleanup::Wait => None,
        };
        if remains.is_none() {
            self.stop_sandbox(&work, &mut warnings).await;
        }
        let egress = self.backend.take_egress();
        let traffic = self.backend.traffic();
        settled?;
        if let Some(overlay) = &self.overlay {
            warnings.extend(self.project_moved(overlay));
        }
        // Measured as if the work copy were gone: the end's writes come
        // from the shadow repo, and the room it took is theirs.
        let mut room = match remains {
            Some(_) => self.disk_budget.room_without(self.dir.path(), &work),
            None => self.disk_budget.room(self.dir.path()),
        };
        let patch_path = self.dir.patch_path();
        // The patch written before the end, when no step came since and
        // it still fits.
        let (info, patch_not_saved) = match self.drafted.take() {
            Some((head, info)) if head == self.head && info.bytes <= room.most() => {
                room.take(room.cost(info.bytes));
                (info, None)
            }
            _ => self.write_patch(&mut room)?,
        };
        let artifacts = self
            .shadow
            .changes_between(self.baseline, self.head)
            .map_err(|e| e.to_string())
            .and_then(|changes| {
                artifacts::copy_added(
                    &self.shadow,
                    self.head,
                    &self.dir.artifacts_dir(),
                    &changes,
                    self.artifact_cap,
                    &mut room,
                )
                .map_err(|e| e.to_string())
            })
            .unwrap_or_else(|err| {
                warnings.push(format!("the run's new files were not copied out: {err}"));
                ArtifactReport::default()
            });
        Ok(RunResult {
            patch: info,
            patch_path,
            patch_not_saved,
            baseline: self.baseline.to_string(),
            head: self.head.to_string(),
            steps: self.steps,
            withheld: self.withheld,
            violations: self.violations,
            artifacts,
            warnings,
            poisoned: self.poisoned,
            egress,
            traffic,
            remains,
        })
    }

    /// Hands the sandbox off, and `work` with it; `None` (and nothing
    /// handed off) when the backend cannot be.
    async fn hand_off(&self, work: &std::path::Path) -> Option<Remains> {
        let mut remains = self.backend.hand_off().await?;
        remains.folders.push(work.to_path_buf());
        Some(remains)
    }

    /// Stops the sandbox and removes `work` here, what failed a warning.
    async fn stop_sandbox(&self, work: &std::path::Path, warnings: &mut Vec<String>) {
        if let Err(err) = self.backend.shutdown().await {
            warnings.push(format!("the sandbox could not be removed: {err}"));
        }
        if let Err(err) = std::fs::remove_dir_all(work) {
            warnings.push(format!(
                "the work copy {} could not be removed: {err}",
                work.display()
            ));
        }
    }

    /// Writes `session.patch` within `room` and takes what it took: its
    /// stats, or none and why it was not saved (it would not fit).
    fn write_patch(&self, room: &mut Room) -> Result<(PatchInfo, Option<String>), RunError> {
        let written = patch::session_patch(
            &self.shadow,
            self.baseline,
            self.head,
            self.policy.outputs(),
            &self.dir.patch_path(),
            room.most(),
        );
        match written {
            Ok(info) => {
                room.take(room.cost(info.bytes));
                Ok((info, None))
            }
            Err(patch::PatchError::TooBig { .. }) => Ok((
                PatchInfo::empty(),
                Some(format!("it would take more than {}", room.describe())),
            )),
            Err(err) => Err(RunError::Patch(err.to_string())),
        }
    }
}
