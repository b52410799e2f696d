//! The agent's side of a sandbox whose files the host cannot see (a remote
//! engine): it keeps an index of `/work` (each path's kind, mode, size,
//! inode, links and times, taken when it starts), and on a
//! [`Frame::Scan`] reports every path that differs from it — deletions
//! first, then what is new or changed, parents before children, a file's
//! bytes after its entry — and takes what it reported into the index. The
//! host's own changes ([`Frame::Put`]) are written here and taken into the
//! index, so they are not reported back.
//!
//! A scan looks only at the paths inotify named since the last one
//! (`watch`), a new or replaced folder whole, and every name of each file
//! with several (a change through one name raises an event for that name
//! only); it walks the whole tree when inotify may have missed something
//! or is refused, or when a file has a name the index does not know of.
//! Two changes raise no event a scan can see, and are found only if a
//! later scan walks: writes through a shared memory mapping after the
//! writer closed the file, and a file of one name changed through a second
//! one made and removed again in a folder the same command made (before
//! the agent watched it).
//!
//! Nothing here is trusted by the host (a command can change `/work` while
//! it is looked at, or replace the agent): the host checks every entry it
//! is sent. The agent only has to be faithful for honest commands: a file
//! that changed while it was read is read again at the next scan.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::OsStr;
use std::fs;
use std::io;
use std::os::fd::BorrowedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::frame::{Entry, EntryKind, Frame, FrameError};
use files::{send_file, write};
use watch::{Noted, Watch};

mod files;
mod watch;

/// The most paths the index holds: a tree larger than this is refused.
const MAX_ENTRIES: usize = 4_000_000;

/// What the index keeps of one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Meta {
    kind: EntryKind,
    mode: u32,
    size: u64,
    ino: u64,
    nlink: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Meta {
    fn of(meta: &fs::Metadata) -> Meta {
        let kind = match meta.file_type() {
            t if t.is_file() => EntryKind::File,
            t if t.is_dir() => EntryKind::Dir,
            t if t.is_symlink() => EntryKind::Link,
            _ => EntryKind::Special,
        };
        Meta {
            kind,
            mode: meta.mode() & 0o7777,
            size: meta.len(),
            ino: meta.ino(),
            nlink: meta.nlink(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }

    /// Whether `self` (now) must be reported against `before`: a folder
    /// only when its kind or mode changed (its times change with what it
    /// holds, which is reported path by path).
    fn differs(&self, before: &Meta) -> bool {
        match (self.kind, before.kind) {
            (EntryKind::Dir, EntryKind::Dir) => self.mode != before.mode,
            _ => self != before,
        }
    }

    /// A mark that makes the next look at the path report it again.
    fn stale(mut self) -> Meta {
        self.ctime = (-1, -1);
        self
    }

    /// Whether this has more than one name (a file, or a link or special
    /// file hard-linked as they are).
    fn linked(&self) -> bool {
        self.kind != EntryKind::Dir && self.nlink > 1
    }
}

/// What a scan found of the paths it looked at, in order: `None` where a
/// path is no more.
type Found = BTreeMap<Vec<u8>, Option<Meta>>;

/// The agent's picture of `/work`.
#[derive(Debug, Default)]
pub(super) struct Index {
    root: PathBuf,
    entries: BTreeMap<Vec<u8>, Meta>,
    /// The names of each path with more than one, by inode.
    linked: HashMap<u64, BTreeSet<Vec<u8>>>,
    /// Files whose bytes were sent other than they are (they changed while
    /// read, or could not be read): looked at again by the next scan.
    again: BTreeSet<Vec<u8>>,
    /// The watch on its folders; `None` where inotify is refused.
    watch: Option<Watch>,
}

impl Index {
    /// Walks `root` for the first picture, watching its folders.
    pub(super) fn take(root: &Path) -> io::Result<Index> {
        let mut index = Index {
            root: root.to_path_buf(),
            watch: Watch::new(root),
            ..Index::default()
        };
        let found = index.walk_all()?;
        for (path, meta) in found {
            if let Some(meta) = meta {
                index.insert(path, meta);
            }
        }
        Ok(index)
    }

    /// The descriptor that becomes readable when inotify has events for
    /// [`Index::drain`]; `None` without a watch.
    pub(super) fn events(&self) -> Option<BorrowedFd<'_>> {
        self.watch.as_ref().map(Watch::fd)
    }

    /// Reads the events waiting (so that a long command's do not overflow
    /// the kernel's queue).
    pub(super) fn drain(&mut self) {
        if let Some(watch) = self.watch.as_mut() {
            watch.drain();
        }
    }

    /// Reports what changed since the last picture through `send` and
    /// takes it in; the number of entries sent.
    pub(super) fn scan(
        &mut self,
        send: &mut dyn FnMut(Frame) -> Result<(), FrameError>,
    ) -> Result<Result<u32, String>, FrameError> {
        let noted = self.watch.as_mut().and_then(Watch::take);
        let looked = match noted {
            Some(mut noted) => {
                for path in std::mem::take(&mut self.again) {
                    noted.entry(path).or_default();
                }
                self.look(noted)
            }
            None => Ok(None),
        };
        let found = match looked {
            Ok(Some(found)) => Ok(found),
            Ok(None) | Err(_) => self.walk_all(),
        };
        self.again.clear();
        match found {
            Ok(found) => self.report(found, send).map(Ok),
            Err(err) => Ok(Err(format!("walking /work failed: {err}"))),
        }
    }

    /// Sends what `found` says differs from the index, and takes it in.
    fn report(
        &mut self,
        found: Found,
        send: &mut dyn FnMut(Frame) -> Result<(), FrameError>,
    ) -> Result<u32, FrameError> {
        let mut sent = 0u32;
        let mut gone: Option<&[u8]> = None;
        for (path, _) in found.iter().filter(|(_, meta)| meta.is_none()) {
            if !self.entries.contains_key(path) || gone.is_some_and(|dir| beneath(path, dir)) {
                continue;
            }
            gone = Some(path);
            send(Frame::Entry(entry(path, EntryKind::Gone, 0, 0, Vec::new())))?;
            sent += 1;
        }
        for (path, meta) in found {
            let Some(meta) = meta else {
                self.remove(&path);
                continue;
            };
            if self
                .entries
                .get(&path)
                .is_some_and(|before| !meta.differs(before))
            {
                self.insert(path, meta);
                continue;
            }
            sent += 1;
            let full = self.root.join(OsStr::from_bytes(&path));
            match meta.kind {
                EntryKind::File => {
                    if !send_file(&full, &meta, &path, send)? {
                        self.again.insert(path.clone());
                        self.insert(path, meta.stale());
                        continue;
                    }
                }
                EntryKind::Link => {
                    let target = fs::read_link(&full)
                        .map(|t| t.into_os_string().into_encoded_bytes())
                        .unwrap_or_default();
                    send(Frame::Entry(entry(
                        &path,
                        EntryKind::Link,
                        0o777,
                        0,
                        target,
                    )))?;
                }
                kind => send(Frame::Entry(entry(&path, kind, meta.mode, 0, Vec::new())))?,
            }
            self.insert(path, meta);
        }
        Ok(sent)
    }

    /// Every path as it is now, the index's paths that are no more as
    /// `None`; the watch is given every folder again.
    fn walk_all(&mut self) -> io::Result<Found> {
        let mut found: Found = self.entries.keys().map(|p| (p.clone(), None)).collect();
        walk(&self.root, b"", self.watch.as_mut(), &mut found)?;
        Ok(found)
    }

    /// Looks at the `noted` paths (and what they bring in); `None` when
    /// only a walk can tell (a file has a name the index does not know).
    fn look(&mut self, noted: Noted) -> io::Result<Option<Found>> {
        let mut found = Found::new();
        for (path, made) in noted {
            self.look_at(path, made.any, &mut found)?;
            if self.entries.len() + found.len() > MAX_ENTRIES {
                // The walk says so.
                return Ok(None);
            }
        }
        // A file with a name the index does not know may have changed
        // through it: only a walk finds that name.
        for (path, now) in &found {
            if let Some(now) = now.filter(Meta::linked) {
                let names = self.linked.get(&now.ino);
                let known = names.map_or(0, BTreeSet::len)
                    + usize::from(!names.is_some_and(|n| n.contains(path)));
                if (known as u64) < now.nlink {
                    return Ok(None);
                }
            }
        }
        // Every name of a file with several: a change through one name (or
        // a name's removal) changes all, and raised an event for one at
        // most.
        let names: Vec<Vec<u8>> = self.linked.values().flatten().cloned().collect();
        for name in names {
            self.look_at(name, false, &mut found)?;
        }
        Ok(Some(found))
    }

    /// Puts `path` as it is now into `found`, unless it is there already
    /// or its folder is not one (any more); a folder that is new (`made`
    /// there, or another than the index knows) whole, and what the index
    /// holds beneath a folder that is no more (or no folder) as `None`.
    fn look_at(&mut self, path: Vec<u8>, made: bool, found: &mut Found) -> io::Result<()> {
        if path.is_empty() || found.contains_key(&path) {
            return Ok(());
        }
        if let Some(cut) = path.iter().rposition(|b| *b == b'/') {
            let parent = &path[..cut];
            let now = match found.get(parent) {
                Some(meta) => *meta,
                None => self.entries.get(parent).copied(),
            };
            if !now.is_some_and(|meta| meta.kind == EntryKind::Dir) {
                return Ok(());
            }
        }
        let full = self.root.join(OsStr::from_bytes(&path));
        let now = match fs::symlink_metadata(&full) {
            Ok(meta) => Some(Meta::of(&meta)),
            Err(err)
                if matches!(
                    err.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) =>
            {
                None
            }
            Err(err) => return Err(err),
        };
        let before = self.entries.get(&path).copied();
        let was_dir = before.is_some_and(|b| b.kind == EntryKind::Dir);
        let same_dir = was_dir
            && !made
            && now
                .is_some_and(|n| n.kind == EntryKind::Dir && before.map(|b| b.ino) == Some(n.ino));
        if was_dir && !same_dir {
            for p in self.beneath(&path) {
                found.insert(p.clone(), None);
            }
        }
        found.insert(path.clone(), now);
        if now.is_some_and(|n| n.kind == EntryKind::Dir) && !same_dir {
            walk(&self.root, &path, self.watch.as_mut(), found)?;
        }
        Ok(())
    }

    /// The index's paths beneath the folder `path`.
    fn beneath(&self, path: &[u8]) -> impl Iterator<Item = &Vec<u8>> {
        // Between `path/` and `path0`: `/` is followed by `0` in ASCII.
        let mut from = path.to_vec();
        from.push(b'/');
        let mut to = path.to_vec();
        to.push(b'/' + 1);
        self.entries.range(from..to).map(|(p, _)| p)
    }

    /// Takes `path` into the index as `meta`.
    fn insert(&mut self, path: Vec<u8>, meta: Meta) {
        if let Some(before) = self.entries.get(&path).copied() {
            self.unlink(&path, &before);
        }
        if meta.linked() {
            self.linked
                .entry(meta.ino)
                .or_default()
                .insert(path.clone());
        }
        self.entries.insert(path, meta);
    }

    /// Takes `path` out of the index.
    fn remove(&mut self, path: &[u8]) {
        if let Some(before) = self.entries.remove(path) {
            self.unlink(path, &before);
        }
    }

    /// Forgets `path` as a name of a linked file.
    fn unlink(&mut self, path: &[u8], before: &Meta) {
        if !before.linked() {
            return;
        }
        if let Some(names) = self.linked.get_mut(&before.ino) {
            names.remove(path);
            if names.is_empty() {
                self.linked.remove(&before.ino);
            }
        }
    }

    /// Makes `entry`'s path what it says, its bytes read with `data`, and
    /// takes it into the index.
    pub(super) fn put(
        &mut self,
        entry: &Entry,
        data: &mut dyn FnMut() -> Result<Vec<u8>, FrameError>,
    ) -> Result<Result<(), String>, FrameError> {
        let full = self.root.join(OsStr::from_bytes(&entry.path));
        // A file's bytes are read whatever happens to the write.
        let mut bytes = Vec::new();
        if entry.kind == EntryKind::File {
            while (bytes.len() as u64) < entry.size {
                let chunk = data()?;
                if chunk.is_empty() {
                    return Err(FrameError::Malformed("data"));
                }
                bytes.extend_from_slice(&chunk);
            }
            if bytes.len() as u64 != entry.size {
                return Err(FrameError::Malformed("data"));
            }
        }
        let written = write(&full, entry, &bytes);
        self.retake(&entry.path);
        Ok(written.map_err(|err| {
            format!(
                "{}: {err}",
                String::from_utf8_lossy(&entry.path).escape_debug()
            )
        }))
    }

    /// Takes `path`, what is beneath it and its parents into the index
    /// again, as they are now (a folder made for it watched).
    fn retake(&mut self, path: &[u8]) {
        let mut found: Found = self.beneath(path).map(|p| (p.clone(), None)).collect();
        found.insert(path.to_vec(), None);
        let full = self.root.join(OsStr::from_bytes(path));
        if let Ok(meta) = fs::symlink_metadata(&full) {
            if meta.is_dir() {
                let _ = walk(&self.root, path, self.watch.as_mut(), &mut found);
            }
            found.insert(path.to_vec(), Some(Meta::of(&meta)));
        }
        let mut parent = path;
        while let Some(cut) = parent.iter().rposition(|b| *b == b'/') {
            parent = &parent[..cut];
            if let Ok(meta) = fs::symlink_metadata(self.root.join(OsStr::from_bytes(parent))) {
                if let Some(watch) = self.watch.as_mut() {
                    watch.add(parent);
                }
                found.insert(parent.to_vec(), Some(Meta::of(&meta)));
            }
        }
        for (p, meta) in found {
            match meta {
                Some(meta) => self.insert(p, meta),
                None => self.remove(&p),
            }
        }
    }
}

fn entry(path: &[u8], kind: EntryKind, mode: u32, size: u64, target: Vec<u8>) -> Entry {
    Entry {
        path: path.to_vec(),
        kind,
        mode,
        size,
        target,
    }
}

/// Whether `path` lies inside folder `dir` (both relative).
fn beneath(path: &[u8], dir: &[u8]) -> bool {
    path.len() > dir.len() && path.starts_with(dir) && path[dir.len()] == b'/'
}

/// Puts every path beneath the folder `rel` of `root` (empty: `root`
/// itself) into `found`, relative to `root`, with its metadata; links are
/// not followed. Each folder (`rel` too) is given to `watch` before it is
/// read.
fn walk(
    root: &Path,
    rel: &[u8],
    mut watch: Option<&mut Watch>,
    found: &mut Found,
) -> io::Result<()> {
    if let Some(watch) = watch.as_deref_mut() {
        watch.add(rel);
    }
    let mut folders = vec![rel.to_vec()];
    let mut count = 0usize;
    while let Some(folder) = folders.pop() {
        let dir = root.join(OsStr::from_bytes(&folder));
        for item in fs::read_dir(&dir)? {
            let item = item?;
            let mut path = folder.clone();
            if !path.is_empty() {
                path.push(b'/');
            }
            path.extend_from_slice(item.file_name().as_bytes());
            let meta = match fs::symlink_metadata(item.path()) {
                Ok(meta) => meta,
                Err(err) if err.kind() == io::ErrorKind::NotFound => continue,
                Err(err) => return Err(err),
            };
            if meta.is_dir() {
                if let Some(watch) = watch.as_deref_mut() {
                    watch.add(&path);
                }
                folders.push(path.clone());
            }
            found.insert(path, Some(Meta::of(&meta)));
            count += 1;
            if count > MAX_ENTRIES {
                return Err(io::Error::other(format!(
                    "/work holds more than {MAX_ENTRIES} paths"
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
