//! What the container must not see of a project, found by a walk with
//! folder handles that reads names and types only: the whole project before
//! the container starts (ignored folders included: they are in the lower
//! layer too), and later the folders where something appeared
//! ([`super::late`]). Every folder the walk enters can be watched for what
//! appears in it afterwards.

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Instant;

use super::late::Watch;
use crate::shadow::NameCheck;
use crate::tree::scan::{Limits, join, refusal};
use crate::workspace::Withhold;
use ah_tools::fs_beneath::dir::{DirHandle, Kind};

/// What a walk found to hide.
#[derive(Debug, Default)]
pub struct Survey {
    /// Paths to hide, relative to the project: the top-level `.git` and
    /// `.ah`, every socket, FIFO and device file (a socket in the project
    /// could connect a command to a host service), what the read policy
    /// withholds and what withheld links lead to, and names git refuses.
    pub hidden: Vec<Vec<u8>>,
    /// The withheld files and links, relative to the project, sorted.
    pub withheld: Vec<String>,
}

/// The most entries a survey lists before it gives up.
const SURVEY_MAX_ENTRIES: usize = 2_000_000;

/// How long a survey may take: the project is the user's, and a large one
/// is legitimately slow to read.
const SURVEY_SECONDS: u64 = 600;

/// How far a walk goes from the folder it starts in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// The folder's own entries only.
    Shallow,
    /// Everything below it.
    Deep,
}

/// Walks `project` for what [`Survey`] lists; `withhold` is asked about
/// files and links, with paths relative to the project, and `names`
/// about every name (see [`NameCheck`]); every folder entered is watched
/// when `watch` is given.
pub fn survey(
    project: &Path,
    withhold: &Withhold<'_>,
    names: &mut NameCheck<'_>,
    watch: Option<&mut Watch>,
) -> io::Result<Survey> {
    walk(project, b"", Reach::Deep, withhold, names, watch)
}

/// [`survey`] from the project's folder `start` (`b""`: the root), as far
/// as `reach` says. A `start` that is gone (or no longer a folder) holds
/// nothing.
pub fn walk(
    project: &Path,
    start: &[u8],
    reach: Reach,
    withhold: &Withhold<'_>,
    names: &mut NameCheck<'_>,
    mut watch: Option<&mut Watch>,
) -> io::Result<Survey> {
    let limits = Limits::within(SURVEY_SECONDS);
    let mut found = Survey::default();
    let mut listed = 0usize;
    let Some(first) = open_folder(project, start)? else {
        return Ok(found);
    };
    let depth = start
        .split(|&b| b == b'/')
        .filter(|p| !p.is_empty())
        .count();
    let mut pending = vec![(first, start.to_vec(), depth)];
    let mut withheld_links = Vec::new();
    while let Some((dir, path, depth)) = pending.pop() {
        if Instant::now() > limits.deadline {
            return Err(io::Error::other("reading the project took too long"));
        }
        // Watched before it is listed: nothing made meanwhile is missed.
        if let Some(watch) = watch.as_deref_mut() {
            watch.add(&dir, &path);
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
            // As the baseline's walk counts depth: a folder one deeper than
            // the files beside it.
            let deep = depth + usize::from(kind == Kind::Dir);
            // A `.git` below the top is a nested repository's: the
            // baseline passes over its folder, and it stays as it is.
            let nested = !path.is_empty() && name == b".git";
            let hide = top
                || !nested
                    && (refusal(&name, &rel, deep, &limits).is_some() || !names.accepts(&name))
                || match kind {
                    Kind::Special => true,
                    Kind::File | Kind::Link => {
                        let withheld = withhold(Path::new(OsStr::from_bytes(&rel)));
                        if withheld {
                            let shown = String::from_utf8_lossy(&rel).into_owned();
                            if kind == Kind::Link {
                                withheld_links.push(shown.clone());
                            }
                            found.withheld.push(shown);
                        }
                        withheld
                    }
                    Kind::Dir => false,
                };
            if hide {
                found.hidden.push(rel);
            } else if kind == Kind::Dir && reach == Reach::Deep {
                match dir.open_dir(&name) {
                    Ok(sub) => pending.push((sub, rel, depth + 1)),
                    // Unreadable to ah: unreadable to the container too.
                    Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {}
                    Err(e) => return Err(e),
                }
            }
        }
    }
    // What a withheld link leads to holds the same secret: hidden too,
    // unless a folder it is in is hidden already.
    let links: Vec<&str> = withheld_links.iter().map(String::as_str).collect();
    let hidden_already = |target: &str| under_any(&found.hidden, target.as_bytes());
    for target in crate::workspace::link_targets(project, &links, &hidden_already) {
        found.hidden.push(target.clone().into_bytes());
        found.withheld.push(target);
    }
    found.hidden.sort();
    found.withheld.sort();
    Ok(found)
}

/// Whether `path` is one of `paths` or lies in one of them.
pub(super) fn under_any<P: AsRef<[u8]>>(paths: impl IntoIterator<Item = P>, path: &[u8]) -> bool {
    paths.into_iter().any(|known| {
        let known = known.as_ref();
        path.starts_with(known) && (path.len() == known.len() || path[known.len()] == b'/')
    })
}

/// The project's folder `rel`, entered without following a link; `None`
/// when it is gone or not a folder.
fn open_folder(project: &Path, rel: &[u8]) -> io::Result<Option<DirHandle>> {
    let mut dir = DirHandle::open_root(project)?;
    for part in rel.split(|&b| b == b'/').filter(|p| !p.is_empty()) {
        dir = match dir.open_dir(part) {
            Ok(inner) => inner,
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => {
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
    }
    Ok(Some(dir))
}
