//! Where the model's commands run: the backends (rootless podman, or none:
//! the host, in the work copy) and the start of one in the background, the
//! command channel into the container, the sandbox image and its build, the
//! checks of `ah doctor`, the egress proxy, and the bounded capture of a
//! command's output and of the run's disk use. What the commands change is
//! recorded one layer up (`ah-record`).

pub mod capture;
pub mod channel;
pub mod disk;
pub mod doctor;
pub mod egress;
pub mod image;
pub mod none;
pub mod podman;
pub mod starting;

use std::time::Duration;

use ah_tools::ExecOutput;

/// Which kind of backend runs the tools.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// Rootless podman container (the default).
    #[default]
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

    /// Where the host reaches the files commands see at `/work`: the work
    /// copy, or for an overlay `/work` its merged view (see
    /// `podman::merged`). Valid until the next command runs.
    async fn work_root(&self) -> std::io::Result<std::path::PathBuf>;

    /// What the network proxy decided since the last call, oldest first
    /// (nothing for a backend without one).
    fn take_egress(&self) -> Vec<egress::EgressDecision> {
        Vec::new()
    }

    /// Stops and removes whatever the backend started. Safe to call twice.
    async fn shutdown(&self) -> std::io::Result<()>;
}
