//! Staging the baseline: the whole work copy into an empty index.
//!
//! The result is what a step's staging would record (the same walk, so the
//! same ignore rules; the same index entries, so the stat cache holds), but
//! the blobs of ordinary files go into pack files instead of one loose
//! object each: each file is opened once, read whole, hashed and packed, and
//! only its index entry is kept. Symbolic links and files over
//! [`PACKED_FILE_MAX`] are staged one by one as a step stages them. The
//! project's own files are the user's: no size cap applies to them, and a
//! rules file too large to honour is only not honoured.

use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::time::SystemTime;

use git2::{IndexEntry, Tree};

use super::pack::BlobPacker;
use super::seed::Seed;
use super::stage::{file_size, index_entry};
use super::{ShadowError, ShadowRepo};
use crate::tree::scan::{self, Limits, Refused, Tracked, Untracked, Visit};
use ah_tools::fs_beneath::dir::DirHandle;

/// Regular files up to this size are read whole and packed; larger ones are
/// streamed into loose objects, so memory stays small.
const PACKED_FILE_MAX: u64 = 8 * 1024 * 1024;

/// How long the baseline's walk may take: the project is the user's, and
/// a large one is legitimately slow to read.
const BASELINE_SECONDS: u64 = 3600;

impl ShadowRepo {
    /// Stages every file of the work tree into an empty index, saves it,
    /// and returns its tree with the entries that cannot be recorded.
    pub(super) fn stage_baseline(&self) -> Result<(Tree<'_>, Vec<Refused>), ShadowError> {
        self.stage_baseline_in(&self.open_work()?, &Untracked, None)
    }

    /// Stages every file under `root` that `tracked` does not hide into an
    /// empty index, taking the object ids `seed` vouches for instead of
    /// reading those files.
    pub(super) fn stage_baseline_in(
        &self,
        root: &DirHandle,
        tracked: &dyn Tracked,
        seed: Option<&Seed>,
    ) -> Result<(Tree<'_>, Vec<Refused>), ShadowError> {
        let mut index = self.repo.index().map_err(self.err("opening the index"))?;
        // Whatever an earlier attempt left is dropped: every path found is
        // an addition.
        index.clear().map_err(self.err("emptying the index"))?;
        let (entries, mut refused) = self.read_baseline(root, tracked, seed)?;
        // Added once the packs are in place, so that each entry's blob is
        // there for whatever reads the index.
        for entry in entries {
            if let Err(e) = index.add(&entry) {
                refused.push(Refused {
                    path: entry.path,
                    why: format!("git cannot record it: {}", e.message()),
                });
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
        Ok((tree, refused))
    }

    /// Reads every file under `root` that `tracked` does not hide: their
    /// blobs are written (packed), their index entries returned, with the
    /// entries that cannot be recorded.
    pub(super) fn read_baseline(
        &self,
        root: &DirHandle,
        tracked: &dyn Tracked,
        seed: Option<&Seed>,
    ) -> Result<(Vec<IndexEntry>, Vec<Refused>), ShadowError> {
        let started = SystemTime::now();
        let pack_err = |source| ShadowError::Pack {
            git_dir: self.git_dir.clone(),
            source,
        };
        let mut packer =
            BlobPacker::new(&self.repo).map_err(self.err("opening the object database"))?;
        let mut entries = Vec::new();
        let mut data = Vec::new();
        let odb = self
            .repo
            .odb()
            .map_err(self.err("opening the object database"))?;
        let walk = scan::walk(
            root,
            tracked,
            Limits::within(BASELINE_SECONDS),
            &mut |visit: Visit<'_>| -> Result<(), ShadowError> {
                if !visit.link
                    && let Some(id) = seed.and_then(|s| s.lookup(&odb, visit.path, &visit.stat))
                {
                    entries.push(index_entry(&visit.stat, id, visit.path, false, started));
                    return Ok(());
                }
                if !visit.link && file_size(&visit.stat) <= PACKED_FILE_MAX {
                    let stage_err = |source| ShadowError::Stage {
                        path: self.work_dir.join(OsStr::from_bytes(visit.path)),
                        source,
                    };
                    let (file, stat) = visit.dir.open_regular(visit.name).map_err(stage_err)?;
                    data.clear();
                    file.take(PACKED_FILE_MAX + 1)
                        .read_to_end(&mut data)
                        .map_err(stage_err)?;
                    // A file that grew past the limit while it was read is
                    // streamed like a large one.
                    if data.len() as u64 <= PACKED_FILE_MAX {
                        let id = packer.add(&data).map_err(pack_err)?;
                        entries.push(index_entry(&stat, id, visit.path, false, started));
                        return Ok(());
                    }
                }
                if let Some(entry) = self.stage_entry(&visit, u64::MAX, started)? {
                    entries.push(entry);
                }
                Ok(())
            },
        )?;
        packer.finish().map_err(pack_err)?;
        Ok((entries, walk.refused))
    }
}
