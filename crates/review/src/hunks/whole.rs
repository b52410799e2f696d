//! A file section taken as one unit ([`Whole`]): what its header lines
//! say it does, and the one line a person is shown for it.

use ah_record::patch::{MODE_SUBMODULE, MODE_SYMLINK};
use ah_record::safe_text::name_safe;

/// What a file section taken whole does, from its header lines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Whole {
    /// `rename from`, `rename to` (unquoted, not escaped).
    pub renamed: Option<(String, String)>,
    /// `copy from`, `copy to`.
    pub copied: Option<(String, String)>,
    /// The section has `old mode` / `new mode` lines.
    pub mode_change: bool,
    /// Git's modes of each side, where a header line gives them.
    pub old_mode: Option<u32>,
    pub new_mode: Option<u32>,
    pub created: bool,
    pub deleted: bool,
    pub binary: bool,
    /// Text lines added and removed by its hunks.
    pub added: u64,
    pub removed: u64,
}

impl Whole {
    pub(super) fn has_mode(&self, mode: u32) -> bool {
        self.old_mode == Some(mode) || self.new_mode == Some(mode)
    }

    /// One line saying what it does, file names escaped for a terminal:
    /// `new file (+3 −0)`, `rename a → b`, `mode 100644 → 100755`,
    /// `binary file`, `deleted symlink`, …
    pub fn describe(&self) -> String {
        let kind = if self.has_mode(MODE_SYMLINK) {
            "symlink"
        } else if self.has_mode(MODE_SUBMODULE) {
            "submodule"
        } else if self.binary {
            "binary file"
        } else {
            "file"
        };
        let two = |verb: &str, (from, to): &(String, String)| {
            format!("{verb} {} → {}", name_safe(from), name_safe(to))
        };
        let mode = |mode: Option<u32>| mode.map_or("?".to_string(), |m| format!("{m:o}"));
        let what = if self.created {
            format!("new {kind}")
        } else if self.deleted {
            format!("deleted {kind}")
        } else if let Some(names) = &self.renamed {
            two("rename", names)
        } else if let Some(names) = &self.copied {
            two("copy", names)
        } else if self.mode_change {
            format!("mode {} → {}", mode(self.old_mode), mode(self.new_mode))
        } else if kind == "file" {
            "file changed".to_string()
        } else {
            format!("{kind} changed")
        };
        if self.added + self.removed == 0 {
            what
        } else {
            format!("{what} (+{} −{})", self.added, self.removed)
        }
    }
}
