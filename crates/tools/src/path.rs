//! Confines the model's paths to the work directory.
//!
//! The model names files relative to `/work` or as absolute paths under
//! `/work`; [`resolve`] turns such a name into a host path inside the work
//! root, or refuses it. `..` in the model's path is resolved lexically first
//! and may not climb above the root. Symlinks are then resolved one component
//! at a time, by reading each link ourselves (never by asking the OS to follow
//! it), so a link whose target leaves the root is refused without ever touching
//! anything outside. An absolute link target under the (canonical) root or
//! under `/work` — how links made inside the container look — counts as inside.
//!
//! The returned `rel` contains no symlinks and no `..` at the moment of
//! resolution. The tools never open `host` by name: they open `rel` through
//! [`super::fs_beneath`], relative to a handle of the root and refusing every
//! symlink, so a folder swapped for a link after this check cannot redirect
//! them outside the root or to a path other than the one checked.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Component, Path, PathBuf};

/// How the model sees the work root (where the container mounts the work
/// copy).
pub const WORK: &str = "/work";

/// Symlinks followed in one resolution before we call it a loop (Linux's
/// `ELOOP` limit); the policy's check of committed links uses it too.
pub const MAX_SYMLINK_HOPS: usize = 40;

/// A path confined to the work root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Absolute host path: canonical root plus `rel`.
    pub host: PathBuf,
    /// Path relative to the root with `/` separators, after following links
    /// inside the root; empty for the root itself. Policy checks use this.
    pub rel: String,
}

impl Resolved {
    /// The path as the model sees it: `/work/<rel>`.
    pub fn display(&self) -> String {
        if self.rel.is_empty() {
            WORK.to_string()
        } else {
            format!("{WORK}/{}", self.rel)
        }
    }
}

/// Why a path was refused. Messages are written for the model.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    #[error("path is empty: give a path relative to /work or an absolute path under /work")]
    Empty,
    #[error("path {0:?} contains a NUL byte: remove it")]
    Nul(String),
    #[error("path {0:?} is outside /work: paths must stay inside the work directory")]
    Outside(String),
    #[error(
        "path {path:?} goes through the symlink {link} whose target {target:?} is outside /work: \
         only links that stay inside the work directory can be used"
    )]
    SymlinkOutside {
        path: String,
        link: String,
        target: String,
    },
    #[error("path {path:?} has too many levels of symbolic links (a loop?) at {link}")]
    SymlinkLoop { path: String, link: String },
    #[error("cannot inspect {at} while resolving path {path:?}: {source}")]
    Io {
        path: String,
        at: String,
        source: io::Error,
    },
    #[error("the work directory {root} cannot be used: {source}")]
    Root { root: PathBuf, source: io::Error },
}

/// Resolves `user_path` (relative, `/work`, or `/work/...`) against `root`.
pub fn resolve(root: &Path, user_path: &str) -> Result<Resolved, PathError> {
    if user_path.is_empty() {
        return Err(PathError::Empty);
    }
    if user_path.contains('\0') {
        return Err(PathError::Nul(user_path.to_string()));
    }
    let outside = || PathError::Outside(user_path.to_string());
    let relative = strip_work(user_path).ok_or_else(outside)?;
    let mut pending = lexical(relative).ok_or_else(outside)?;
    let root = std::fs::canonicalize(root).map_err(|source| PathError::Root {
        root: root.to_path_buf(),
        source,
    })?;

    let mut done: Vec<OsString> = Vec::new();
    let mut hops = 0;
    // The last link expanded and its target: any `..` left in `pending` came
    // from a link target, so climbing above the root blames that link.
    let mut last_link = (String::new(), String::new());
    while let Some(part) = pending.pop_front() {
        if part == ".." {
            if done.pop().is_none() {
                return Err(link_outside(user_path, &last_link));
            }
            continue;
        }
        let candidate = join(&root, &done).join(&part);
        let meta = match std::fs::symlink_metadata(&candidate) {
            Ok(meta) => meta,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) =>
            {
                // Nothing below a missing component exists: finish lexically.
                done.push(part);
                for rest in pending.drain(..) {
                    if rest != ".." {
                        done.push(rest);
                    } else if done.pop().is_none() {
                        return Err(link_outside(user_path, &last_link));
                    }
                }
                break;
            }
            Err(source) => {
                done.push(part);
                return Err(PathError::Io {
                    path: user_path.to_string(),
                    at: display(&done),
                    source,
                });
            }
        };
        if !meta.file_type().is_symlink() {
            done.push(part);
            continue;
        }

        let mut link_parts = done.clone();
        link_parts.push(part);
        let link = display(&link_parts);
        hops += 1;
        if hops > MAX_SYMLINK_HOPS {
            return Err(PathError::SymlinkLoop {
                path: user_path.to_string(),
                link,
            });
        }
        let target = std::fs::read_link(&candidate).map_err(|source| PathError::Io {
            path: user_path.to_string(),
            at: link.clone(),
            source,
        })?;
        last_link = (link, target.to_string_lossy().into_owned());
        let refused = || link_outside(user_path, &last_link);
        let relative_target = if target.is_absolute() {
            done.clear();
            target
                .strip_prefix(&root)
                .or_else(|_| target.strip_prefix(WORK))
                .map_err(|_| refused())?
        } else {
            &target
        };
        let mut expanded = Vec::new();
        for component in relative_target.components() {
            match component {
                Component::Normal(name) => expanded.push(name.to_os_string()),
                Component::ParentDir => expanded.push(OsString::from("..")),
                Component::CurDir => {}
                Component::RootDir | Component::Prefix(_) => return Err(refused()),
            }
        }
        for name in expanded.into_iter().rev() {
            pending.push_front(name);
        }
    }

    Ok(Resolved {
        host: join(&root, &done),
        rel: done
            .iter()
            .map(|p| p.to_string_lossy())
            .collect::<Vec<_>>()
            .join("/"),
    })
}

/// `/work` → "", `/work/a` → "a", `a` → "a"; other absolute paths → `None`.
fn strip_work(user_path: &str) -> Option<&str> {
    if !user_path.starts_with('/') {
        return Some(user_path);
    }
    let rest = user_path.strip_prefix(WORK)?;
    if rest.is_empty() || rest.starts_with('/') {
        Some(rest)
    } else {
        None
    }
}

/// Splits on `/`, drops `.` and empty parts, applies `..`; `None` if it escapes.
fn lexical(relative: &str) -> Option<VecDeque<OsString>> {
    let mut parts = VecDeque::new();
    for part in relative.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop_back()?;
            }
            name => parts.push_back(OsString::from(name)),
        }
    }
    Some(parts)
}

fn join(root: &Path, parts: &[OsString]) -> PathBuf {
    let mut path = root.to_path_buf();
    path.extend(parts.iter().map(|p| Path::new(p.as_os_str())));
    path
}

/// `/work/<parts>` for messages.
fn display(parts: &[OsString]) -> String {
    let mut shown = String::from(WORK);
    for part in parts {
        shown.push('/');
        shown.push_str(&OsStr::new(part).to_string_lossy());
    }
    shown
}

fn link_outside(user_path: &str, (link, target): &(String, String)) -> PathError {
    PathError::SymlinkOutside {
        path: user_path.to_string(),
        link: link.clone(),
        target: target.clone(),
    }
}

#[cfg(test)]
mod tests;
