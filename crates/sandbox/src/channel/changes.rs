//! The agent's side of a sandbox whose files the host cannot see (a remote
//! engine): it keeps an index of `/work` (each path's kind, mode, size,
//! inode and times, taken when it starts), and on a [`Frame::Scan`] walks
//! `/work` again and reports every path that differs — deletions first,
//! then what is new or changed, parents before children, a file's bytes
//! after its entry — and makes the new walk its index. The host's own
//! changes ([`Frame::Put`]) are written here and taken into the index, so
//! they are not reported back.
//!
//! Nothing here is trusted by the host (a command can change `/work` while
//! it is walked, or replace the agent): the host checks every entry it is
//! sent. The agent only has to be faithful for honest commands: a file
//! that changed while it was read is read again at the next scan.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs::{self, File, Permissions};
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::frame::{Entry, EntryKind, Frame, FrameError};

/// The most paths the index holds: a tree larger than this is refused.
const MAX_ENTRIES: usize = 4_000_000;
/// Bytes of a file per data frame.
const CHUNK: usize = 32 * 1024;

/// What the index keeps of one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Meta {
    kind: EntryKind,
    mode: u32,
    size: u64,
    ino: u64,
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

    /// A mark that makes the next scan report the path again.
    fn stale(mut self) -> Meta {
        self.ctime = (-1, -1);
        self
    }
}

/// The agent's picture of `/work`.
#[derive(Debug, Default)]
pub(super) struct Index {
    root: PathBuf,
    entries: BTreeMap<Vec<u8>, Meta>,
}

impl Index {
    /// Walks `root` for the first picture.
    pub(super) fn take(root: &Path) -> io::Result<Index> {
        Ok(Index {
            root: root.to_path_buf(),
            entries: walk(root)?,
        })
    }

    /// Reports what changed since the last picture through `send` and
    /// takes the new one; the number of entries sent.
    pub(super) fn scan(
        &mut self,
        send: &mut dyn FnMut(Frame) -> Result<(), FrameError>,
    ) -> Result<Result<u32, String>, FrameError> {
        let mut now = match walk(&self.root) {
            Ok(now) => now,
            Err(err) => return Ok(Err(format!("walking /work failed: {err}"))),
        };
        let mut sent = 0u32;
        let mut gone: Option<&[u8]> = None;
        for path in self.entries.keys() {
            if now.contains_key(path) || gone.is_some_and(|dir| beneath(path, dir)) {
                continue;
            }
            gone = Some(path);
            send(Frame::Entry(entry(path, EntryKind::Gone, 0, 0, Vec::new())))?;
            sent += 1;
        }
        for (path, meta) in now.iter_mut() {
            if self
                .entries
                .get(path)
                .is_some_and(|before| !meta.differs(before))
            {
                continue;
            }
            sent += 1;
            let full = self.root.join(OsStr::from_bytes(path));
            match meta.kind {
                EntryKind::File => {
                    if !send_file(&full, meta, path, send)? {
                        *meta = meta.stale();
                    }
                }
                EntryKind::Link => {
                    let target = fs::read_link(&full)
                        .map(|t| t.into_os_string().into_encoded_bytes())
                        .unwrap_or_default();
                    send(Frame::Entry(entry(path, EntryKind::Link, 0o777, 0, target)))?;
                }
                kind => send(Frame::Entry(entry(path, kind, meta.mode, 0, Vec::new())))?,
            }
        }
        self.entries = now;
        Ok(Ok(sent))
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
    /// again, as they are now.
    fn retake(&mut self, path: &[u8]) {
        let beneath_it: Vec<Vec<u8>> = self
            .entries
            .range(path.to_vec()..)
            .take_while(|(p, _)| p.as_slice() == path || beneath(p, path))
            .map(|(p, _)| p.clone())
            .collect();
        for p in beneath_it {
            self.entries.remove(&p);
        }
        let full = self.root.join(OsStr::from_bytes(path));
        if let Ok(meta) = fs::symlink_metadata(&full) {
            if meta.is_dir() {
                for (p, m) in walk(&full).unwrap_or_default() {
                    let mut whole = path.to_vec();
                    whole.push(b'/');
                    whole.extend_from_slice(&p);
                    self.entries.insert(whole, m);
                }
            }
            self.entries.insert(path.to_vec(), Meta::of(&meta));
        }
        let mut parent = path;
        while let Some(cut) = parent.iter().rposition(|b| *b == b'/') {
            parent = &parent[..cut];
            if let Ok(meta) = fs::symlink_metadata(self.root.join(OsStr::from_bytes(parent))) {
                self.entries.insert(parent.to_vec(), Meta::of(&meta));
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

/// Sends a file's entry and exactly `meta.size` bytes of it; false when
/// what was sent is not the file as it is now (it changed, or could not be
/// read: zeros stand in), so that the next scan sends it again.
fn send_file(
    full: &Path,
    meta: &Meta,
    path: &[u8],
    send: &mut dyn FnMut(Frame) -> Result<(), FrameError>,
) -> Result<bool, FrameError> {
    send(Frame::Entry(entry(
        path,
        EntryKind::File,
        meta.mode,
        meta.size,
        Vec::new(),
    )))?;
    let mut file = open_own(full, meta.mode);
    let mut left = meta.size;
    let mut faithful = file.is_some();
    let mut buf = vec![0u8; CHUNK];
    while left > 0 {
        let want = usize::try_from(left.min(CHUNK as u64)).unwrap_or(CHUNK);
        let got = match file.as_mut().map(|f| f.read(&mut buf[..want])) {
            Some(Ok(n)) if n > 0 => n,
            _ => {
                // Cut short (or unreadable): zeros, and sent again later.
                faithful = false;
                file = None;
                buf[..want].fill(0);
                want
            }
        };
        send(Frame::Data(buf[..got].to_vec()))?;
        left -= got as u64;
    }
    let grew = file
        .as_mut()
        .is_some_and(|f| f.read(&mut buf[..1]).is_ok_and(|n| n > 0));
    Ok(faithful && !grew)
}

/// Opens a file of the agent's own user for reading without following a
/// link, giving it read permission for the moment if it had none.
fn open_own(full: &Path, mode: u32) -> Option<File> {
    let open = || {
        fs::OpenOptions::new()
            .read(true)
            .custom_flags(nofollow())
            .open(full)
    };
    match open() {
        Ok(file) => Some(file),
        Err(err) if err.kind() == io::ErrorKind::PermissionDenied => {
            fs::set_permissions(full, Permissions::from_mode(mode | 0o400)).ok()?;
            let file = open().ok();
            let _ = fs::set_permissions(full, Permissions::from_mode(mode));
            file
        }
        Err(_) => None,
    }
}

/// `O_NOFOLLOW`, as rustix names it.
fn nofollow() -> i32 {
    rustix::fs::OFlags::NOFOLLOW.bits() as i32
}

/// Makes `full` what `entry` says, replacing whatever is there.
fn write(full: &Path, entry: &Entry, bytes: &[u8]) -> io::Result<()> {
    let existing = fs::symlink_metadata(full).ok();
    let is_dir = existing.as_ref().is_some_and(fs::Metadata::is_dir);
    let clear = |full: &Path| match is_dir {
        true => fs::remove_dir_all(full),
        false => fs::remove_file(full),
    };
    if let Some(parent) = full.parent() {
        fs::create_dir_all(parent)?;
    }
    match entry.kind {
        EntryKind::Gone => match existing {
            Some(_) => clear(full),
            None => Ok(()),
        },
        EntryKind::Dir => {
            if existing.is_some() && !is_dir {
                clear(full)?;
            }
            if !is_dir {
                fs::create_dir(full)?;
            }
            fs::set_permissions(full, Permissions::from_mode(entry.mode & 0o7777))
        }
        EntryKind::File => {
            if existing.is_some() {
                clear(full)?;
            }
            let mut file = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(full)?;
            file.write_all(bytes)?;
            file.set_permissions(Permissions::from_mode(entry.mode & 0o7777))
        }
        EntryKind::Link => {
            if existing.is_some() {
                clear(full)?;
            }
            std::os::unix::fs::symlink(OsStr::from_bytes(&entry.target), full)
        }
        EntryKind::Special => Ok(()),
    }
}

/// Every path under `root` (not `root` itself), relative, with its
/// metadata; links are not followed.
fn walk(root: &Path) -> io::Result<BTreeMap<Vec<u8>, Meta>> {
    let mut entries = BTreeMap::new();
    let mut folders = vec![(root.to_path_buf(), Vec::new())];
    while let Some((dir, rel)) = folders.pop() {
        for item in fs::read_dir(&dir)? {
            let item = item?;
            let name = item.file_name();
            let mut path = rel.clone();
            if !path.is_empty() {
                path.push(b'/');
            }
            path.extend_from_slice(name.as_bytes());
            let full = item.path();
            let meta = match fs::symlink_metadata(&full) {
                Ok(meta) => meta,
                Err(err) if err.kind() == io::ErrorKind::NotFound => continue,
                Err(err) => return Err(err),
            };
            if meta.is_dir() {
                folders.push((full, path.clone()));
            }
            entries.insert(path, Meta::of(&meta));
            if entries.len() > MAX_ENTRIES {
                return Err(io::Error::other(format!(
                    "/work holds more than {MAX_ENTRIES} paths"
                )));
            }
        }
    }
    Ok(entries)
}

#[cfg(test)]
mod tests;
