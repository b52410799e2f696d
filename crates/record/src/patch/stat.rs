//! One file of a patch as the patch builder counts it ([`FileStat`]), and
//! git's file modes it is described with.

use serde::{Deserialize, Serialize};

/// Git's mode of a regular file.
pub const MODE_FILE: u32 = 0o100644;
/// Git's mode of an executable file.
pub const MODE_EXECUTABLE: u32 = 0o100755;
/// Git's mode of a symbolic link.
pub const MODE_SYMLINK: u32 = 0o120000;
/// Git's mode of a submodule entry (a gitlink: a commit of another repo).
pub const MODE_SUBMODULE: u32 = 0o160000;

/// Git's object-type bits of a mode (`S_IFMT`).
const TYPE_BITS: u32 = 0o170000;
/// The type bits of a blob: a regular file, executable or not.
const TYPE_REGULAR: u32 = 0o100000;

/// One file of a patch, as the patch builder counts it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileStat {
    /// Path relative to the project root (the new path of a rename).
    pub path: String,
    /// Lines added (0 for a binary file).
    pub added: u64,
    /// Lines removed (0 for a binary file).
    pub removed: u64,
    pub binary: bool,
    /// Git's mode of the old side ([`MODE_FILE`], [`MODE_EXECUTABLE`],
    /// [`MODE_SYMLINK`], [`MODE_SUBMODULE`]); 0 when the file is new.
    pub old_mode: u32,
    /// Git's mode of the new side; 0 when the file was deleted.
    pub new_mode: u32,
    /// Bytes of this file's section of the patch text, headers included
    /// (0 in records written before it was counted).
    #[serde(default)]
    pub bytes: u64,
}

impl FileStat {
    /// Either side is a symbolic link (a link added, changed or removed, or
    /// a file replaced by one).
    pub fn is_symlink(&self) -> bool {
        self.old_mode == MODE_SYMLINK || self.new_mode == MODE_SYMLINK
    }

    /// Either side is a submodule entry.
    pub fn is_submodule(&self) -> bool {
        self.old_mode == MODE_SUBMODULE || self.new_mode == MODE_SUBMODULE
    }

    /// `(old, new)` when a regular file stays one but its mode changes
    /// (typically it becomes executable, or stops being so).
    pub fn mode_change(&self) -> Option<(u32, u32)> {
        let regular = |mode: u32| mode & TYPE_BITS == TYPE_REGULAR;
        (regular(self.old_mode) && regular(self.new_mode) && self.old_mode != self.new_mode)
            .then_some((self.old_mode, self.new_mode))
    }

    /// The patch creates this file with the executable bit set.
    pub fn is_new_executable(&self) -> bool {
        self.old_mode == 0 && self.new_mode == MODE_EXECUTABLE
    }
}
