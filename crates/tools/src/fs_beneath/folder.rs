//! Whole-file replacement beneath the work root, for `write` and
//! `apply_patch`: a handle
//! of a file's folder (opened the same race-free way as files), in which new
//! content is staged as a temporary file and then renamed over the target,
//! and files are removed. Names passed here are single components, so
//! `renameat` and `unlinkat` act on the entry itself and never follow a link.

use std::fs::File;
use std::io::{self, Write as _};
use std::os::fd::{AsFd as _, OwnedFd};
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use rustix::fs::{AtFlags, Mode, OFlags};

use super::{BeneathError, classify, lookup, make_folders, open_beneath, open_root, parts};

/// Mode of a new file before the umask, as `write` creates it.
pub const NEW_FILE_MODE: u32 = 0o666;

/// An open folder beneath the root.
#[derive(Debug)]
pub struct Folder {
    fd: OwnedFd,
}

/// The folder holding `rel` (a file path from `path::resolve`) and the
/// file's name in it. With `create`, missing folders are made one by one;
/// without, a missing folder is [`BeneathError::NotFound`].
pub fn folder_of(root: &Path, rel: &str, create: bool) -> Result<(Folder, String), BeneathError> {
    let root = open_root(root)?;
    let lookup = lookup(&root);
    let parts = parts(rel);
    let Some((name, folders)) = parts.split_last() else {
        return Err(BeneathError::Directory);
    };
    let fd = if create {
        make_folders(&root, folders, lookup)?
    } else {
        let flags = OFlags::PATH | OFlags::DIRECTORY;
        open_beneath(root.as_fd(), folders, flags, Mode::empty(), lookup).map_err(classify)?
    };
    Ok((Folder { fd }, (*name).to_string()))
}

impl Folder {
    /// Writes `bytes` to a new hidden file in the folder with permission
    /// bits `mode` (the umask applies to [`NEW_FILE_MODE`] only); returns
    /// its name. The caller renames it into place or removes it.
    pub fn stage(&self, bytes: &[u8], mode: Option<u32>) -> io::Result<String> {
        let name = format!(".ah-patch-{:016x}.tmp", rand::random::<u64>());
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW;
        let fd = super::sys_openat(
            self.fd.as_fd(),
            name.as_str(),
            flags,
            Mode::from_raw_mode(mode.unwrap_or(NEW_FILE_MODE)),
        )?;
        let mut file = File::from(fd);
        let written = (|| {
            file.write_all(bytes)?;
            if let Some(mode) = mode {
                // Exactly the old file's bits, whatever the umask.
                file.set_permissions(std::fs::Permissions::from_mode(mode))?;
            }
            file.flush()
        })();
        if let Err(e) = written {
            let _ = self.remove(&name);
            return Err(e);
        }
        Ok(name)
    }

    /// Renames `from` to `to` in this folder, replacing `to`.
    pub fn rename_into(&self, from: &str, to: &Folder, to_name: &str) -> io::Result<()> {
        Ok(rustix::fs::renameat(&self.fd, from, &to.fd, to_name)?)
    }

    /// Removes the file `name` from this folder (never a folder).
    pub fn remove(&self, name: &str) -> io::Result<()> {
        Ok(rustix::fs::unlinkat(&self.fd, name, AtFlags::empty())?)
    }
}
