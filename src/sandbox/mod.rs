//! Where the model's commands run and what happens to their effects: backends
//! (podman, none), the work copy of the project, shadow-git steps, the write
//! policy, the session patch, the host apply, artifacts, the run directory,
//! and work copies restored from an earlier run's step.

pub mod apply;
pub mod artifacts;
pub mod capture;
pub mod disk;
pub mod doctor;
pub mod egress;
pub mod image;
pub mod none;
pub mod outputs;
pub mod patch;
pub mod podman;
pub mod policy;
pub mod restore;
pub mod review;
pub mod run;
pub mod rundir;
pub mod safe_text;
pub mod shadow;
pub mod subpatch;
pub mod tree;
pub mod workspace;

use std::time::Duration;

use crate::tools::ExecOutput;

/// Which kind of backend runs the tools.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// Rootless podman container (the default).
    Podman,
    /// No sandbox: commands run on the host, in the work copy.
    None,
}

impl BackendKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Podman => "podman",
            BackendKind::None => "none",
        }
    }
}

/// Runs commands for one run, in the work directory (`/work`).
#[async_trait::async_trait]
pub trait Backend: Send + Sync {
    fn kind(&self) -> BackendKind;

    /// Runs `command` with `bash -c` in the work directory. On timeout the
    /// whole process group is killed and `timed_out` is set.
    async fn exec(&self, command: &str, timeout: Duration) -> std::io::Result<ExecOutput>;

    /// What the network proxy decided since the last call, oldest first
    /// (nothing for a backend without one).
    fn take_egress(&self) -> Vec<egress::EgressDecision> {
        Vec::new()
    }

    /// Stops and removes whatever the backend started. Safe to call twice.
    async fn shutdown(&self) -> std::io::Result<()>;
}

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
