//! A run that starts from the files of an earlier run's step (time travel).
//!
//! The work copy must be what that step left, and the new run's patch must
//! still apply to the host, so:
//!
//! - the new shadow repo takes over the earlier repo's objects (linked or
//!   copied: the earlier run directory may be pruned afterwards), checks the
//!   step's commit out into the empty work copy, and keeps the earlier run's
//!   baseline as its own, so `session.patch` is old baseline..new head and
//!   `git apply --3way` finds its preimages as it does for the earlier run;
//! - what a shadow repo never records comes from the project as it is now,
//!   as in a fresh copy: paths the project's ignore rules leave out (build
//!   folders, `node_modules`, `.env`…) and nested repositories. Recorded
//!   paths come only from the commit: a recorded file the step did not have
//!   (deleted by the earlier run, or added to the host later) is not there.
//!
//! Whether a path is ignored is asked of the restored work copy, so the
//! `.gitignore` files of that point decide, as they did for the earlier run.
//! What the read policy withholds is not copied from the project, as in a
//! fresh copy. The commit holds no withheld file either: the earlier run's
//! baseline was taken of a work copy that never had them. (A commit that
//! does hold one, from a run made under other read rules, keeps it: taking
//! it out would make the patch delete the host's file.)

#[cfg(test)]
mod tests;

use std::ffi::OsString;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use std::os::unix::ffi::OsStrExt;

use ah_sandbox::podman::OverlayDirs;
use git2::Oid;

use super::overlay;
use super::policy::Policy;
use super::run::Start;
use super::rundir::{RunDir, RunDirError};
use super::shadow::{ShadowError, ShadowRepo};
use super::tree::ignore::IgnoreCheck;
use super::workspace::{self, CopyStats, EXCLUDED_TOP_LEVEL, Withhold, WorkspaceError};

#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    #[error(
        "the files of run {run_id} were pruned: {} is gone (`ah runs prune` removes old runs)",
        shadow.display()
    )]
    Pruned { run_id: String, shadow: PathBuf },
    #[error("\"{0}\" is not a run id, so the files of that point cannot be found")]
    BadRunId(String),
    #[error("\"{0}\" is not a shadow commit id, so the files of that point cannot be found")]
    BadCommit(String),
    #[error("cannot read the run directory: {0}")]
    RunDir(#[from] RunDirError),
    #[error("cannot restore the files: {0}")]
    Shadow(#[from] ShadowError),
    #[error("cannot copy the project's unrecorded files into the work copy: {0}")]
    Copy(#[from] WorkspaceError),
    #[error("cannot lay the restored files over the project: {0}")]
    Layer(String),
}

/// The step whose files a run starts from.
#[derive(Debug, Clone, Copy)]
pub struct Source<'a> {
    pub run_id: &'a str,
    /// The earlier run's commit at that step (hex).
    pub commit: &'a str,
}

/// Fills the new run `dir`'s work copy with the files of `source` plus the
/// unrecorded files of `project` that `policy` does not withhold, and
/// starts its shadow repo there (see the module doc).
pub fn restore(
    project: &Path,
    ah_dir: &Path,
    dir: &RunDir,
    source: Source<'_>,
    policy: &Policy,
) -> Result<Start, RestoreError> {
    let (old_shadow, head) = find(ah_dir, source)?;
    let work = dir.work_dir();
    fs::create_dir_all(&work).map_err(|source| WorkspaceError::Write {
        path: work.clone(),
        source,
    })?;
    let shadow = ShadowRepo::init(&dir.shadow_dir(), &work)?;
    shadow.take_objects(&old_shadow)?;
    let baseline = shadow.start_at(head)?;
    let withhold = |rel: &Path| policy.withheld_by(rel).is_some();
    let copied = copy_unrecorded(project, &work, &shadow, &withhold)?;
    Ok(Start {
        shadow,
        baseline,
        head,
        withheld: copied.withheld,
        overlay: None,
        taking: None,
        late: None,
    })
}

/// Starts the new run `dir` from `source` as an overlay of `project`: the
/// overlay is laid as for a run from the project's files (its baseline is
/// the project's now), then what the step's files differ in is written
/// into the upper folder ([`overlay::restore_layer`]), so the merged view
/// holds the step's recorded files and the project's unrecorded ones,
/// without a copy. The run's baseline stays the earlier run's, as in
/// [`restore`]. One difference from a copy: a project file that the step
/// does not record because the step's `.gitignore` ignores it while the
/// project records it is hidden, not shown.
pub fn restore_overlay(
    project: &Path,
    ah_dir: &Path,
    dir: &RunDir,
    source: Source<'_>,
    policy: &Policy,
) -> Result<Start, RestoreError> {
    let (old_shadow, head) = find(ah_dir, source)?;
    let shadow = ShadowRepo::init(&dir.shadow_dir(), project)?;
    shadow.take_objects(&old_shadow)?;
    let dirs = OverlayDirs {
        upper: dir.upper_dir(),
        work: dir.overlay_scratch_dir(),
    };
    let withhold = |rel: &Path| policy.withheld_by(rel).is_some();
    let laid = overlay::lay(shadow, project, &dirs, &withhold).map_err(RestoreError::Layer)?;
    let shadow = laid.shadow;
    overlay::restore_layer(&shadow, project, &dirs, laid.baseline, head)
        .map_err(RestoreError::Layer)?;
    let baseline = shadow.adopt(head)?;
    Ok(Start {
        shadow,
        baseline,
        head,
        withheld: laid.withheld,
        overlay: Some(overlay::Overlay {
            project: project.to_path_buf(),
            dirs,
            lower: laid.baseline,
        }),
        taking: None,
        late: Some(laid.late),
    })
}

/// The earlier run's shadow repo and the step's commit.
fn find(ah_dir: &Path, source: Source<'_>) -> Result<(PathBuf, Oid), RestoreError> {
    let old = match RunDir::open(ah_dir, source.run_id) {
        Ok(old) => old,
        Err(RunDirError::BadId(id)) => return Err(RestoreError::BadRunId(id)),
        Err(RunDirError::NotFound { .. }) => {
            return Err(RestoreError::Pruned {
                run_id: source.run_id.to_string(),
                shadow: ah_dir.join("runs").join(source.run_id).join("shadow.git"),
            });
        }
        Err(err) => return Err(err.into()),
    };
    let old_shadow = old.shadow_dir();
    if !old_shadow.join("objects").is_dir() {
        return Err(RestoreError::Pruned {
            run_id: source.run_id.to_string(),
            shadow: old_shadow,
        });
    }
    let head =
        Oid::from_str(source.commit).map_err(|_| RestoreError::BadCommit(source.commit.into()))?;
    Ok((old_shadow, head))
}

/// Copies what `shadow` does not record from `project` into `work`: ignored
/// paths and nested repositories that `work` does not hold yet. The
/// top-level `.ah` and `.git` are left out, as from every work copy, and so
/// is what `withhold` names; the project's withheld files that `work` does
/// not hold are listed in the result.
pub fn copy_unrecorded(
    project: &Path,
    work: &Path,
    shadow: &ShadowRepo,
    withhold: &Withhold<'_>,
) -> Result<CopyStats, RestoreError> {
    let mut stats = CopyStats::default();
    let root = shadow.open_work_tree()?;
    let mut ignores = IgnoreCheck::new(&root);
    let mut is_ignored = |rel: &Path, dir: bool| {
        ignores
            .is_ignored(rel.as_os_str().as_bytes(), dir)
            .map_err(|source| WorkspaceError::Read {
                path: work.join(rel),
                source,
            })
    };
    let mut pending = vec![PathBuf::new()];
    while let Some(rel_dir) = pending.pop() {
        let src_dir = project.join(&rel_dir);
        let read_err = |source| WorkspaceError::Read {
            path: src_dir.clone(),
            source,
        };
        let mut entries: Vec<(OsString, fs::FileType)> = Vec::new();
        for entry in fs::read_dir(&src_dir).map_err(read_err)? {
            let entry = entry.map_err(read_err)?;
            let kind = entry.file_type().map_err(read_err)?;
            entries.push((entry.file_name(), kind));
        }
        for (name, kind) in entries {
            if rel_dir.as_os_str().is_empty() && EXCLUDED_TOP_LEVEL.iter().any(|x| name == *x) {
                continue;
            }
            let rel = rel_dir.join(&name);
            let (src, dst) = (project.join(&rel), work.join(&rel));
            if let Some(there) = file_type(&dst)? {
                // The commit has this path: its files win; a folder may
                // still hold unrecorded files further down.
                if kind.is_dir() && there.is_dir() {
                    pending.push(rel);
                }
                continue;
            }
            if kind.is_dir() {
                let nested_repo = file_type(&src.join(".git"))?.is_some();
                if nested_repo || is_ignored(&rel, true)? {
                    make_parent(&dst)?;
                    stats.add(workspace::copy_folder(&src, &rel, &dst, withhold)?);
                } else {
                    pending.push(rel);
                }
            } else if withhold(&rel) {
                stats.withheld.push(rel.to_string_lossy().into_owned());
            } else if is_ignored(&rel, false)? {
                make_parent(&dst)?;
                stats.add(workspace::copy_entry(&src, &dst, kind)?);
            }
        }
    }
    stats.withheld.sort();
    Ok(stats)
}

/// The type of what is at `path` (links not followed), if anything.
fn file_type(path: &Path) -> Result<Option<fs::FileType>, WorkspaceError> {
    match fs::symlink_metadata(path) {
        Ok(meta) => Ok(Some(meta.file_type())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(WorkspaceError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Creates the folders above `path` that the commit did not have.
fn make_parent(path: &Path) -> Result<(), WorkspaceError> {
    let Some(parent) = path.parent() else {
        return Ok(());
    };
    fs::create_dir_all(parent).map_err(|source| WorkspaceError::Write {
        path: parent.to_path_buf(),
        source,
    })
}
