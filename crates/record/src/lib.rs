//! What the model's commands change, recorded: the work copy of the
//! project and its bounded walk, shadow-git steps, the write and read
//! policy, the session patch and the build outputs it leaves out, the run
//! directory and its artifacts, and work copies restored from an earlier
//! run's step. [`run::Run`] ties them to a backend for one run.

#![forbid(unsafe_code)]

pub mod artifacts;
pub mod outputs;
pub mod overlay;
pub mod patch;
pub mod policy;
pub mod restore;
pub mod run;
pub mod rundir;
pub mod safe_text;
pub mod shadow;
pub mod snapshot;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod tree;
pub mod workspace;

/// One path a step changed, relative to the work root. Renames appear as a
/// deletion of the old path and an addition of the new one, so a policy check
/// sees both sides.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Change {
    pub path: String,
    pub kind: ChangeKind,
    /// The new side is a symbolic link (its target must stay inside `/work`).
    pub symlink: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    Added,
    /// Content, file mode, or file type changed.
    Modified,
    Deleted,
}
