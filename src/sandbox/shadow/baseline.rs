//! Staging the baseline: the whole work copy into an empty index.
//!
//! The result is what a step's staging would record (the same scan, so the
//! same ignore rules; the same index entries, so the stat cache holds), but
//! the blobs of ordinary files go into pack files instead of one loose
//! object each: each file is opened once, read whole, hashed and packed, and
//! only its index entry is kept. Symbolic links and files over
//! [`PACKED_FILE_MAX`] are staged one by one as a step stages them.

use std::ffi::OsStr;
use std::fs::{Metadata, OpenOptions};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;

use git2::Tree;

use super::pack::BlobPacker;
use super::stage::index_entry;
use super::{ShadowError, ShadowRepo};

/// Regular files up to this size are read whole and packed; larger ones are
/// streamed into loose objects, so memory stays small.
const PACKED_FILE_MAX: u64 = 8 * 1024 * 1024;

impl ShadowRepo {
    /// Stages every file of the work tree into an empty index, saves it,
    /// and returns its tree.
    pub(super) fn stage_baseline(&self) -> Result<Tree<'_>, ShadowError> {
        let mut index = self.repo.index().map_err(self.err("opening the index"))?;
        // Whatever an earlier attempt left is dropped: every path found is
        // an addition.
        index.clear().map_err(self.err("emptying the index"))?;
        let scan = self.scan_work_tree(&index)?;
        let pack_err = |source| ShadowError::Pack {
            git_dir: self.git_dir.clone(),
            source,
        };
        let mut packer =
            BlobPacker::new(&self.repo).map_err(self.err("opening the object database"))?;
        let mut packed = Vec::new();
        let mut data = Vec::new();
        for (_, path) in &scan.changes {
            match self.read_whole(path, &mut data)? {
                Some(meta) => {
                    let id = packer.add(&data).map_err(pack_err)?;
                    packed.push(index_entry(&meta, id, path));
                }
                None => {
                    self.stage_path(&mut index, path, u64::MAX)?;
                }
            }
        }
        packer.finish().map_err(pack_err)?;
        // Added once the packs are in place: the index checks that each
        // entry's blob exists.
        for entry in &packed {
            index.add(entry).map_err(self.err("staging a file"))?;
        }
        index.write().map_err(self.err("saving the index"))?;
        let tree = index
            .write_tree()
            .map_err(self.err("writing the index's tree"))?;
        self.repo
            .find_tree(tree)
            .map_err(self.err("reading the index's tree"))
    }

    /// Reads the regular file at `path` whole into `data` and returns its
    /// stat data, taken before reading; `None` when it is anything else (a
    /// symbolic link, a file over [`PACKED_FILE_MAX`]).
    fn read_whole(&self, path: &[u8], data: &mut Vec<u8>) -> Result<Option<Metadata>, ShadowError> {
        let full = self.work_dir.join(OsStr::from_bytes(path));
        let stage_err = |source| ShadowError::Stage {
            path: full.clone(),
            source,
        };
        // O_NOFOLLOW: a link is not opened but staged as a link.
        // O_NONBLOCK: a pipe cannot hang the open.
        let file = match OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&full)
        {
            Ok(file) => file,
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Ok(None),
            Err(e) => return Err(stage_err(e)),
        };
        let meta = file.metadata().map_err(stage_err)?;
        if !meta.is_file() || meta.len() > PACKED_FILE_MAX {
            return Ok(None);
        }
        data.clear();
        file.take(PACKED_FILE_MAX + 1)
            .read_to_end(data)
            .map_err(stage_err)?;
        // A file that grew past the limit while it was read is streamed.
        Ok((data.len() as u64 <= PACKED_FILE_MAX).then_some(meta))
    }
}
