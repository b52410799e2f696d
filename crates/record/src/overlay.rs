//! The overlay work copy of a podman run. The container's `/work` is an
//! overlay whose lower layer is the project itself and whose upper folder
//! (`upper/` in the run directory) receives every change: nothing is copied
//! before the run, the project is never written, and a step is recorded from
//! what the upper folder holds ([`crate::shadow::Layers`]).
//!
//! Before the container starts, whiteouts (character devices 0/0, which
//! overlayfs reads as "deleted") in the upper folder hide what the container
//! must not see of the project ([`survey`]): its `.git` and `.ah`, sockets,
//! FIFOs and devices, the files the read policy withholds (and what
//! withheld links lead to), and entries git cannot record. What appears in
//! the project later is found and hidden before and after every step
//! ([`LateFiles`]). The folders leading to a whiteout are made in the upper
//! folder with the mode and owner of the project's, since the merged view
//! shows the upper folder's. The baseline is then read from the project on
//! a thread ([`BaselineThread`]) while the container starts.

mod late;
mod survey;
mod taking;

pub use late::{LateFiles, Watch};
pub use survey::{Reach, Survey, survey, walk};
pub use taking::{Baseline, BaselineThread};

use std::collections::HashSet;
use std::io;
use std::os::fd::AsFd;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::shadow::{ProjectSeed, ShadowRepo};
use crate::workspace::Withhold;
use ah_sandbox::podman::OverlayDirs;
use ah_tools::fs_beneath::dir::{DirHandle, Kind};

use rustix::fs::{FileType, Gid, Mode, Uid};

/// An overlay work copy: the project it lies over, and its folders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlay {
    /// The lower layer: the project itself.
    pub project: std::path::PathBuf,
    pub dirs: OverlayDirs,
    /// The project's files when the run started (its baseline, or for a
    /// restored run the commit its upper folder was written over).
    pub lower: git2::Oid,
}

/// What [`lay`] made of a project.
#[derive(Debug)]
pub struct OverlayWithBaseline {
    /// The shadow repo that holds the baseline.
    pub shadow: ShadowRepo,
    /// The baseline commit in the shadow repo.
    pub baseline: git2::Oid,
    /// The withheld files and links, relative to the project, sorted.
    pub withheld: Vec<String>,
    /// The watch on what appears in the project from now on.
    pub late: LateFiles,
}

/// An overlay work copy being laid: its upper folder is ready for the
/// container, its baseline is being taken.
#[derive(Debug)]
pub struct OverlayTakingBaseline {
    /// The withheld files and links, relative to the project, sorted.
    pub withheld: Vec<String>,
    pub taking: BaselineThread,
    /// The watch on what appears in the project from now on.
    pub late: LateFiles,
}

/// Lays an overlay work copy over `project`: surveys it, makes `dirs`
/// with the whiteouts that hide what the container must not see, and
/// starts taking `shadow`'s baseline from the project, without what the
/// survey hid, on a thread ([`BaselineThread`]).
pub fn begin(
    shadow: ShadowRepo,
    project: &Path,
    dirs: &OverlayDirs,
    withhold: &Withhold<'_>,
) -> Result<OverlayTakingBaseline, String> {
    // The baseline's thread starts now, on a handle of its own: it reads the
    // project's index (tens of milliseconds for a large one) beside the
    // survey, then walks the project once the survey says what to pass over.
    let (surveyed, hidden_then) = std::sync::mpsc::channel::<HashSet<Vec<u8>>>();
    let taker = ShadowRepo::open(shadow.git_dir(), project).map_err(|e| e.to_string())?;
    let taking = {
        let project = project.to_path_buf();
        BaselineThread::spawn(move || {
            let seed = ProjectSeed::read(&project);
            let hidden = hidden_then
                .recv()
                .map_err(|_| "the survey of the project ended before it was done".to_string())?;
            let baseline = taker
                .project_baseline(&project, &hidden, seed)
                .map_err(|e| e.to_string())?;
            Ok(Baseline {
                shadow: taker,
                baseline,
            })
        })
    };
    let mut watch = Watch::new();
    let survey = {
        let mut names = shadow.name_check().map_err(|e| e.to_string())?;
        survey(project, withhold, &mut names, Some(&mut watch))
            .map_err(|e| format!("could not read the project: {e}"))?
    };
    prepare(project, dirs, &survey.hidden)
        .map_err(|e| format!("could not prepare the overlay work copy: {e}"))?;
    let late = LateFiles::new(project, watch, &survey.hidden);
    // The thread has ended only if it failed; it says why when taken.
    let _ = surveyed.send(survey.hidden.into_iter().collect());
    Ok(OverlayTakingBaseline {
        withheld: survey.withheld,
        taking,
        late,
    })
}

/// [`begin`], and the baseline waited for.
pub fn lay(
    shadow: ShadowRepo,
    project: &Path,
    dirs: &OverlayDirs,
    withhold: &Withhold<'_>,
) -> Result<OverlayWithBaseline, String> {
    let laying = begin(shadow, project, dirs, withhold)?;
    let Baseline { shadow, baseline } = laying.taking.take()?;
    Ok(OverlayWithBaseline {
        shadow,
        baseline,
        withheld: laying.withheld,
        late: laying.late,
    })
}

/// Makes the empty upper and work folders for `project` and hides `hidden`
/// (paths relative to the project) from the merged view.
pub fn prepare(project: &Path, dirs: &OverlayDirs, hidden: &[Vec<u8>]) -> io::Result<()> {
    for dir in [&dirs.upper, &dirs.work] {
        std::fs::create_dir(dir)?;
    }
    let (lower, upper) = (
        DirHandle::open_root(project)?,
        DirHandle::open_root(&dirs.upper)?,
    );
    same_owner_and_mode(&lower, &upper, None)?;
    let deadline = Instant::now() + Duration::from_secs(LAYER_SECONDS);
    for path in hidden {
        hide(&lower, &upper, path, deadline)?;
    }
    Ok(())
}

/// How long writing the upper folder of a start may take.
const LAYER_SECONDS: u64 = 600;

/// Makes the merged view over `project` hold commit `to` of `shadow`
/// where the project holds `from` (the project's baseline, just taken):
/// what differs is written into the upper folder `dirs.upper`, files and
/// links from the shadow's objects, deletions as whiteouts. Used before
/// the container starts, on an upper folder that holds only what ah wrote.
pub fn restore_layer(
    shadow: &ShadowRepo,
    project: &Path,
    dirs: &OverlayDirs,
    from: git2::Oid,
    to: git2::Oid,
) -> Result<usize, String> {
    let layer = shadow
        .layer_between(from, to)
        .map_err(|e| format!("could not compare the project with the files to restore: {e}"))?;
    let (lower, upper) = DirHandle::open_root(project)
        .and_then(|lower| Ok((lower, DirHandle::open_root(&dirs.upper)?)))
        .map_err(|e| format!("could not open the overlay's layers: {e}"))?;
    let deadline = Instant::now() + Duration::from_secs(LAYER_SECONDS);
    let failed = |path: &[u8]| {
        let path = String::from_utf8_lossy(path).into_owned();
        move |e: io::Error| format!("could not restore {path} over the project: {e}")
    };
    // Deletions first: a path that becomes a folder replaces its whiteout.
    let (gone, written): (Vec<_>, Vec<_>) = layer.iter().partition(|e| e.entry.is_none());
    for entry in &gone {
        hide(&lower, &upper, &entry.path, deadline).map_err(failed(&entry.path))?;
    }
    for entry in &written {
        let Some((mode, id)) = entry.entry else {
            continue;
        };
        let (dir, name) =
            upper_folder(&lower, &upper, &entry.path, deadline).map_err(failed(&entry.path))?;
        shadow
            .write_entry(&dir, name, mode, id, deadline)
            .map_err(failed(&entry.path))?;
    }
    for folder in emptied(&gone) {
        hide_folder(&lower, &upper, &folder, deadline).map_err(failed(&folder))?;
    }
    Ok(layer.len())
}

/// The folders of deleted paths, shallowest first: a folder whose every
/// entry is gone is hidden as a whole ([`hide_folder`]), as the steps'
/// `rm -r` would have, not left empty.
fn emptied(gone: &[&crate::shadow::LayerEntry]) -> Vec<Vec<u8>> {
    let mut folders = std::collections::BTreeSet::new();
    for entry in gone {
        let path = &entry.path;
        for (at, _) in path.iter().enumerate().filter(|(_, b)| **b == b'/') {
            folders.insert(path[..at].to_vec());
        }
    }
    let mut folders: Vec<Vec<u8>> = folders.into_iter().collect();
    folders.sort_by_key(|f| f.iter().filter(|b| **b == b'/').count());
    folders
}

/// Hides the lower folder `path` with one whiteout when nothing of it is
/// left in the merged view: every entry of the lower folder is hidden, and
/// the upper folder holds nothing else (checked depth first, bounded by
/// `deadline`).
fn hide_folder(
    lower: &DirHandle,
    upper: &DirHandle,
    path: &[u8],
    deadline: Instant,
) -> io::Result<()> {
    let open = |root: &DirHandle| {
        path.split(|&b| b == b'/')
            .try_fold(root.open_dir(b".")?, |dir, part| dir.open_dir(part))
    };
    let (Ok(lower_dir), Ok(upper_dir)) = (open(lower), open(upper)) else {
        // Already hidden with its parent, or not a folder of both layers.
        return Ok(());
    };
    if !nothing_left(&lower_dir, &upper_dir, deadline)? {
        return Ok(());
    }
    let (dir, name) = upper_folder(lower, upper, path, deadline)?;
    dir.remove(name, deadline)?;
    rustix::fs::mknodat(&dir, name, FileType::CharacterDevice, Mode::empty(), 0)?;
    Ok(())
}

/// Whether the merged view of a lower and an upper folder is empty: each
/// entry of either is a whiteout in the upper folder, or a folder of both
/// that is empty the same way.
fn nothing_left(lower: &DirHandle, upper: &DirHandle, deadline: Instant) -> io::Result<bool> {
    let mut pending = vec![(lower.open_dir(b".")?, upper.open_dir(b".")?)];
    while let Some((lower, upper)) = pending.pop() {
        if Instant::now() > deadline {
            return Err(io::Error::other("hiding a deleted folder took too long"));
        }
        let lower_kinds: std::collections::HashMap<Vec<u8>, Kind> =
            lower.entries()?.into_iter().collect();
        let upper_kinds: std::collections::HashMap<Vec<u8>, Kind> =
            upper.entries()?.into_iter().collect();
        for (name, kind) in &upper_kinds {
            match (kind, lower_kinds.get(name)) {
                (Kind::Special, _) if is_whiteout(&upper, name)? => {}
                (Kind::Dir, Some(Kind::Dir)) => {
                    pending.push((lower.open_dir(name)?, upper.open_dir(name)?));
                }
                _ => return Ok(false),
            }
        }
        if lower_kinds
            .keys()
            .any(|name| !upper_kinds.contains_key(name))
        {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Whether `name` in `dir` is a whiteout (a character device 0/0).
fn is_whiteout(dir: &DirHandle, name: &[u8]) -> io::Result<bool> {
    let stat = dir.stat(name)?;
    Ok(FileType::from_raw_mode(stat.st_mode) == FileType::CharacterDevice && stat.st_rdev == 0)
}

/// Hides `path` of the lower layer with a whiteout in the upper folder.
fn hide(lower: &DirHandle, upper: &DirHandle, path: &[u8], deadline: Instant) -> io::Result<()> {
    let (dir, name) = upper_folder(lower, upper, path, deadline)?;
    match rustix::fs::mknodat(&dir, name, FileType::CharacterDevice, Mode::empty(), 0) {
        Ok(()) | Err(rustix::io::Errno::EXIST) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The folder of the upper layer that holds `path`, and the name in it.
/// The folders leading there are made where missing, with the owner and
/// mode of the lower layer's folder, or of the project's root (mode 0755)
/// where the lower layer has none; anything else standing where a folder
/// must be (a whiteout, a file) is replaced.
fn upper_folder<'p>(
    lower: &DirHandle,
    upper: &DirHandle,
    path: &'p [u8],
    deadline: Instant,
) -> io::Result<(DirHandle, &'p [u8])> {
    let mut parts: Vec<&[u8]> = path.split(|&b| b == b'/').collect();
    let name = parts.pop().unwrap_or_default();
    let (mut lower_dir, mut dir) = (Some(lower.open_dir(b".")?), upper.open_dir(b".")?);
    for part in parts {
        lower_dir = lower_dir.and_then(|l| l.open_dir(part).ok());
        let next = match dir.open_dir(part) {
            Ok(next) => next,
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => {
                dir.remove(part, deadline)?;
                dir.make_dir(part)?
            }
            Err(e) => return Err(e),
        };
        match &lower_dir {
            Some(like) => same_owner_and_mode(like, &next, None)?,
            None => same_owner_and_mode(lower, &next, Some(0o755))?,
        }
        dir = next;
    }
    Ok((dir, name))
}

/// Gives the upper folder `upper` the owner of the lower `lower`, and its
/// mode (or `mode`).
fn same_owner_and_mode(lower: &impl AsFd, upper: &impl AsFd, mode: Option<u32>) -> io::Result<()> {
    let stat = rustix::fs::fstat(lower)?;
    let uid = Uid::from_raw(stat.st_uid);
    let gid = Gid::from_raw(stat.st_gid);
    match rustix::fs::fchown(upper, Some(uid), Some(gid)) {
        Ok(()) => {}
        // Someone else's folder, for an unprivileged user: the container
        // could not write there either.
        Err(rustix::io::Errno::PERM) => return Ok(()),
        Err(e) => return Err(e.into()),
    }
    let mode = mode.unwrap_or(stat.st_mode & 0o7777);
    rustix::fs::fchmod(upper, Mode::from_raw_mode(mode))?;
    Ok(())
}
