//! Staging: one scan of the work tree brings the shadow index in line with it.
//!
//! Files whose stat data matches the index are not read (libgit2's stat
//! cache); files read and found unchanged get their stat data refreshed. A
//! changed regular file is read here, not by libgit2: it is opened without
//! following links, its size is checked before anything is hashed, and the
//! read stops one byte past the cap, so a file that grows while it is read
//! cannot make the host hash gigabytes either. Over the cap, the file is left
//! out of the index and reported. Symlinks are staged by libgit2 (a link's
//! blob is its target, a few bytes).

use std::ffi::OsStr;
use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

use git2::{Delta, DiffOptions, Index, IndexEntry, IndexTime, Oid, Tree};

use super::{ShadowError, ShadowRepo};

/// What one staging pass left in the index.
pub(super) struct Staged<'r> {
    /// The index's tree, written to the object store.
    pub(super) tree: Tree<'r>,
    pub(super) nested_repos: Vec<String>,
    /// Changed files over the cap, not staged.
    pub(super) too_large: Vec<String>,
}

/// What one scan of the work tree found.
#[derive(Default)]
pub(super) struct WorkTreeScan {
    /// Paths that differ from the index, each with whether it was deleted.
    pub(super) changes: Vec<(bool, Vec<u8>)>,
    nested_repos: Vec<String>,
}

/// How one changed regular file was read.
enum BlobRead {
    Written(Oid),
    TooLarge,
}

impl ShadowRepo {
    /// Brings the index in line with the work tree (files over
    /// `max_file_bytes` left out), saves it, and writes its tree.
    pub(super) fn stage_all(&self, max_file_bytes: u64) -> Result<Staged<'_>, ShadowError> {
        let mut index = self.repo.index().map_err(self.err("opening the index"))?;
        index.read(false).map_err(self.err("reading the index"))?;
        let scan = self.scan_work_tree(&index)?;
        let mut too_large = Vec::new();
        for (deleted, path) in scan.changes {
            let rel = Path::new(OsStr::from_bytes(&path));
            if deleted {
                index
                    .remove_path(rel)
                    .map_err(self.err("staging a deletion"))?;
            } else if !self.stage_path(&mut index, &path, max_file_bytes)? {
                too_large.push(String::from_utf8_lossy(&path).into_owned());
            }
        }
        index.write().map_err(self.err("saving the index"))?;
        let tree = index
            .write_tree()
            .map_err(self.err("writing the index's tree"))?;
        let tree = self
            .repo
            .find_tree(tree)
            .map_err(self.err("reading the index's tree"))?;
        too_large.sort();
        Ok(Staged {
            tree,
            nested_repos: scan.nested_repos,
            too_large,
        })
    }

    /// Stages one added or changed path; false when it is a regular file
    /// over the cap (and so was not staged).
    pub(super) fn stage_path(
        &self,
        index: &mut Index,
        path: &[u8],
        max: u64,
    ) -> Result<bool, ShadowError> {
        let rel = Path::new(OsStr::from_bytes(path));
        let full = self.work_dir.join(rel);
        let stage_err = |source| ShadowError::Stage {
            path: full.clone(),
            source,
        };
        let meta = std::fs::symlink_metadata(&full).map_err(stage_err)?;
        if !meta.is_file() {
            index.add_path(rel).map_err(self.err("staging a change"))?;
            return Ok(true);
        }
        if meta.len() > max {
            return Ok(false);
        }
        // O_NOFOLLOW: a link swapped in after the check is refused, not
        // followed. O_NONBLOCK: a pipe swapped in cannot hang the open.
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&full)
            .map_err(stage_err)?;
        // The stat data is taken before reading: a write after it makes the
        // next scan read the file again.
        let meta = file.metadata().map_err(stage_err)?;
        if !meta.is_file() {
            return Err(stage_err(io::Error::other(
                "it is no longer a regular file",
            )));
        }
        if meta.len() > max {
            return Ok(false);
        }
        let id = match self.write_blob(file, max).map_err(stage_err)? {
            BlobRead::Written(id) => id,
            BlobRead::TooLarge => return Ok(false),
        };
        index
            .add(&index_entry(&meta, id, path))
            .map_err(self.err("staging a change"))?;
        Ok(true)
    }

    /// Streams `file` into a blob, giving up one byte past `max`.
    fn write_blob(&self, file: File, max: u64) -> io::Result<BlobRead> {
        let mut writer = self.repo.blob_writer(None).map_err(io::Error::other)?;
        let copied = io::copy(&mut file.take(max.saturating_add(1)), &mut writer)?;
        if copied > max {
            return Ok(BlobRead::TooLarge);
        }
        writer.flush()?;
        writer
            .commit()
            .map(BlobRead::Written)
            .map_err(io::Error::other)
    }

    pub(super) fn scan_work_tree(&self, index: &Index) -> Result<WorkTreeScan, ShadowError> {
        let mut opts = DiffOptions::new();
        opts.include_untracked(true)
            .recurse_untracked_dirs(true)
            .include_typechange(true)
            .update_index(true);
        let diff = self
            .repo
            .diff_index_to_workdir(Some(index), Some(&mut opts))
            .map_err(self.err("scanning the work tree"))?;
        // Paths are copied out: deltas may point into index entries that
        // staging replaces.
        let mut scan = WorkTreeScan::default();
        for delta in diff.deltas() {
            let deleted = delta.status() == Delta::Deleted;
            let file = if deleted {
                delta.old_file()
            } else {
                delta.new_file()
            };
            let Some(path) = file.path_bytes() else {
                continue;
            };
            // The only untracked directories a recursive scan reports whole
            // are those holding a `.git` of their own.
            if let Some(dir) = path.strip_suffix(b"/") {
                scan.nested_repos
                    .push(String::from_utf8_lossy(dir).into_owned());
            } else {
                scan.changes.push((deleted, path.to_vec()));
            }
        }
        Ok(scan)
    }
}

/// The index entry of a regular file, with the stat data libgit2 would
/// record for it (so its stat cache recognises the file as unchanged).
pub(super) fn index_entry(meta: &Metadata, id: Oid, path: &[u8]) -> IndexEntry {
    let executable = meta.mode() & 0o100 != 0;
    IndexEntry {
        // The index format keeps 32-bit fields; libgit2 truncates alike.
        ctime: IndexTime::new(meta.ctime() as i32, meta.ctime_nsec() as u32),
        mtime: IndexTime::new(meta.mtime() as i32, meta.mtime_nsec() as u32),
        dev: meta.rdev() as u32,
        ino: meta.ino() as u32,
        mode: if executable { 0o100755 } else { 0o100644 },
        uid: meta.uid(),
        gid: meta.gid(),
        file_size: meta.len() as u32,
        id,
        flags: 0,
        flags_extended: 0,
        path: path.to_vec(),
    }
}
