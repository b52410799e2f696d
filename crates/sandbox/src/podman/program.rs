//! The podman program, and the folder every podman command ah runs starts
//! in. conmon, the monitor podman starts beside a container (`podman run`,
//! `restart`, `exec`), inherits podman's working directory, and podman
//! 4.3's conmon creates an empty file named `oom` there when the kernel's
//! OOM killer fires in the container. ah runs from inside the user's
//! repository, so podman must not: each [`Podman`] owns a private, empty
//! folder that its commands run in, removed with the last clone.
//!
//! A [`Podman`] may also speak to a podman on another machine
//! ([`Connection`]): each of its commands then carries `--remote` and the
//! connection, and everything it names (images, containers, volumes, paths
//! of a volume) is the remote engine's.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{PodmanError, find_podman};

/// The podman executable and the private folder its commands run in.
#[derive(Debug, Clone)]
pub struct Podman {
    exe: PathBuf,
    dir: Arc<tempfile::TempDir>,
    remote: Option<Connection>,
}

/// A podman engine on another machine, as podman's own remote client
/// reaches it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Connection {
    /// Podman's default connection (`podman system connection default`).
    Default,
    /// A connection of `podman system connection` (`--connection NAME`).
    Named(String),
    /// An engine's URL (`--url`, e.g. `ssh://user@host/run/user/1000/podman/podman.sock`),
    /// as `CONTAINER_HOST` gives it.
    Url(String),
}

impl Connection {
    /// The arguments that send a podman command to this engine.
    pub fn args(&self) -> Vec<&str> {
        match self {
            Connection::Default => vec!["--remote"],
            Connection::Named(name) => vec!["--remote", "--connection", name],
            Connection::Url(url) => vec!["--remote", "--url", url],
        }
    }

    /// The connection in words (its name, or its URL).
    pub fn name(&self) -> &str {
        match self {
            Connection::Default => "(podman's default connection)",
            Connection::Named(name) | Connection::Url(name) => name,
        }
    }

    /// The engine `--connection` names, else the one `CONTAINER_HOST`
    /// (`host`) gives, else podman's default connection.
    pub fn choose(named: Option<&str>, host: Option<&str>) -> Connection {
        match (named, host) {
            (Some(name), _) => Connection::Named(name.to_string()),
            (None, Some(url)) if !url.is_empty() => Connection::Url(url.to_string()),
            _ => Connection::Default,
        }
    }
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
            remote: None,
        })
    }

    /// This podman, speaking to the engine of `connection` instead of the
    /// local one.
    pub fn remote(mut self, connection: Connection) -> Podman {
        self.remote = Some(connection);
        self
    }

    /// The remote engine its commands go to (`None`: this machine's).
    pub fn connection(&self) -> Option<&Connection> {
        self.remote.as_ref()
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
        if let Some(remote) = &self.remote {
            cmd.args(remote.args());
        }
        cmd
    }

    /// [`Podman::command`] for code that cannot wait asynchronously.
    pub fn std_command(&self) -> std::process::Command {
        let mut cmd = std::process::Command::new(&self.exe);
        cmd.current_dir(self.dir.path());
        if let Some(remote) = &self.remote {
            cmd.args(remote.args());
        }
        cmd
    }
}
