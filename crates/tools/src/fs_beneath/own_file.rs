//! The one way ah reads a file for itself on the host: its configuration,
//! policy, prompts, instruction files, skills, commands, agent and tool
//! files. A cloned repository ships those files, and a model's earlier run
//! may have written beside them, so a project's file is read as hostile:
//!
//! - the path is resolved one component at a time through folder handles
//!   ([`DirHandle`]); a link is followed only while it stays inside the
//!   tree (a relative target, or an absolute one below the tree's real
//!   path), at most [`MAX_LINKS`] of them, never by the kernel;
//! - no path met on the way (each link, and the file reached) may be one
//!   the read policy withholds (`withheld`), lie in a `.git` folder (a
//!   clone's token sits in `.git/config`) or in ah's run folders (what
//!   sandboxes wrote);
//! - only a regular file is opened (a FIFO, socket or device is refused
//!   from an `O_PATH` handle, before any open), never one on `/proc` or
//!   `/sys`, and at most `cap` bytes are read, one more to tell it is over.
//!
//! The user's own files (`~/.config/ah`, `--policy FILE`, an issue file
//! named on the command line) are trusted, so links are followed there,
//! but the same file-type and size rules hold ([`read_trusted`]).

use std::ffi::OsStr;
use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{Mode, OFlags};

use super::dir::{DirHandle, Kind};

/// The most links one path may go through.
pub const MAX_LINKS: usize = 40;

/// Which of a tree's paths (relative to its root) the read policy withholds.
pub type Withheld<'a> = dyn Fn(&Path) -> bool + 'a;

/// Why a file was not read.
#[derive(Debug)]
pub enum Refusal {
    /// A link leads out of the tree.
    LinkOut {
        link: PathBuf,
        target: PathBuf,
    },
    /// More than [`MAX_LINKS`] links, or a loop.
    TooManyLinks,
    /// The read policy withholds `path` (the file, or a link on the way).
    Withheld {
        path: PathBuf,
    },
    /// `path` lies in a `.git` folder or in ah's run folders.
    Private {
        path: PathBuf,
    },
    /// A FIFO, socket, device or folder.
    NotRegular,
    /// A file of `/proc` or `/sys`.
    Pseudo,
    /// Larger than the cap.
    TooBig {
        cap: u64,
    },
    /// Not UTF-8 text.
    NotText,
    /// A folder on the way is not one.
    NotFolder {
        path: PathBuf,
    },
    Io(io::Error),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::LinkOut { link, target } => write!(
                f,
                "{} is a link to {}, out of the project; ah reads only files inside it",
                link.display(),
                target.display()
            ),
            Refusal::TooManyLinks => write!(f, "it goes through more than {MAX_LINKS} links"),
            Refusal::Withheld { path } => write!(
                f,
                "it leads to {}, which the read policy withholds",
                path.display()
            ),
            Refusal::Private { path } => write!(
                f,
                "it leads to {}, inside a .git folder or ah's run folders",
                path.display()
            ),
            Refusal::NotRegular => {
                f.write_str("it is not a regular file (a FIFO, socket or device)")
            }
            Refusal::Pseudo => f.write_str("it is a file of /proc or /sys"),
            Refusal::TooBig { cap } => write!(f, "it is larger than {}", bytes(*cap)),
            Refusal::NotText => f.write_str("it is not UTF-8 text"),
            Refusal::NotFolder { path } => write!(f, "{} is not a folder", path.display()),
            Refusal::Io(err) => write!(f, "cannot read it: {err}"),
        }
    }
}

/// A file not read: which, and why.
#[derive(Debug)]
pub struct OwnFileError {
    pub file: PathBuf,
    pub why: Refusal,
}

impl fmt::Display for OwnFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.file.display(), self.why)
    }
}

impl std::error::Error for OwnFileError {}

fn bytes(n: u64) -> String {
    if n >= 1024 * 1024 && n.is_multiple_of(1024 * 1024) {
        format!("{} MiB", n / (1024 * 1024))
    } else {
        format!("{} KiB", n.div_ceil(1024))
    }
}

/// A tree whose files ah reads for itself: the project (or the repository
/// holding it), by its real path, with the read policy's verdict on its
/// paths.
pub struct Tree<'a> {
    root: &'a Path,
    withheld: &'a Withheld<'a>,
}

impl<'a> Tree<'a> {
    /// `root` must be a real path (no link in it): the project's canonical
    /// folder.
    pub fn new(root: &'a Path, withheld: &'a Withheld<'a>) -> Tree<'a> {
        Tree { root, withheld }
    }

    /// The bytes of `rel` (relative to the root), at most `cap`; `None`
    /// when there is nothing at that path.
    pub fn read(&self, rel: &Path, cap: u64) -> Result<Option<Vec<u8>>, OwnFileError> {
        let fail = |why| OwnFileError {
            file: self.root.join(rel),
            why,
        };
        let Some((dir, name, _)) = self.resolve(rel).map_err(fail)? else {
            return Ok(None);
        };
        let (file, _) = match dir.open_regular(&name) {
            Ok(opened) => opened,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                return Err(fail(Refusal::NotRegular));
            }
            Err(e) => return Err(fail(Refusal::Io(e))),
        };
        read_capped(file, cap).map(Some).map_err(fail)
    }

    /// [`Tree::read`] as UTF-8 text.
    pub fn read_text(&self, rel: &Path, cap: u64) -> Result<Option<String>, OwnFileError> {
        let Some(bytes) = self.read(rel, cap)? else {
            return Ok(None);
        };
        String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| OwnFileError {
                file: self.root.join(rel),
                why: Refusal::NotText,
            })
    }

    /// The names in the folder `rel`, with their kinds (a link's own kind),
    /// sorted; empty when there is no such folder.
    pub fn list(&self, rel: &Path) -> Result<Vec<(Vec<u8>, Kind)>, OwnFileError> {
        let fail = |why| OwnFileError {
            file: self.root.join(rel),
            why,
        };
        let dir = match self.resolve(rel).map_err(fail)? {
            None => return Ok(Vec::new()),
            Some((parent, name, _)) if name.is_empty() => parent,
            Some((parent, name, _)) => match parent.open_dir(&name) {
                Ok(dir) => dir,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
                Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => {
                    return Err(fail(Refusal::NotFolder {
                        path: rel.to_path_buf(),
                    }));
                }
                Err(e) => return Err(fail(Refusal::Io(e))),
            },
        };
        let mut entries = dir.entries().map_err(|e| fail(Refusal::Io(e)))?;
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(entries)
    }

    /// Where `rel` leads, relative to the root, with every link on the way
    /// followed (inside the tree only); `None` when a part of the path does
    /// not exist. What it leads to need not exist.
    pub fn real_path(&self, rel: &Path) -> Result<Option<PathBuf>, OwnFileError> {
        let resolved = self.resolve(rel).map_err(|why| OwnFileError {
            file: self.root.join(rel),
            why,
        })?;
        Ok(resolved.map(|(_, _, path)| path))
    }

    /// The folder holding what `rel` leads to, its name there (empty for
    /// the root itself) and its path from the root, links inside the tree
    /// followed; `None` when a folder on the way does not exist.
    fn resolve(&self, rel: &Path) -> Result<Option<(DirHandle, Vec<u8>, PathBuf)>, Refusal> {
        let mut pending: Vec<Vec<u8>> = parts(rel)?.into_iter().rev().collect();
        // The folders entered, with their names: the path resolved so far.
        let mut stack: Vec<(DirHandle, Vec<u8>)> = Vec::new();
        let root = match DirHandle::open_root(self.root) {
            Ok(root) => root,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Refusal::Io(e)),
        };
        let mut links = 0;
        while let Some(part) = pending.pop() {
            if part == b".." {
                if stack.pop().is_none() {
                    return Err(Refusal::LinkOut {
                        link: rel.to_path_buf(),
                        target: self.root.join(".."),
                    });
                }
                continue;
            }
            let here = path_of(&stack, &part);
            private(&here)?;
            let dir = stack.last().map_or(&root, |(dir, _)| dir);
            let Some(kind) = dir.kind(&part).map_err(Refusal::Io)? else {
                if pending.is_empty() {
                    let parent = stack.pop().map_or(root, |(dir, _)| dir);
                    return Ok(Some((parent, part, here)));
                }
                return Ok(None);
            };
            if kind != Kind::Dir {
                self.withheld(&here)?;
            }
            match kind {
                Kind::Link => {
                    links += 1;
                    if links > MAX_LINKS {
                        return Err(Refusal::TooManyLinks);
                    }
                    let target = dir.read_link(&part).map_err(Refusal::Io)?;
                    let target = PathBuf::from(OsStr::from_bytes(&target));
                    let inside = if target.is_absolute() {
                        target.strip_prefix(self.root).ok()
                    } else {
                        Some(target.as_path())
                    };
                    let Some(inside) = inside else {
                        return Err(Refusal::LinkOut { link: here, target });
                    };
                    if target.is_absolute() {
                        // An absolute link into the tree is followed from its root.
                        stack.clear();
                    }
                    pending.extend(parts(inside)?.into_iter().rev());
                }
                Kind::Dir if !pending.is_empty() => {
                    let inner = dir.open_dir(&part).map_err(Refusal::Io)?;
                    stack.push((inner, part));
                }
                _ if !pending.is_empty() => return Err(Refusal::NotFolder { path: here }),
                _ => {
                    let parent = stack.pop().map_or(root, |(dir, _)| dir);
                    return Ok(Some((parent, part, here)));
                }
            }
        }
        // The path ended on a folder by `..`: that folder, from its parent.
        let here: PathBuf = stack
            .iter()
            .map(|(_, name)| OsStr::from_bytes(name))
            .collect();
        Ok(Some(match stack.pop() {
            Some((_, name)) => (stack.pop().map_or(root, |(dir, _)| dir), name, here),
            None => (root, Vec::new(), here),
        }))
    }

    /// Refuses a path the read policy withholds.
    fn withheld(&self, path: &Path) -> Result<(), Refusal> {
        if (self.withheld)(path) {
            return Err(Refusal::Withheld {
                path: path.to_path_buf(),
            });
        }
        Ok(())
    }
}

/// Refuses a path in a `.git` folder (at any depth, any letter case) or in
/// ah's run folders.
fn private(path: &Path) -> Result<(), Refusal> {
    let mut names = path.components().map(Component::as_os_str);
    let in_git = path
        .components()
        .any(|c| c.as_os_str().eq_ignore_ascii_case(".git"));
    let in_runs =
        names.next() == Some(OsStr::new(".ah")) && names.next() == Some(OsStr::new("runs"));
    if in_git || in_runs {
        return Err(Refusal::Private {
            path: path.to_path_buf(),
        });
    }
    Ok(())
}

/// The folders entered and `name`, as a path relative to the root.
fn path_of(stack: &[(DirHandle, Vec<u8>)], name: &[u8]) -> PathBuf {
    let mut path = PathBuf::new();
    for (_, folder) in stack {
        path.push(OsStr::from_bytes(folder));
    }
    path.push(OsStr::from_bytes(name));
    path
}

/// The names of a relative path, `.` dropped; an absolute path or a name
/// with a NUL is refused.
fn parts(rel: &Path) -> Result<Vec<Vec<u8>>, Refusal> {
    let mut names = Vec::new();
    for component in rel.components() {
        match component {
            Component::Normal(name) => names.push(name.as_bytes().to_vec()),
            Component::ParentDir => names.push(b"..".to_vec()),
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => {
                return Err(Refusal::Io(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "an absolute path where a path inside the project was expected",
                )));
            }
        }
    }
    Ok(names)
}

/// Reads a file of the user's own (links followed): a regular file, not
/// of `/proc` or `/sys`, at most `cap` bytes; `None` when it does not exist.
pub fn read_trusted(path: &Path, cap: u64) -> Result<Option<Vec<u8>>, OwnFileError> {
    let fail = |why| OwnFileError {
        file: path.to_path_buf(),
        why,
    };
    let handle = match rustix::fs::open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()) {
        Ok(handle) => handle,
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(e) => return Err(fail(Refusal::Io(e.into()))),
    };
    let stat = rustix::fs::fstat(&handle).map_err(|e| fail(Refusal::Io(e.into())))?;
    if Kind::of_stat(&stat) != Kind::File {
        return Err(fail(Refusal::NotRegular));
    }
    // Reopening the handle's own inode: no name is looked up again.
    let proc = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&handle));
    let fd = rustix::fs::open(
        proc.as_str(),
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| fail(Refusal::Io(e.into())))?;
    read_capped(File::from(fd), cap).map(Some).map_err(fail)
}

/// [`read_trusted`] as UTF-8 text.
pub fn read_trusted_text(path: &Path, cap: u64) -> Result<Option<String>, OwnFileError> {
    let Some(bytes) = read_trusted(path, cap)? else {
        return Ok(None);
    };
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| OwnFileError {
            file: path.to_path_buf(),
            why: Refusal::NotText,
        })
}

/// At most `cap` bytes of an open regular file, refusing one of `/proc`
/// or `/sys` (whose sizes say nothing: `/proc/self/pagemap` reads forever).
fn read_capped(file: File, cap: u64) -> Result<Vec<u8>, Refusal> {
    let fs = rustix::fs::fstatfs(file.as_fd()).map_err(|e| Refusal::Io(e.into()))?;
    if fs.f_type == rustix::fs::PROC_SUPER_MAGIC || fs.f_type == libc::SYSFS_MAGIC {
        return Err(Refusal::Pseudo);
    }
    let mut bytes = Vec::new();
    file.take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(Refusal::Io)?;
    if bytes.len() as u64 > cap {
        return Err(Refusal::TooBig { cap });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests;
