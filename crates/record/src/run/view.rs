//! The tools' view of a run ([`Exec`]): the work root, the backend that runs
//! commands, the write policy, and where a step's whole output is kept.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::super::policy::Policy;
use ah_sandbox::Backend;
use ah_tools::{Exec, ExecOutput, OutputLimits};

/// The tools' view of a run: its work root, its backend and its policy.
pub(super) struct ExecView<'a> {
    pub(super) root: PathBuf,
    pub(super) backend: &'a dyn Backend,
    pub(super) policy: &'a Policy,
    pub(super) limits: OutputLimits,
    pub(super) bash_timeout: u64,
    /// The step's `.out` file, where the whole output is kept.
    pub(super) full_output: PathBuf,
}

#[async_trait::async_trait]
impl Exec for ExecView<'_> {
    fn root(&self) -> &Path {
        &self.root
    }

    async fn run(&self, command: &str, timeout: Duration) -> std::io::Result<ExecOutput> {
        self.backend.exec(command, timeout).await
    }

    fn check_write(&self, rel_path: &str) -> Result<(), String> {
        self.policy.check_path(rel_path).map_err(|v| v.to_string())
    }

    fn limits(&self) -> OutputLimits {
        self.limits
    }

    fn bash_timeout(&self) -> u64 {
        self.bash_timeout
    }

    fn full_output(&self) -> Option<String> {
        Some(self.full_output.display().to_string())
    }
}
