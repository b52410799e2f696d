//! The agent's inotify watch on every folder of `/work`: it notes the
//! paths that events name, so that a scan looks at those paths only instead
//! of walking the whole tree (0.3 s at 70,000 files).
//!
//! The notes are hints: a scan compares what it looks at with the index, so
//! a path noted in vain costs one `lstat`. What inotify cannot tell makes
//! the next scan walk: the kernel's queue overflowed, a watch could not be
//! added (the user's `max_user_watches`), too many paths were noted, a
//! file's name was made and removed again before the scan (it may have
//! been a second name of a file changed through it), or inotify is refused
//! altogether. Events name a file by the folder it was reached through, so
//! a hard-linked file changed through its other name is found by the
//! index's record of linked names (in `changes`), not here.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsStr;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::io::Errno;

/// The paths events named, each with what was made there.
pub(super) type Noted = BTreeMap<Vec<u8>, Made>;

/// What events say was made at a path since the last scan.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Made {
    /// Something was created or moved in there (a folder there is then
    /// new, whatever its inode's number).
    pub(super) any: bool,
    /// A file (or link) was.
    file: bool,
}

/// The most paths noted between two scans; past it the next scan walks.
const MAX_NOTED: usize = 100_000;

/// What a folder's watch reports: everything that changes a path in it.
fn mask() -> WatchFlags {
    WatchFlags::CREATE
        | WatchFlags::DELETE
        | WatchFlags::MODIFY
        | WatchFlags::ATTRIB
        | WatchFlags::CLOSE_WRITE
        | WatchFlags::MOVED_FROM
        | WatchFlags::MOVED_TO
        | WatchFlags::ONLYDIR
        | WatchFlags::DONT_FOLLOW
}

/// An inotify instance watching the folders of one tree.
#[derive(Debug)]
pub(super) struct Watch {
    /// Shared with the reader of a drain, which notes as it reads.
    fd: Rc<OwnedFd>,
    /// The tree's root.
    root: PathBuf,
    /// Each watch's folder, relative to the tree's root (empty: the root).
    folders: HashMap<i32, Vec<u8>>,
    /// The paths events named since the last [`Watch::take`].
    noted: Noted,
    /// Whether something was missed since the last [`Watch::take`].
    lost: bool,
}

impl Watch {
    /// A new instance, or `None` where the kernel refuses one (the user's
    /// `max_user_instances`, a seccomp profile): every scan then walks.
    pub(super) fn new(root: &Path) -> Option<Watch> {
        let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK).ok()?;
        Some(Watch {
            fd: Rc::new(fd),
            root: root.to_path_buf(),
            folders: HashMap::new(),
            noted: Noted::new(),
            lost: false,
        })
    }

    /// The descriptor that becomes readable when events wait.
    pub(super) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Watches the folder `rel` of the tree (again: a folder watched
    /// already keeps its watch, which now names it `rel`). Done before the
    /// folder is read, so nothing made in it after the reading began goes
    /// unseen.
    pub(super) fn add(&mut self, rel: &[u8]) {
        match inotify::add_watch(&*self.fd, self.root.join(OsStr::from_bytes(rel)), mask()) {
            Ok(wd) => {
                self.folders.insert(wd, rel.to_vec());
            }
            // Gone or replaced since it was listed: the scan that listed it
            // looks at its path again.
            Err(Errno::NOENT | Errno::NOTDIR) => {}
            Err(_) => self.lost = true,
        }
    }

    /// Reads every event waiting and notes the paths they name.
    pub(super) fn drain(&mut self) {
        let mut buf = [MaybeUninit::<u8>::uninit(); 64 * 1024];
        loop {
            // Folders made: watched once the events read with them are
            // noted.
            let mut made_folders = Vec::new();
            let fd = Rc::clone(&self.fd);
            let mut reader = inotify::Reader::new(&*fd, &mut buf);
            let waiting = loop {
                match reader.next() {
                    Ok(event) => self.note(&event, &mut made_folders),
                    Err(Errno::INTR) => continue,
                    Err(Errno::AGAIN) => break false,
                    Err(_) => {
                        self.lost = true;
                        break false;
                    }
                }
                if reader.is_buffer_empty() {
                    break true;
                }
            };
            // A new folder is watched at once, so that what a command goes
            // on doing in it raises events too (the scan reads it whole).
            for folder in made_folders {
                self.add(&folder);
            }
            if !waiting {
                return;
            }
        }
    }

    /// Notes the path `event` names; a folder made there goes to
    /// `made_folders`.
    fn note(&mut self, event: &inotify::Event<'_>, made_folders: &mut Vec<Vec<u8>>) {
        let flags = event.events();
        if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
            self.lost = true;
        }
        if flags.contains(ReadFlags::IGNORED) {
            self.folders.remove(&event.wd());
            return;
        }
        // An event on a folder itself (no name) is also reported, with its
        // name, by its parent's watch.
        let (Some(name), Some(folder)) = (event.file_name(), self.folders.get(&event.wd())) else {
            return;
        };
        let mut path = folder.clone();
        if !path.is_empty() {
            path.push(b'/');
        }
        path.extend_from_slice(name.to_bytes());
        let made = flags.intersects(ReadFlags::CREATE | ReadFlags::MOVED_TO);
        let file = !flags.contains(ReadFlags::ISDIR);
        if made && !file {
            made_folders.push(path.clone());
        }
        let mark = self.noted.entry(path).or_default();
        // A name made and removed again may have been a second name of a
        // file, through which that file changed (as git writes an object:
        // a temporary, a link to it, the temporary removed): only a walk
        // finds which.
        if flags.contains(ReadFlags::DELETE) && file && mark.file {
            self.lost = true;
        }
        mark.any |= made;
        mark.file |= made && file;
        if self.noted.len() > MAX_NOTED {
            self.lost = true;
            self.noted.clear();
        }
    }

    /// The paths noted since the last call, or `None` when something was
    /// missed (the caller walks the tree and adds its folders again).
    pub(super) fn take(&mut self) -> Option<Noted> {
        self.drain();
        let noted = std::mem::take(&mut self.noted);
        match std::mem::take(&mut self.lost) {
            true => None,
            false => Some(noted),
        }
    }
}
