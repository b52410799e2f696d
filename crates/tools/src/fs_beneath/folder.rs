//! Whole-file replacement beneath the work root, for `write` and
//! `apply_patch`: a handle
//! of a file's folder (opened the same race-free way as files), in which new
//! content is staged as a temporary file and then renamed over the target,
//! and files are removed. Names passed here are single components, so
//! `renameat` and `unlinkat` act on the entry itself and never follow a link.

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Write as _};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

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
        let flags = libc::O_PATH | libc::O_DIRECTORY;
        open_beneath(std::os::fd::AsFd::as_fd(&root), folders, flags, 0, lookup)
            .map_err(classify)?
    };
    Ok((Folder { fd }, (*name).to_string()))
}

impl Folder {
    /// Writes `bytes` to a new hidden file in the folder with permission
    /// bits `mode` (the umask applies to [`NEW_FILE_MODE`] only); returns
    /// its name. The caller renames it into place or removes it.
    pub fn stage(&self, bytes: &[u8], mode: Option<u32>) -> io::Result<String> {
        let name = format!(".ah-patch-{:016x}.tmp", rand::random::<u64>());
        let c_name = CString::new(name.as_str())?;
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW;
        let fd = super::sys_openat(
            self.fd.as_raw_fd(),
            &c_name,
            flags,
            mode.unwrap_or(NEW_FILE_MODE),
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
        let (from, to_name) = (CString::new(from)?, CString::new(to_name)?);
        // SAFETY: both names are NUL-terminated; renameat only reads them.
        let rc = unsafe {
            libc::renameat(
                self.fd.as_raw_fd(),
                from.as_ptr(),
                to.fd.as_raw_fd(),
                to_name.as_ptr(),
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Removes the file `name` from this folder (never a folder).
    pub fn remove(&self, name: &str) -> io::Result<()> {
        let name = CString::new(name)?;
        // SAFETY: `name` is NUL-terminated; unlinkat only reads it.
        let rc = unsafe { libc::unlinkat(self.fd.as_raw_fd(), name.as_ptr(), 0) };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}
