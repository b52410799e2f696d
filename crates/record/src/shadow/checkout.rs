//! Writing a commit back into the work tree: the undo of a step, and the
//! files of a restored work copy. libgit2's checkout is not used: it follows
//! links in ignored folders and reads `.gitattributes` from the tree it
//! writes. Here every entry is written through folder handles
//! ([`ah_tools::fs_beneath::dir`]): whatever stands in the way of a
//! recorded path (a link where a folder must be, a folder where a file must
//! be, an ignored FIFO) is removed, never written through, and files are
//! created anew with `O_EXCL | O_NOFOLLOW` and their blob streamed in.
//!
//! Only what differs from what the index says the tree holds is touched;
//! the caller stages again afterwards and compares, so a write that did not
//! land is seen.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::time::Instant;

use git2::{ObjectType, Oid, Tree, TreeWalkMode, TreeWalkResult};

use super::{ShadowError, ShadowRepo};
use ah_tools::fs_beneath::dir::DirHandle;

const MODE_LINK: i32 = 0o120000;
const MODE_EXEC: i32 = 0o100755;
const MODE_FILE: i32 = 0o100644;

impl ShadowRepo {
    /// Makes the recorded part of the work tree hold `target`: paths the
    /// index has that `target` lacks are removed, and so is every path of
    /// `extra` (entries found but not staged); paths whose mode or blob
    /// differ from the index are written. Gives up at `deadline`.
    pub(super) fn write_tree(
        &self,
        target: &Tree<'_>,
        extra: &[Vec<u8>],
        deadline: Instant,
    ) -> Result<(), ShadowError> {
        let index = self.repo.index().map_err(self.err("opening the index"))?;
        let present: HashMap<Vec<u8>, (u32, Oid)> =
            index.iter().map(|e| (e.path, (e.mode, e.id))).collect();
        let mut wanted = Vec::new();
        target
            .walk(TreeWalkMode::PreOrder, |dir, entry| {
                if entry.kind() == Some(ObjectType::Blob) {
                    let mut path = dir.as_bytes().to_vec();
                    path.extend_from_slice(entry.name_bytes());
                    wanted.push((path, entry.filemode(), entry.id()));
                }
                TreeWalkResult::Ok
            })
            .map_err(self.err("reading the tree to write"))?;
        let wanted_paths: HashMap<&[u8], (i32, Oid)> = wanted
            .iter()
            .map(|(path, mode, id)| (path.as_slice(), (*mode, *id)))
            .collect();
        // Looked up once per wanted path: a set, not the list.
        let rewrite: HashSet<&[u8]> = extra.iter().map(Vec::as_slice).collect();
        let root = self.open_work()?;
        let io_err = |path: &[u8]| {
            let path = self.work_dir.join(OsStr::from_bytes(path));
            move |source| ShadowError::Io { path, source }
        };
        let unwanted = present
            .keys()
            .filter(|path| !wanted_paths.contains_key(path.as_slice()))
            .chain(extra);
        for path in unwanted {
            remove(&root, path, deadline).map_err(io_err(path))?;
        }
        let mut parent: Option<(Vec<u8>, DirHandle)> = None;
        for (path, mode, id) in &wanted {
            if present
                .get(path)
                .is_some_and(|(m, i)| *m as i32 == *mode && i == id)
                && !rewrite.contains(path.as_slice())
            {
                continue;
            }
            if Instant::now() > deadline {
                return Err(io_err(path)(timed_out()));
            }
            let (dir_path, name) = split(path);
            let dir = match &parent {
                Some((open, dir)) if open == dir_path => dir,
                _ => {
                    let dir = make_dirs(&root, dir_path, deadline).map_err(io_err(path))?;
                    &parent.insert((dir_path.to_vec(), dir)).1
                }
            };
            self.write_entry(dir, name, *mode, *id, deadline)
                .map_err(io_err(path))?;
        }
        Ok(())
    }

    /// Replaces whatever is at `name` with the blob `id` as a file or link
    /// (`mode` as in a tree).
    pub fn write_entry(
        &self,
        dir: &DirHandle,
        name: &[u8],
        mode: i32,
        id: Oid,
        deadline: Instant,
    ) -> io::Result<()> {
        dir.remove(name, deadline)?;
        if mode == MODE_LINK {
            let blob = self.repo.find_blob(id).map_err(io::Error::other)?;
            return dir.symlink(blob.content(), name);
        }
        let file_mode = if mode == MODE_EXEC { 0o755 } else { 0o644 };
        debug_assert!(mode == MODE_EXEC || mode == MODE_FILE);
        let mut file = dir.create_file(name, file_mode)?;
        let odb = self.repo.odb().map_err(io::Error::other)?;
        // Loose objects (every large file) stream; libgit2 cannot stream
        // from a pack, where the baseline keeps files of up to 8 MiB.
        match odb.reader(id) {
            Ok((mut reader, _, _)) => io::copy(&mut reader, &mut file).map(drop),
            Err(_) => {
                let blob = self.repo.find_blob(id).map_err(io::Error::other)?;
                file.write_all(blob.content())
            }
        }
    }
}

/// The folder part and the name of `path`.
fn split(path: &[u8]) -> (&[u8], &[u8]) {
    match path.iter().rposition(|&b| b == b'/') {
        Some(at) => (&path[..at], &path[at + 1..]),
        None => (&path[..0], path),
    }
}

/// Opens the folders of `dir_path` from `root`, making each one that is
/// missing and replacing anything that stands where a folder must be.
fn make_dirs(root: &DirHandle, dir_path: &[u8], deadline: Instant) -> io::Result<DirHandle> {
    let mut dir = root.open_dir(b".")?;
    for part in dir_path.split(|&b| b == b'/').filter(|p| !p.is_empty()) {
        dir = match dir.open_dir(part) {
            Ok(next) => next,
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => {
                if dir.kind(part)?.is_some() {
                    dir.remove(part, deadline)?;
                }
                dir.make_dir(part)?
            }
            Err(e) => return Err(e),
        };
    }
    Ok(dir)
}

/// Removes `path` if it is there (through real folders only: a path under
/// a link or a file is not there), then the folders above it that it left
/// empty.
fn remove(root: &DirHandle, path: &[u8], deadline: Instant) -> io::Result<()> {
    let (dir_path, name) = split(path);
    let mut chain = vec![root.open_dir(b".")?];
    let parts: Vec<&[u8]> = dir_path
        .split(|&b| b == b'/')
        .filter(|p| !p.is_empty())
        .collect();
    for part in &parts {
        let Some(last) = chain.last() else { break };
        match last.open_dir(part) {
            Ok(next) => chain.push(next),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => {
                return Ok(());
            }
            Err(e) => return Err(e),
        }
    }
    if let Some(dir) = chain.last() {
        dir.remove(name, deadline)?;
    }
    // The folders it leaves empty, deepest first.
    for (depth, part) in parts.iter().enumerate().rev() {
        chain[depth].remove_if_empty(part)?;
    }
    Ok(())
}

fn timed_out() -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        "writing the work tree took too long",
    )
}
