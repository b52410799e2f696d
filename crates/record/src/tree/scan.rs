//! One bounded walk of a work tree the model controls, as `git add -A`
//! would see it: the files and links that are recorded (not ignored, or
//! already tracked), the nested repositories that are not, and the entries
//! that cannot be recorded at all.
//!
//! Folders are entered through handles, links are reported and never
//! followed, FIFOs, sockets and devices are passed over without being
//! opened, and `.gitignore` files are read as [`super::ignore`] says. The
//! walk gives up with an error past a deadline or an entry count, so a
//! million-file tree cannot hold the host up; what it cannot record (a name
//! git refuses, a path too deep or too long, a rules file too large) is
//! listed for the caller to treat as a violation.

use std::rc::Rc;
use std::time::Instant;

use rustix::fs::Stat;

use super::ignore::{self, Chain, MAX_RULES_BYTES, RULES_FILES, Rules};
use crate::safe_text::name_safe;
use ah_tools::fs_beneath::dir::{DirHandle, Kind};

/// Bounds of one walk.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub deadline: Instant,
    /// Entries listed, ignored ones included.
    pub max_entries: usize,
    /// Folders deep.
    pub max_depth: usize,
    /// Bytes of a path relative to the root.
    pub max_path: usize,
}

/// Folders deeper than this are not recorded (git and libgit2 give up on
/// deeper trees).
pub const MAX_DEPTH: usize = 128;
/// Paths longer than this are not recorded (below `PATH_MAX`).
pub const MAX_PATH: usize = 3072;
/// The most entries one walk lists.
pub const MAX_ENTRIES: usize = 2_000_000;

impl Limits {
    /// The default bounds, giving up `seconds` from now.
    pub fn within(seconds: u64) -> Limits {
        Limits {
            deadline: Instant::now() + std::time::Duration::from_secs(seconds),
            max_entries: MAX_ENTRIES,
            max_depth: MAX_DEPTH,
            max_path: MAX_PATH,
        }
    }
}

/// What the walk knows of the index: which files and folders are tracked.
pub trait Tracked {
    fn file(&self, path: &[u8]) -> bool;
    /// Whether anything below the folder `path` is tracked.
    fn dir(&self, path: &[u8]) -> bool;
    /// Whether the entry at `path` is not part of the tree at all, whatever
    /// it is (a project's own `.git`, a file the read policy withholds):
    /// passed over as if absent.
    fn hidden(&self, _path: &[u8], _kind: Kind) -> bool {
        false
    }
}

/// Nothing tracked (the baseline).
pub struct Untracked;

impl Tracked for Untracked {
    fn file(&self, _: &[u8]) -> bool {
        false
    }
    fn dir(&self, _: &[u8]) -> bool {
        false
    }
}

/// A recorded file or link, handed to the caller while its folder is open.
pub struct Visit<'a> {
    pub dir: &'a DirHandle,
    pub name: &'a [u8],
    /// Relative to the root.
    pub path: &'a [u8],
    /// The entry's own stat data (a link's, not its target's).
    pub stat: Stat,
    pub link: bool,
}

/// An entry that cannot be recorded, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub path: Vec<u8>,
    pub why: String,
}

/// What the walk found besides the visited entries.
#[derive(Debug, Default)]
pub struct Walk {
    /// Untracked folders holding a `.git` of their own: not entered.
    pub nested_repos: Vec<Vec<u8>>,
    pub refused: Vec<Refused>,
}

/// Why a walk could not finish. The tree was not completely seen, so
/// nothing may be concluded from it.
#[derive(Debug, thiserror::Error)]
pub enum WalkError {
    #[error("the work tree has over {0} entries; ah records at most that many")]
    TooManyEntries(usize),
    #[error("reading the work tree took too long (over its time limit)")]
    TimedOut,
    #[error("cannot read {}: {source}", name_safe(&String::from_utf8_lossy(.path)))]
    Io {
        path: Vec<u8>,
        source: std::io::Error,
    },
}

/// A folder still to list.
struct Pending {
    dir: DirHandle,
    path: Vec<u8>,
    depth: usize,
    chain: Rc<Chain>,
    /// Inside an ignored folder entered only for its tracked files.
    ignored: bool,
}

/// Walks the tree under `root`, calling `visit` for every recorded file and
/// link.
pub fn walk<E: From<WalkError>>(
    root: &DirHandle,
    tracked: &dyn Tracked,
    limits: Limits,
    visit: &mut dyn FnMut(Visit<'_>) -> Result<(), E>,
) -> Result<Walk, E> {
    let io_err = |path: &[u8]| {
        let path = path.to_vec();
        move |source| WalkError::Io { path, source }
    };
    let mut found = Walk::default();
    let mut listed = 0usize;
    let root_dir = root.open_dir(b".").map_err(io_err(b"."))?;
    let mut pending = vec![Pending {
        chain: Chain::root(None),
        dir: root_dir,
        path: Vec::new(),
        depth: 0,
        ignored: false,
    }];
    while let Some(folder) = pending.pop() {
        if Instant::now() > limits.deadline {
            return Err(WalkError::TimedOut.into());
        }
        let entries = folder.dir.entries().map_err(io_err(&folder.path))?;
        listed += entries.len();
        if listed > limits.max_entries {
            return Err(WalkError::TooManyEntries(limits.max_entries).into());
        }
        let untracked_dir = !folder.path.is_empty() && !tracked.dir(&folder.path);
        if untracked_dir && entries.iter().any(|(name, _)| name == b".git") {
            found.nested_repos.push(folder.path);
            continue;
        }
        let rules = match ignore::load(&folder.dir).map_err(io_err(&folder.path))? {
            Rules::Loaded(rules) => Some(rules),
            Rules::None => None,
            Rules::TooLarge(_) => None,
        };
        let chain = match folder.path.is_empty() {
            true => Chain::root(rules),
            false => folder.chain.child(folder.path.clone(), rules),
        };
        for (name, kind) in entries {
            let path = join(&folder.path, &name);
            if folder.path.is_empty() && name == b".ah" || tracked.hidden(&path, kind) {
                continue;
            }
            let ignored = folder.ignored || chain.ignores(&path, kind == Kind::Dir);
            match kind {
                Kind::Dir => {
                    if ignored && !tracked.dir(&path) {
                        continue;
                    }
                    if let Some(why) = refusal(&name, &path, folder.depth + 1, &limits) {
                        found.refused.push(Refused { path, why });
                        continue;
                    }
                    let dir = match folder.dir.open_dir(&name) {
                        Ok(dir) => dir,
                        // Replaced since it was listed: seen as gone.
                        Err(e)
                            if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) =>
                        {
                            continue;
                        }
                        Err(e) => return Err(io_err(&path)(e).into()),
                    };
                    pending.push(Pending {
                        dir,
                        path,
                        depth: folder.depth + 1,
                        chain: Rc::clone(&chain),
                        ignored,
                    });
                }
                Kind::File | Kind::Link => {
                    if ignored && !tracked.file(&path) {
                        continue;
                    }
                    if let Some(why) = refusal(&name, &path, folder.depth, &limits) {
                        found.refused.push(Refused { path, why });
                        continue;
                    }
                    let stat = match folder.dir.stat(&name) {
                        Ok(stat) => stat,
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                        Err(e) => return Err(io_err(&path)(e).into()),
                    };
                    let link = Kind::of_stat(&stat) == Kind::Link;
                    visit(Visit {
                        dir: &folder.dir,
                        name: &name,
                        path: &path,
                        stat,
                        link,
                    })?;
                }
                // Never opened, never recorded (git records no such files).
                Kind::Special => {}
            }
        }
    }
    Ok(found)
}

/// Why a rules file (`.gitignore`, `.gitattributes`) of this size cannot be
/// recorded as a step's change, if it cannot: git would obey it on the host,
/// and reading one that large costs the host minutes. (The project's own
/// files are recorded whatever their size; over the cap they are only not
/// honoured.)
pub fn oversized_rules(name: &[u8], stat: &Stat, link: bool) -> Option<String> {
    let size = stat.st_size.max(0) as u64;
    (!link && size > MAX_RULES_BYTES && RULES_FILES.contains(&name)).then(|| {
        format!(
            "a {} of {size} bytes; ah accepts none over {MAX_RULES_BYTES}",
            String::from_utf8_lossy(name)
        )
    })
}

/// Why an entry cannot be recorded, if it cannot.
pub(crate) fn refusal(name: &[u8], path: &[u8], depth: usize, limits: &Limits) -> Option<String> {
    if is_git_name(name) {
        return Some("git refuses a file or folder of this name".to_string());
    }
    if depth > limits.max_depth {
        return Some(format!("nested over {} folders deep", limits.max_depth));
    }
    if path.len() > limits.max_path {
        return Some(format!("a path over {} bytes", limits.max_path));
    }
    None
}

/// `.git` in any letter case, and the forms Windows and macOS file systems
/// read as `.git` (trailing dots and spaces, the short name `git~1`), which
/// git refuses to record.
pub fn is_git_name(name: &[u8]) -> bool {
    let trimmed = name
        .iter()
        .rposition(|&b| b != b'.' && b != b' ')
        .map_or(&name[..0], |end| &name[..=end]);
    trimmed.eq_ignore_ascii_case(b".git") || name.eq_ignore_ascii_case(b"git~1")
}

/// `dir/name`, or `name` at the root.
pub fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
    if dir.is_empty() {
        return name.to_vec();
    }
    let mut path = Vec::with_capacity(dir.len() + 1 + name.len());
    path.extend_from_slice(dir);
    path.push(b'/');
    path.extend_from_slice(name);
    path
}
