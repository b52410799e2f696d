//! Staging: one bounded walk of the work tree ([`crate::tree::scan`])
//! brings the shadow index in line with it.
//!
//! libgit2 never sees the work tree (the repo is opened without one): the
//! walk lists what is recorded, and a file whose stat data matches its index
//! entry is not read (a stat cache, as git's). A changed regular file is
//! opened through its folder's handle only after the entry was seen to be a
//! regular file, its size is checked before anything is hashed, and the read
//! stops one byte past the cap, so a file that grows while it is read cannot
//! make the host hash gigabytes either. Over the cap, the file is left out
//! of the index and reported. A link's blob is its target, read with
//! `readlinkat`. Entries git would refuse are reported, not staged.
//!
//! An entry staged while its timestamps are still recent is stored with its
//! change time cleared, so the next walk reads it again: a write in the same
//! clock tick as the read would otherwise leave its stat data unchanged.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use git2::{Index, IndexEntry, IndexTime, Oid, Tree};
use rustix::fs::Stat;

use super::{ShadowError, ShadowRepo};
use crate::tree::scan::{self, Limits, Refused, Tracked, Visit, WalkError};
use ah_tools::fs_beneath::dir::DirHandle;

/// How long one walk of the work tree may take before the step fails
/// closed.
pub(super) const SCAN_SECONDS: u64 = 120;

/// How recent a timestamp must be for its entry to be read again next time.
const RACY: Duration = Duration::from_millis(100);

/// What one staging pass left in the index.
pub(super) struct Staged<'r> {
    /// The index's tree, written to the object store.
    pub(super) tree: Tree<'r>,
    pub(super) nested_repos: Vec<String>,
    /// Changed files over the cap, not staged.
    pub(super) too_large: Vec<String>,
    /// Entries that cannot be recorded, not staged.
    pub(super) refused: Vec<Refused>,
}

impl From<WalkError> for ShadowError {
    fn from(source: WalkError) -> ShadowError {
        ShadowError::Walk(source)
    }
}

/// The index, asked what is tracked.
struct IndexTracked<'i>(&'i Index);

impl Tracked for IndexTracked<'_> {
    fn file(&self, path: &[u8]) -> bool {
        self.0
            .get_path(Path::new(OsStr::from_bytes(path)), 0)
            .is_some()
    }

    fn dir(&self, path: &[u8]) -> bool {
        let mut prefix = path.to_vec();
        prefix.push(b'/');
        let Ok(at) = self.0.find_prefix(prefix.as_slice()) else {
            return false;
        };
        self.0.get(at).is_some_and(|e| e.path.starts_with(&prefix))
    }
}

impl ShadowRepo {
    /// Opens the work tree's root folder.
    pub(super) fn open_work(&self) -> Result<DirHandle, ShadowError> {
        DirHandle::open_root(&self.work_dir).map_err(|source| ShadowError::WorkDir {
            path: self.work_dir.clone(),
            source,
        })
    }

    /// Brings the index in line with the work tree (files over
    /// `max_file_bytes` and refused entries left out), saves it, and writes
    /// its tree.
    pub(super) fn stage_all(&self, max_file_bytes: u64) -> Result<Staged<'_>, ShadowError> {
        self.settle_index()?;
        let started = SystemTime::now();
        let mut index = self.repo.index().map_err(self.err("opening the index"))?;
        index.read(false).map_err(self.err("reading the index"))?;
        let root = self.open_work()?;
        let mut seen = HashSet::new();
        let mut updates = Vec::new();
        let mut too_large = Vec::new();
        let mut rules_refused = Vec::new();
        let tracked = IndexTracked(&index);
        let walk = scan::walk(
            &root,
            &tracked,
            Limits::within(SCAN_SECONDS),
            &mut |visit: Visit<'_>| -> Result<(), ShadowError> {
                seen.insert(visit.path.to_vec());
                let cached = index.get_path(Path::new(OsStr::from_bytes(visit.path)), 0);
                if cached
                    .as_ref()
                    .is_some_and(|e| stat_matches(e, &visit.stat, visit.link))
                {
                    return Ok(());
                }
                let Some(entry) = self.stage_entry(&visit, max_file_bytes, started)? else {
                    too_large.push(String::from_utf8_lossy(visit.path).into_owned());
                    return Ok(());
                };
                // An oversized rules file is refused when it is the step's
                // change, not when it is the project's own, unchanged.
                match scan::oversized_rules(visit.name, &visit.stat, visit.link) {
                    Some(why) if cached.is_none_or(|c| c.id != entry.id) => {
                        rules_refused.push(Refused {
                            path: visit.path.to_vec(),
                            why,
                        });
                    }
                    _ => updates.push(entry),
                }
                Ok(())
            },
        )?;
        let mut refused = walk.refused;
        refused.append(&mut rules_refused);
        let gone: Vec<Vec<u8>> = index
            .iter()
            .filter(|e| !seen.contains(&e.path))
            .map(|e| e.path)
            .collect();
        for path in gone {
            index
                .remove_path(Path::new(OsStr::from_bytes(&path)))
                .map_err(self.err("staging a deletion"))?;
        }
        for entry in updates {
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
        too_large.sort();
        refused.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(Staged {
            tree,
            nested_repos: lossy(walk.nested_repos),
            too_large,
            refused,
        })
    }

    /// The index entry of one visited file or link, its blob written;
    /// `None` for a regular file over `max` bytes.
    pub(super) fn stage_entry(
        &self,
        visit: &Visit<'_>,
        max: u64,
        started: SystemTime,
    ) -> Result<Option<IndexEntry>, ShadowError> {
        let stage_err = |source| ShadowError::Stage {
            path: self.work_dir.join(OsStr::from_bytes(visit.path)),
            source,
        };
        if visit.link {
            let target = visit.dir.read_link(visit.name).map_err(stage_err)?;
            let id = self
                .repo
                .blob(&target)
                .map_err(self.err("storing a link"))?;
            return Ok(Some(index_entry(
                &visit.stat,
                id,
                visit.path,
                true,
                started,
            )));
        }
        if file_size(&visit.stat) > max {
            return Ok(None);
        }
        // The stat data is taken from the open file, before reading: a
        // write after it makes the next walk read the file again.
        let (file, stat) = visit.dir.open_regular(visit.name).map_err(stage_err)?;
        if file_size(&stat) > max {
            return Ok(None);
        }
        match self.write_blob(file, max).map_err(stage_err)? {
            Some(id) => Ok(Some(index_entry(&stat, id, visit.path, false, started))),
            None => Ok(None),
        }
    }

    /// Streams `file` into a blob, giving up one byte past `max`.
    fn write_blob(&self, file: File, max: u64) -> io::Result<Option<Oid>> {
        let mut writer = self.repo.blob_writer(None).map_err(io::Error::other)?;
        let copied = io::copy(
            &mut io::Read::take(file, max.saturating_add(1)),
            &mut writer,
        )?;
        if copied > max {
            return Ok(None);
        }
        writer.flush()?;
        writer.commit().map(Some).map_err(io::Error::other)
    }
}

fn lossy(paths: Vec<Vec<u8>>) -> Vec<String> {
    paths
        .into_iter()
        .map(|p| String::from_utf8_lossy(&p).into_owned())
        .collect()
}

pub(super) fn file_size(stat: &Stat) -> u64 {
    stat.st_size.max(0) as u64
}

fn mode_of(stat: &Stat, link: bool) -> u32 {
    if link {
        0o120000
    } else if stat.st_mode & 0o100 != 0 {
        0o100755
    } else {
        0o100644
    }
}

/// Whether `entry` still describes the file whose stat data is `stat`.
pub(super) fn stat_matches(entry: &IndexEntry, stat: &Stat, link: bool) -> bool {
    // The index format keeps 32-bit fields; compared truncated alike.
    entry.ctime.seconds() == stat.st_ctime as i32
        && entry.ctime.nanoseconds() == stat.st_ctime_nsec as u32
        && entry.mtime.seconds() == stat.st_mtime as i32
        && entry.mtime.nanoseconds() == stat.st_mtime_nsec as u32
        && entry.ino == stat.st_ino as u32
        && entry.file_size == stat.st_size as u32
        && entry.mode == mode_of(stat, link)
}

/// The index entry of a file or link with its stat data; a recent one gets
/// a cleared change time, so it never matches and is read again.
pub(super) fn index_entry(
    stat: &Stat,
    id: Oid,
    path: &[u8],
    link: bool,
    started: SystemTime,
) -> IndexEntry {
    let recent = |secs: i64, nsec: u64| {
        let at = UNIX_EPOCH + Duration::new(secs.max(0) as u64, nsec as u32);
        at + RACY >= started
    };
    let racy =
        recent(stat.st_mtime, stat.st_mtime_nsec) || recent(stat.st_ctime, stat.st_ctime_nsec);
    let ctime = if racy {
        IndexTime::new(0, 0)
    } else {
        IndexTime::new(stat.st_ctime as i32, stat.st_ctime_nsec as u32)
    };
    IndexEntry {
        ctime,
        mtime: IndexTime::new(stat.st_mtime as i32, stat.st_mtime_nsec as u32),
        dev: stat.st_dev as u32,
        ino: stat.st_ino as u32,
        mode: mode_of(stat, link),
        uid: stat.st_uid,
        gid: stat.st_gid,
        file_size: stat.st_size as u32,
        id,
        flags: 0,
        flags_extended: 0,
        path: path.to_vec(),
    }
}
