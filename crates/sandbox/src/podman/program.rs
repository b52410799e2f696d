//! The podman program, and the folder every podman command ah runs starts
//! in. conmon, the monitor podman starts beside a container (`podman run`,
//! `restart`, `exec`), inherits podman's working directory, and podman
//! 4.3's conmon creates an empty file named `oom` there when the kernel's
//! OOM killer fires in the container. ah runs from inside the user's
//! repository, so podman must not: each [`Podman`] owns a private, empty
//! folder that its commands run in, removed with the last clone.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{PodmanError, find_podman};

/// The podman executable and the private folder its commands run in.
#[derive(Debug, Clone)]
pub struct Podman {
    exe: PathBuf,
    dir: Arc<tempfile::TempDir>,
}

impl Podman {
    /// The podman on this host ([`find_podman`]).
    pub fn find() -> Result<Podman, PodmanError> {
        Podman::at(find_podman()?)
    }

    /// The podman at `exe`, with a new private folder to run in.
    pub fn at(exe: PathBuf) -> Result<Podman, PodmanError> {
        let dir = tempfile::Builder::new()
            .prefix("ah-podman-")
            .tempdir()
            .map_err(|source| PodmanError::Io {
                what: "create a folder for podman to run in",
                source,
            })?;
        Ok(Podman {
            exe,
            dir: Arc::new(dir),
        })
    }

    /// The executable.
    pub fn path(&self) -> &Path {
        &self.exe
    }

    /// The folder its commands run in (where conmon leaves `oom`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `podman`, to be given arguments, in the private folder.
    pub fn command(&self) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(&self.exe);
        cmd.current_dir(self.dir.path());
        cmd
    }

    /// [`Podman::command`] for code that cannot wait asynchronously.
    pub fn std_command(&self) -> std::process::Command {
        let mut cmd = std::process::Command::new(&self.exe);
        cmd.current_dir(self.dir.path());
        cmd
    }
}
