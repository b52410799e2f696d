//! The agent's reading and writing of single paths of `/work`: a file's
//! bytes sent for a report (read without following a link, exactly the
//! size its entry said), and the host's changes written in place of
//! whatever is there.

use std::ffi::OsStr;
use std::fs::{self, File, Permissions};
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use super::super::frame::{Entry, EntryKind, Frame, FrameError};
use super::{Meta, entry};

/// Bytes of a file per data frame.
const CHUNK: usize = 32 * 1024;

/// Sends a file's entry and exactly `meta.size` bytes of it; false when
/// what was sent is not the file as it is now (it changed, or could not be
/// read: zeros stand in), so that the next scan sends it again.
pub(super) fn send_file(
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
pub(super) fn write(full: &Path, entry: &Entry, bytes: &[u8]) -> io::Result<()> {
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
