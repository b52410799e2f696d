//! The host's mirror of a remote sandbox's `/work`: the changes its agent
//! reports are written here ([`Mirror`], a [`Sink`]), and what the host
//! changed here is read back to send ([`read_puts`]).
//!
//! Every entry is hostile: its path must be relative, of plain names (no
//! `.`, `..` or empty part, no NUL), and is reached one folder at a time
//! through `fs_beneath` handles, which never follow a link and never open
//! a special file; what stands in the way of an entry is removed, not
//! written through. A FIFO, socket or device is never made here: its path
//! is only cleared (the step's record does not keep such files either).

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ah_tools::fs_beneath::dir::{DirHandle, Kind};

use super::super::channel::Sink;
use crate::channel::frame::{Entry, EntryKind};

/// How long removing what stands in the way of one entry may take.
const REMOVE_LIMIT: Duration = Duration::from_secs(60);
/// The largest file the host sends back to the sandbox in one push.
const PUT_FILE_LIMIT: u64 = 256 * 1024 * 1024;

/// Writes a scan's entries into the mirror at `root`, and lists the paths
/// they touched.
pub(in super::super) struct Mirror {
    root: PathBuf,
    /// The file being written, and the bytes it still expects.
    open: Option<(File, u64)>,
    /// Every path an entry named, relative.
    pub(in super::super) touched: Vec<String>,
}

impl Mirror {
    pub(in super::super) fn new(root: &Path) -> Mirror {
        Mirror {
            root: root.to_path_buf(),
            open: None,
            touched: Vec::new(),
        }
    }
}

impl Sink for Mirror {
    fn entry(&mut self, entry: &Entry) -> Result<(), String> {
        self.open = None;
        let parts = parts(&entry.path)?;
        let shown = String::from_utf8_lossy(&entry.path)
            .escape_debug()
            .to_string();
        let fail = |what: &str, err: std::io::Error| format!("{what} {shown} in the mirror: {err}");
        let (dir, name) = parent(&self.root, &parts, entry.kind != EntryKind::Gone)
            .map_err(|err| fail("could not reach the folder of", err))?;
        let Some(dir) = dir else {
            // A removal below a folder that is not there: nothing to do.
            return Ok(());
        };
        self.touched
            .push(String::from_utf8_lossy(&entry.path).into_owned());
        let now = dir
            .kind(name)
            .map_err(|err| fail("could not look at", err))?;
        let keep_dir = entry.kind == EntryKind::Dir && now == Some(Kind::Dir);
        if now.is_some() && !keep_dir {
            dir.remove(name, Instant::now() + REMOVE_LIMIT)
                .map_err(|err| fail("could not clear", err))?;
        }
        match entry.kind {
            EntryKind::Gone | EntryKind::Special => {}
            // A folder's mode is not kept: the record keeps none.
            EntryKind::Dir if keep_dir => {}
            EntryKind::Dir => {
                dir.make_dir(name)
                    .map_err(|err| fail("could not make the folder", err))?;
            }
            EntryKind::Link => dir
                .symlink(&entry.target, name)
                .map_err(|err| fail("could not make the link", err))?,
            EntryKind::File => {
                let file = dir
                    .create_file(name, entry.mode & 0o7777)
                    .map_err(|err| fail("could not write", err))?;
                self.open = Some((file, entry.size));
            }
        }
        Ok(())
    }

    fn data(&mut self, bytes: &[u8]) -> Result<(), String> {
        let Some((file, left)) = self.open.as_mut() else {
            return Err("file bytes came with no file".to_string());
        };
        file.write_all(bytes)
            .map_err(|err| format!("could not write a file of the mirror: {err}"))?;
        *left = left.saturating_sub(bytes.len() as u64);
        Ok(())
    }
}

/// The host's view of each of `paths` (relative to `root`) as entries to
/// put in the sandbox: what is there now, a folder with everything in it,
/// or that nothing is.
pub(in super::super) fn read_puts(
    root: &Path,
    paths: &[String],
) -> Result<Vec<(Entry, Vec<u8>)>, String> {
    let mut puts = Vec::new();
    for path in paths {
        let parts = parts(path.as_bytes())?;
        let (dir, name) = parent(root, &parts, false)
            .map_err(|err| format!("could not reach {path} in the host's view: {err}"))?;
        let gone = || Entry {
            path: path.as_bytes().to_vec(),
            kind: EntryKind::Gone,
            mode: 0,
            size: 0,
            target: Vec::new(),
        };
        match dir {
            Some(dir) => read_one(&dir, name, path.as_bytes(), &mut puts)
                .map_err(|err| format!("could not read {path} in the host's view: {err}"))?,
            None => puts.push((gone(), Vec::new())),
        }
    }
    Ok(puts)
}

/// Adds `name` of `dir` (at `path`) to `puts`, a folder with its content.
fn read_one(
    dir: &DirHandle,
    name: &[u8],
    path: &[u8],
    puts: &mut Vec<(Entry, Vec<u8>)>,
) -> std::io::Result<()> {
    let entry = |kind, mode, size, target| Entry {
        path: path.to_vec(),
        kind,
        mode,
        size,
        target,
    };
    match dir.kind(name)? {
        None | Some(Kind::Special) => {
            puts.push((entry(EntryKind::Gone, 0, 0, Vec::new()), Vec::new()))
        }
        Some(Kind::Link) => {
            let target = dir.read_link(name)?;
            puts.push((entry(EntryKind::Link, 0o777, 0, target), Vec::new()));
        }
        Some(Kind::File) => {
            let (file, stat) = dir.open_regular(name)?;
            let mut bytes = Vec::new();
            file.take(PUT_FILE_LIMIT + 1).read_to_end(&mut bytes)?;
            if bytes.len() as u64 > PUT_FILE_LIMIT {
                return Err(std::io::Error::other(format!(
                    "it is over {} MiB",
                    PUT_FILE_LIMIT / (1024 * 1024)
                )));
            }
            let size = bytes.len() as u64;
            puts.push((
                entry(EntryKind::File, stat.st_mode & 0o7777, size, Vec::new()),
                bytes,
            ));
        }
        Some(Kind::Dir) => {
            let stat = dir.stat(name)?;
            puts.push((
                entry(EntryKind::Dir, stat.st_mode & 0o7777, 0, Vec::new()),
                Vec::new(),
            ));
            let inner = dir.open_dir(name)?;
            for (child, _) in inner.entries()?.into_iter() {
                let mut child_path = path.to_vec();
                child_path.push(b'/');
                child_path.extend_from_slice(&child);
                read_one(&inner, &child, &child_path, puts)?;
            }
        }
    }
    Ok(())
}

/// The plain names of a relative path, or why it is not one.
fn parts(path: &[u8]) -> Result<Vec<&[u8]>, String> {
    let parts: Vec<&[u8]> = path.split(|b| *b == b'/').collect();
    let bad = path.is_empty()
        || path.contains(&0)
        || parts
            .iter()
            .any(|part| part.is_empty() || *part == b"." || *part == b"..");
    match bad {
        true => Err(format!(
            "the sandbox named a path that is not a plain relative one: {:?}",
            String::from_utf8_lossy(path)
        )),
        false => Ok(parts),
    }
}

/// The folder holding the last of `parts` and that name; with `make`, the
/// folders on the way are made (and whatever else stands there removed),
/// else `None` when one is missing.
fn parent<'a>(
    root: &Path,
    parts: &[&'a [u8]],
    make: bool,
) -> std::io::Result<(Option<DirHandle>, &'a [u8])> {
    let Some((name, folders)) = parts.split_last() else {
        return Err(std::io::Error::other("an empty path"));
    };
    let mut dir = DirHandle::open_root(root)?;
    for folder in folders {
        match dir.kind(folder)? {
            Some(Kind::Dir) => {}
            None if make => {
                dir.make_dir(folder)?;
            }
            Some(_) if make => {
                dir.remove(folder, Instant::now() + REMOVE_LIMIT)?;
                dir.make_dir(folder)?;
            }
            _ => return Ok((None, name)),
        }
        dir = dir.open_dir(folder)?;
    }
    Ok((Some(dir), name))
}

#[cfg(test)]
mod tests;
