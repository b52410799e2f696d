//! The overlay work copy of a podman run. The container's `/work` is an
//! overlay whose lower layer is the project itself and whose upper folder
//! (`upper/` in the run directory) receives every change: nothing is copied
//! before the run, the project is never written, and a step is recorded from
//! what the upper folder holds ([`crate::shadow::Layers`]).
//!
//! Before the container starts, whiteouts (character devices 0/0, which
//! overlayfs reads as "deleted") in the upper folder hide what the container
//! must not see of the project ([`survey`]): its `.git` and `.ah`, sockets,
//! FIFOs and devices, the files the read policy withholds, and entries git
//! cannot record. The folders leading to a
//! whiteout are made in the upper folder with the mode and owner of the
//! project's, since the merged view shows the upper folder's.

use std::ffi::OsStr;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::shadow::ShadowRepo;
use crate::workspace::Withhold;
use ah_sandbox::podman::OverlayDirs;
use ah_tools::fs_beneath::dir::{DirHandle, Kind};

use rustix::fs::{FileType, Gid, Mode, OFlags, Uid};

/// An overlay work copy: the project it lies over, and its folders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlay {
    /// The lower layer: the project itself.
    pub project: std::path::PathBuf,
    pub dirs: OverlayDirs,
}

/// What [`lay`] made of a project.
#[derive(Debug)]
pub struct Laid {
    /// The baseline commit in the shadow repo.
    pub baseline: git2::Oid,
    /// The withheld files and links, relative to the project, sorted.
    pub withheld: Vec<String>,
}

/// Lays an overlay work copy over `project`: surveys it, takes `shadow`'s
/// baseline from it, and makes `dirs` with the whiteouts that hide what
/// the container must not see (what the survey found, and what git cannot
/// record).
pub fn lay(
    shadow: &ShadowRepo,
    project: &Path,
    dirs: &OverlayDirs,
    withhold: &(dyn Fn(&Path) -> bool + Sync),
) -> Result<Laid, String> {
    // The survey reads names only, the baseline reads and hashes files: on
    // two cores, side by side.
    let (baseline, survey) = std::thread::scope(|scope| {
        let surveying = scope.spawn(|| survey(project, withhold));
        let mut found = None;
        let baseline = shadow.project_baseline(project, || {
            let survey = surveying
                .join()
                .map_err(|_| "reading the project failed".to_string())?
                .map_err(|e| format!("could not read the project: {e}"))?;
            let hidden = survey.hidden.iter().cloned().collect();
            found = Some(survey);
            Ok(hidden)
        });
        (baseline, found)
    });
    let baseline = baseline.map_err(|e| e.to_string())?;
    let survey = survey.ok_or("the project was not surveyed")?;
    let mut whiteouts = survey.hidden;
    whiteouts.extend(baseline.refused);
    prepare(project, dirs, &whiteouts)
        .map_err(|e| format!("could not prepare the overlay work copy: {e}"))?;
    Ok(Laid {
        baseline: baseline.commit,
        withheld: survey.withheld,
    })
}

/// Makes the empty upper and work folders for `project` and hides `hidden`
/// (paths relative to the project) from the merged view.
pub fn prepare(project: &Path, dirs: &OverlayDirs, hidden: &[Vec<u8>]) -> io::Result<()> {
    for dir in [&dirs.upper, &dirs.work] {
        std::fs::create_dir(dir)?;
    }
    let open = |path: &Path| {
        rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
    };
    let lower = open(project)?;
    let upper = open(&dirs.upper)?;
    same_owner_and_mode(&lower, &upper)?;
    for path in hidden {
        whiteout(&lower, &upper, path)?;
    }
    Ok(())
}

/// Hides `path` of the lower layer with a whiteout in the upper folder.
fn whiteout(lower: &OwnedFd, upper: &OwnedFd, path: &[u8]) -> io::Result<()> {
    let mut parts: Vec<&[u8]> = path.split(|&b| b == b'/').collect();
    let Some(name) = parts.pop() else {
        return Ok(());
    };
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let (mut lower, mut upper) = (lower.try_clone()?, upper.try_clone()?);
    for part in parts {
        let lower_dir = rustix::fs::openat(&lower, part, flags, Mode::empty())?;
        match rustix::fs::mkdirat(&upper, part, Mode::from_raw_mode(0o700)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(e) => return Err(e.into()),
        }
        let upper_dir = rustix::fs::openat(&upper, part, flags, Mode::empty())?;
        same_owner_and_mode(&lower_dir, &upper_dir)?;
        (lower, upper) = (lower_dir, upper_dir);
    }
    match rustix::fs::mknodat(&upper, name, FileType::CharacterDevice, Mode::empty(), 0) {
        Ok(()) | Err(rustix::io::Errno::EXIST) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Gives the upper folder `upper` the owner and mode of the lower `lower`.
fn same_owner_and_mode(lower: &OwnedFd, upper: &OwnedFd) -> io::Result<()> {
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
    rustix::fs::fchmod(upper, Mode::from_raw_mode(stat.st_mode & 0o7777))?;
    Ok(())
}

/// What the container must not see of a project, found by one walk of the
/// whole project (ignored folders included: they are in the lower layer
/// too), with folder handles, reading names and types only.
#[derive(Debug, Default)]
pub struct Survey {
    /// Paths to hide, relative to the project: the top-level `.git` and
    /// `.ah`, every socket, FIFO and device file (a socket in the project
    /// could connect a command to a host service), and what the read policy
    /// withholds.
    pub hidden: Vec<Vec<u8>>,
    /// The withheld files and links, relative to the project, sorted.
    pub withheld: Vec<String>,
}

/// The most entries a survey lists before it gives up.
const SURVEY_MAX_ENTRIES: usize = 2_000_000;

/// How long a survey may take: the project is the user's, and a large one
/// is legitimately slow to read.
const SURVEY_SECONDS: u64 = 600;

/// Walks `project` for what [`Survey`] lists; `withhold` is asked about
/// files and links, with paths relative to the project.
pub fn survey(project: &Path, withhold: &Withhold<'_>) -> io::Result<Survey> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(SURVEY_SECONDS);
    let mut found = Survey::default();
    let mut listed = 0usize;
    let mut pending = vec![(DirHandle::open_root(project)?, Vec::new())];
    while let Some((dir, path)) = pending.pop() {
        if std::time::Instant::now() > deadline {
            return Err(io::Error::other("reading the project took too long"));
        }
        let entries = dir.entries()?;
        listed += entries.len();
        if listed > SURVEY_MAX_ENTRIES {
            return Err(io::Error::other(format!(
                "the project has over {SURVEY_MAX_ENTRIES} entries"
            )));
        }
        for (name, kind) in entries {
            let rel = join(&path, &name);
            let top = path.is_empty() && (name == b".git" || name == b".ah");
            let hide = top
                || match kind {
                    Kind::Special => true,
                    Kind::File | Kind::Link => {
                        let withheld = withhold(Path::new(OsStr::from_bytes(&rel)));
                        if withheld {
                            found
                                .withheld
                                .push(String::from_utf8_lossy(&rel).into_owned());
                        }
                        withheld
                    }
                    Kind::Dir => false,
                };
            if hide {
                found.hidden.push(rel);
            } else if kind == Kind::Dir {
                match dir.open_dir(&name) {
                    Ok(sub) => pending.push((sub, rel)),
                    // Unreadable to ah: unreadable to the container too.
                    Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {}
                    Err(e) => return Err(e),
                }
            }
        }
    }
    found.hidden.sort();
    found.withheld.sort();
    Ok(found)
}

/// `dir/name`, or `name` at the root.
fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
    let mut path = dir.to_vec();
    if !path.is_empty() {
        path.push(b'/');
    }
    path.extend_from_slice(name);
    path
}
