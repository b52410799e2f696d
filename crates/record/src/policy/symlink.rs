//! Follows a symlink the model made, confined to the work root: the target is
//! resolved component by component against the link's folder, expanding links
//! met on the way only while they stay inside the work dir. Links are read
//! from the step's commit (through a [`LinkLookup`]), never from the disk, so
//! a process still running cannot flip a link between the commit and the
//! check; and nothing outside the work dir is ever consulted: the first step
//! out is the answer.
//!
//! Absolute targets are read as the container sees them: `/work/...` (and the
//! work dir's host path, for the `none` backend) is inside, anything else is out.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

use super::LinkLookup;
use ah_tools::path::{MAX_SYMLINK_HOPS as MAX_HOPS, WORK as CONTAINER_ROOT};

#[derive(Debug, PartialEq, Eq)]
pub(super) enum Resolution {
    /// The final path, relative to the work root (empty for the root itself).
    Inside(String),
    Outside,
    /// The link could not be read, or the chain loops.
    Unchecked(String),
}

/// Resolves the link at `link` (relative to the work root) through the
/// committed links. Returns the link's own target, as written, with where it
/// leads. `work_dir` is only used to recognise absolute targets.
pub(super) fn resolve(work_dir: &Path, link: &str, links: &LinkLookup<'_>) -> (String, Resolution) {
    let target = match links(Path::new(link)) {
        Ok(Some(target)) => target,
        Ok(None) => {
            let detail = "the step's commit holds no symlink at this path".to_string();
            return (String::new(), Resolution::Unchecked(detail));
        }
        Err(detail) => return (String::new(), Resolution::Unchecked(detail)),
    };
    let shown = target.to_string_lossy().into_owned();
    // Start in the link's folder; git never reports a path below a link.
    let mut resolved = normal_parts(Path::new(link));
    resolved.pop();
    let mut walk = Walk {
        work_dir,
        links,
        resolved,
        pending: VecDeque::new(),
    };
    let resolution = if walk.enter(&target) {
        walk.run()
    } else {
        Resolution::Outside
    };
    (shown, resolution)
}

struct Walk<'a> {
    work_dir: &'a Path,
    links: &'a LinkLookup<'a>,
    /// Components resolved so far, relative to the work root; none is a link.
    resolved: Vec<OsString>,
    /// Components still to walk.
    pending: VecDeque<OsString>,
}

impl Walk<'_> {
    /// Queues a link target in front of what is left to walk. An absolute
    /// target restarts from the work root; false when it is outside it.
    fn enter(&mut self, target: &Path) -> bool {
        let rest = if target.is_absolute() {
            let Some(rest) = self.strip_root(target) else {
                return false;
            };
            self.resolved.clear();
            rest
        } else {
            target.to_path_buf()
        };
        for part in rest.components().rev() {
            self.pending.push_front(part.as_os_str().to_os_string());
        }
        true
    }

    /// The part of an absolute target below the work root, if it is below it.
    fn strip_root(&self, target: &Path) -> Option<PathBuf> {
        let roots = [
            Some(self.work_dir.to_path_buf()),
            self.work_dir.canonicalize().ok(),
            Some(PathBuf::from(CONTAINER_ROOT)),
        ];
        roots
            .into_iter()
            .flatten()
            .find_map(|root| target.strip_prefix(&root).ok().map(Path::to_path_buf))
    }

    fn run(&mut self) -> Resolution {
        let mut hops = 1;
        while let Some(part) = self.pending.pop_front() {
            if part == "." {
                continue;
            }
            if part == ".." {
                if self.resolved.pop().is_none() {
                    return Resolution::Outside;
                }
                continue;
            }
            self.resolved.push(part);
            let here: PathBuf = self.resolved.iter().collect();
            let next = match (self.links)(&here) {
                Ok(Some(next)) => next,
                // A folder or file, or nothing: `..` after it is lexical.
                Ok(None) => continue,
                Err(detail) => {
                    return Resolution::Unchecked(format!("{}: {detail}", here.display()));
                }
            };
            hops += 1;
            if hops > MAX_HOPS {
                return Resolution::Unchecked(format!("more than {MAX_HOPS} links in a chain"));
            }
            self.resolved.pop();
            if !self.enter(&next) {
                return Resolution::Outside;
            }
        }
        let parts: Vec<String> = self
            .resolved
            .iter()
            .map(|part| part.to_string_lossy().into_owned())
            .collect();
        Resolution::Inside(parts.join("/"))
    }
}

/// The normal components of a clean relative path.
fn normal_parts(path: &Path) -> Vec<OsString> {
    path.components()
        .filter_map(|component| match component {
            Component::Normal(part) => Some(part.to_os_string()),
            _ => None,
        })
        .collect()
}
