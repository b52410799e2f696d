//! What appears in the project while an overlay run goes on. The lower
//! layer is the live project and a whiteout hides a name only once it is
//! made, so a `.env` the user creates mid-run (or an editor's swap of it,
//! or a socket) would show in `/work`. The survey watches every folder it
//! enters (inotify, [`Watch`]); before and after every step the run drains
//! the events and walks the folders where something appeared, finding what
//! the survey would have hidden ([`LateFiles::check`]); the run then hides
//! it through the merged view. Lost events (the queue overflowed), a
//! folder moved (the watched paths are stale) or a project that cannot be
//! watched (the watch limit) make the check survey the whole project.

use std::collections::{BTreeSet, HashMap};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};

use super::survey::{Reach, Survey, under_any, walk};
use crate::shadow::NameCheck;
use crate::tree::scan::join;
use crate::workspace::Withhold;
use ah_tools::fs_beneath::dir::DirHandle;

/// The project's folders watched for new entries.
#[derive(Debug)]
pub struct Watch {
    /// `None` once the project cannot be watched.
    fd: Option<OwnedFd>,
    /// Each watched folder, relative to the project, by watch descriptor.
    folders: HashMap<i32, Vec<u8>>,
    /// Why the project cannot be watched, if it cannot.
    blind: Option<String>,
}

/// What the events since the last drain ask to look at.
#[derive(Debug, Default)]
struct Touched {
    /// Folders where an entry appeared: their own entries.
    folders: BTreeSet<Vec<u8>>,
    /// Folders that appeared: everything in them.
    new: BTreeSet<Vec<u8>>,
    /// The whole project.
    whole: bool,
}

impl Default for Watch {
    fn default() -> Watch {
        Watch::new()
    }
}

impl Watch {
    /// An inotify instance, or a blind watch when none can be had.
    pub fn new() -> Watch {
        match inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC) {
            Ok(fd) => Watch {
                fd: Some(fd),
                folders: HashMap::new(),
                blind: None,
            },
            Err(e) => Watch {
                fd: None,
                folders: HashMap::new(),
                blind: Some(format!("inotify is not available ({e})")),
            },
        }
    }

    /// Watches the project's folder `rel`, open as `dir`. A watch that
    /// cannot be added (past the user's watch limit) makes the whole
    /// watch blind.
    pub fn add(&mut self, dir: &DirHandle, rel: &[u8]) {
        let Some(fd) = &self.fd else {
            return;
        };
        // The handle's own folder: no name is looked up again.
        let path = format!("/proc/self/fd/{}", dir.as_fd().as_raw_fd());
        let flags = WatchFlags::CREATE
            | WatchFlags::MOVED_TO
            | WatchFlags::MOVED_FROM
            | WatchFlags::MOVE_SELF
            | WatchFlags::ONLYDIR
            | WatchFlags::EXCL_UNLINK;
        match inotify::add_watch(fd, path.as_str(), flags) {
            Ok(wd) => {
                self.folders.insert(wd, rel.to_vec());
            }
            Err(e) => {
                let limit = std::fs::read_to_string("/proc/sys/fs/inotify/max_user_watches")
                    .map(|n| format!(" (fs.inotify.max_user_watches is {})", n.trim()))
                    .unwrap_or_default();
                self.blind = Some(format!(
                    "the project's {} folders cannot all be watched: {e}{limit}",
                    self.folders.len() + 1
                ));
                self.fd = None;
                self.folders.clear();
            }
        }
    }

    /// Why the project is not watched, if it is not: every check then
    /// surveys it whole.
    pub fn blind(&self) -> Option<&str> {
        self.blind.as_deref()
    }

    /// What the events since the last drain ask to look at.
    fn drain(&mut self) -> Touched {
        let mut touched = Touched::default();
        let Some(fd) = &self.fd else {
            touched.whole = true;
            return touched;
        };
        let mut buffer = [MaybeUninit::<u8>::uninit(); 64 * 1024];
        let mut reader = inotify::Reader::new(fd, &mut buffer);
        loop {
            let event = match reader.next() {
                Ok(event) => event,
                Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => break,
                // Nothing can be known of what happened: look at everything.
                Err(_) => {
                    touched.whole = true;
                    break;
                }
            };
            let flags = event.events();
            if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                touched.whole = true;
                continue;
            }
            let is_dir = flags.contains(ReadFlags::ISDIR);
            // A folder moved: the paths of the folders below it are stale.
            if flags.contains(ReadFlags::MOVE_SELF)
                || (is_dir && flags.contains(ReadFlags::MOVED_FROM))
            {
                touched.whole = true;
                continue;
            }
            if !flags.intersects(ReadFlags::CREATE | ReadFlags::MOVED_TO) {
                continue;
            }
            let (Some(folder), Some(name)) = (self.folders.get(&event.wd()), event.file_name())
            else {
                continue;
            };
            touched.folders.insert(folder.clone());
            if is_dir {
                touched.new.insert(join(folder, name.to_bytes()));
            }
        }
        touched
    }
}

/// An overlay run's watch on its project, and what it has hidden.
#[derive(Debug)]
pub struct LateFiles {
    project: PathBuf,
    watch: Watch,
    /// Everything hidden so far, the survey's included.
    hidden: BTreeSet<Vec<u8>>,
}

impl LateFiles {
    /// The watch the survey of `project` set up, and what it hid.
    pub fn new(project: &Path, watch: Watch, hidden: &[Vec<u8>]) -> LateFiles {
        LateFiles {
            project: project.to_path_buf(),
            watch,
            hidden: hidden.iter().cloned().collect(),
        }
    }

    /// Why the project is not watched, if it is not.
    pub fn blind(&self) -> Option<&str> {
        self.watch.blind()
    }

    /// What appeared in the project since the last check that the
    /// container must not see and is not hidden yet, relative to the
    /// project; from now on it counts as hidden (the caller hides it).
    /// `names` is made only when something appeared.
    pub fn check<'r>(
        &mut self,
        withhold: &Withhold<'_>,
        names: impl FnOnce() -> Result<NameCheck<'r>, String>,
    ) -> Result<Vec<Vec<u8>>, String> {
        let touched = self.watch.drain();
        if !touched.whole && touched.folders.is_empty() {
            return Ok(Vec::new());
        }
        self.walk(&touched, withhold, &mut names()?)
            .map_err(|e| e.to_string())
    }

    fn walk(
        &mut self,
        touched: &Touched,
        withhold: &Withhold<'_>,
        names: &mut NameCheck<'_>,
    ) -> io::Result<Vec<Vec<u8>>> {
        let mut found = Survey::default();
        let mut add = |more: Survey| found.hidden.extend(more.hidden);
        if touched.whole {
            // Watched again as it is walked (a moved folder by its new path).
            let watch = self.watch.fd.is_some().then_some(&mut self.watch);
            add(walk(
                &self.project,
                b"",
                Reach::Deep,
                withhold,
                names,
                watch,
            )?);
        } else {
            for folder in &touched.new {
                if under_any(touched.new.range(..folder.clone()), folder) {
                    continue;
                }
                let watch = Some(&mut self.watch);
                add(walk(
                    &self.project,
                    folder,
                    Reach::Deep,
                    withhold,
                    names,
                    watch,
                )?);
            }
            for folder in &touched.folders {
                add(walk(
                    &self.project,
                    folder,
                    Reach::Shallow,
                    withhold,
                    names,
                    None,
                )?);
            }
        }
        found.hidden.sort();
        let mut late = Vec::new();
        for path in found.hidden {
            if !under_any(&self.hidden, &path) {
                late.push(path.clone());
                self.hidden.insert(path);
            }
        }
        late.sort();
        late.dedup();
        Ok(late)
    }
}

#[cfg(test)]
mod tests;
