//! Folder handles for walking and rewriting a whole tree the model controls:
//! the shadow repo's scan, staging and undo, and time-travel restores.
//!
//! Every operation names one entry of an open folder, so nothing is
//! resolved by path: a folder is entered with `O_NOFOLLOW | O_DIRECTORY`
//! (a symlink or anything else in its place is refused, never followed),
//! entries are inspected with `AT_SYMLINK_NOFOLLOW`, removed with `unlinkat`
//! (which never follows the last component), and created with `O_EXCL |
//! O_NOFOLLOW`, `mkdirat` or `symlinkat`. A regular file is opened for
//! reading only after the entry itself was seen to be one (an `O_PATH`
//! handle is checked, then reopened through `/proc/self/fd`), so a FIFO,
//! socket or device is never opened, not even for an instant. Removal of a
//! folder goes depth first through handles, with a deadline.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::time::Instant;

use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, Stat};

/// What an entry is, links never followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Link,
    /// A FIFO, socket or device: never opened.
    Special,
}

impl Kind {
    fn of(file_type: FileType) -> Kind {
        match file_type {
            FileType::RegularFile => Kind::File,
            FileType::Directory => Kind::Dir,
            FileType::Symlink => Kind::Link,
            _ => Kind::Special,
        }
    }

    /// The kind recorded in `stat`'s mode.
    pub fn of_stat(stat: &Stat) -> Kind {
        Kind::of(FileType::from_raw_mode(stat.st_mode))
    }
}

/// An open folder of the tree.
#[derive(Debug)]
pub struct DirHandle {
    fd: OwnedFd,
}

fn cname(name: &[u8]) -> io::Result<CString> {
    CString::new(name).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in a name"))
}

/// Whether `e` says a folder's permissions were in the way.
fn denied(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM))
}

impl DirHandle {
    /// Opens the tree's root, a path of ah's own; its last component must
    /// be a folder, not a link to one.
    pub fn open_root(path: &Path) -> io::Result<DirHandle> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::open(path, flags, Mode::empty())?;
        Ok(DirHandle { fd })
    }

    /// Enters the folder `name`. Anything else there (a link to a folder
    /// included) is an error of kind `NotADirectory`.
    pub fn open_dir(&self, name: &[u8]) -> io::Result<DirHandle> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        match rustix::fs::openat(&self.fd, cname(name)?.as_c_str(), flags, Mode::empty()) {
            Ok(fd) => Ok(DirHandle { fd }),
            Err(rustix::io::Errno::LOOP) => Err(io::Error::from_raw_os_error(libc::ENOTDIR)),
            Err(e) => Err(e.into()),
        }
    }

    /// The folder's entries (without `.` and `..`) with their kinds, in the
    /// order the file system gives them.
    pub fn entries(&self) -> io::Result<Vec<(Vec<u8>, Kind)>> {
        let mut entries = Vec::new();
        for entry in Dir::read_from(&self.fd)? {
            let entry = entry?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let kind = match entry.file_type() {
                FileType::Unknown => Kind::of_stat(&self.stat(name)?),
                known => Kind::of(known),
            };
            entries.push((name.to_vec(), kind));
        }
        Ok(entries)
    }

    /// The entry's own stat data (a link's, not its target's).
    pub fn stat(&self, name: &[u8]) -> io::Result<Stat> {
        Ok(rustix::fs::statat(
            &self.fd,
            cname(name)?.as_c_str(),
            AtFlags::SYMLINK_NOFOLLOW,
        )?)
    }

    /// The kind of the entry `name`, or `None` when there is none.
    pub fn kind(&self, name: &[u8]) -> io::Result<Option<Kind>> {
        match self.stat(name) {
            Ok(stat) => Ok(Some(Kind::of_stat(&stat))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Opens the regular file `name` for reading, with its stat data taken
    /// from the open file. Anything else there is refused before it is
    /// opened (error kind `InvalidData`).
    pub fn open_regular(&self, name: &[u8]) -> io::Result<(File, Stat)> {
        let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let handle = rustix::fs::openat(&self.fd, cname(name)?.as_c_str(), flags, Mode::empty())?;
        let stat = rustix::fs::fstat(&handle)?;
        if Kind::of_stat(&stat) != Kind::File {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "not a regular file",
            ));
        }
        // Reopening the handle's own inode: no name is looked up again.
        let proc = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&handle));
        let fd = rustix::fs::open(
            proc.as_str(),
            OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let file = File::from(fd);
        let stat = rustix::fs::fstat(&file)?;
        Ok((file, stat))
    }

    /// The target of the link `name`, as bytes.
    pub fn read_link(&self, name: &[u8]) -> io::Result<Vec<u8>> {
        let target = rustix::fs::readlinkat(&self.fd, cname(name)?.as_c_str(), Vec::new())?;
        Ok(target.into_bytes())
    }

    /// Creates the folder `name` and enters it.
    pub fn make_dir(&self, name: &[u8]) -> io::Result<DirHandle> {
        let c = cname(name)?;
        self.retry_writable(|| rustix::fs::mkdirat(&self.fd, c.as_c_str(), Mode::from(0o755)))?;
        self.open_dir(name)
    }

    /// Creates the regular file `name`, which must not exist, for writing.
    pub fn create_file(&self, name: &[u8], mode: u32) -> io::Result<File> {
        let c = cname(name)?;
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = self.retry_writable(|| {
            rustix::fs::openat(&self.fd, c.as_c_str(), flags, Mode::from(mode))
        })?;
        let file = File::from(fd);
        // The umask may have cleared bits.
        rustix::fs::fchmod(&file, Mode::from(mode))?;
        Ok(file)
    }

    /// Creates the symbolic link `name` pointing at `target`.
    pub fn symlink(&self, target: &[u8], name: &[u8]) -> io::Result<()> {
        let (target, c) = (cname(target)?, cname(name)?);
        self.retry_writable(|| rustix::fs::symlinkat(target.as_c_str(), &self.fd, c.as_c_str()))
    }

    /// Removes the entry `name` whatever it is; a folder with everything in
    /// it, depth first, giving up at `deadline`. Nothing is followed.
    pub fn remove(&self, name: &[u8], deadline: Instant) -> io::Result<()> {
        let c = cname(name)?;
        match self.kind(name)? {
            None => Ok(()),
            Some(Kind::Dir) => {
                let inner = self.open_dir(name)?;
                inner.empty(deadline)?;
                self.retry_writable(|| {
                    rustix::fs::unlinkat(&self.fd, c.as_c_str(), AtFlags::REMOVEDIR)
                })
            }
            Some(_) => self
                .retry_writable(|| rustix::fs::unlinkat(&self.fd, c.as_c_str(), AtFlags::empty())),
        }
    }

    /// Removes the folder `name` if it is empty; anything else is left.
    pub fn remove_if_empty(&self, name: &[u8]) -> io::Result<()> {
        let c = cname(name)?;
        let removed = self
            .retry_writable(|| rustix::fs::unlinkat(&self.fd, c.as_c_str(), AtFlags::REMOVEDIR));
        match removed {
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ENOTEMPTY | libc::ENOENT | libc::ENOTDIR)
                ) =>
            {
                Ok(())
            }
            other => other,
        }
    }

    /// Removes everything in this folder, depth first, with an explicit
    /// stack (no recursion, so depth cannot exhaust the host's stack).
    fn empty(self, deadline: Instant) -> io::Result<()> {
        // Each level: the folder and its entries not yet removed.
        let mut stack = vec![(self, Vec::<(Vec<u8>, Kind)>::new(), false)];
        while let Some((dir, pending, listed)) = stack.last_mut() {
            if Instant::now() > deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "removing a folder took too long",
                ));
            }
            if !*listed {
                dir.make_writable()?;
                *pending = dir.entries()?;
                *listed = true;
            }
            let Some((name, kind)) = pending.pop() else {
                stack.pop();
                continue;
            };
            let c = cname(&name)?;
            if kind == Kind::Dir {
                let inner = dir.open_dir(&name)?;
                // Re-listed after the inner folder is emptied: the entry is
                // put back so the parent removes it then.
                pending.push((name, Kind::Special));
                stack.push((inner, Vec::new(), false));
                continue;
            }
            match rustix::fs::unlinkat(&dir.fd, c.as_c_str(), AtFlags::empty()) {
                Err(rustix::io::Errno::ISDIR) => {
                    rustix::fs::unlinkat(&dir.fd, c.as_c_str(), AtFlags::REMOVEDIR)?
                }
                Err(rustix::io::Errno::NOENT) => {}
                other => other?,
            }
        }
        Ok(())
    }

    /// Gives the owner read, write and search access to this folder when a
    /// step took it away (`chmod 555`), so its entries can be changed.
    pub fn make_writable(&self) -> io::Result<()> {
        let stat = rustix::fs::fstat(&self.fd)?;
        let mode = stat.st_mode & 0o7777;
        if mode & 0o700 != 0o700 {
            rustix::fs::fchmod(&self.fd, Mode::from(mode | 0o700))?;
        }
        Ok(())
    }

    /// Runs `op`; when the folder's permissions refused it, makes the
    /// folder writable and runs it once more.
    fn retry_writable<T>(&self, op: impl Fn() -> rustix::io::Result<T>) -> io::Result<T> {
        match op() {
            Err(e) if denied(&e.into()) => {
                self.make_writable()?;
                Ok(op()?)
            }
            other => Ok(other?),
        }
    }
}

impl AsFd for DirHandle {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests;
