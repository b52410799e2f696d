//! Where the model's commands run: the backends (rootless podman, or none:
//! the host, in the work copy) and the start of one in the background, the
//! command channel into the container, the sandbox image and its build, the
//! checks of `ah doctor`, the egress proxy, and the bounded capture of a
//! command's output and of the run's disk use. What the commands change is
//! recorded one layer up (`ah-record`).

#![forbid(unsafe_code)]

pub mod capture;
pub mod channel;
pub mod cleanup;
pub mod disk;
pub mod doctor;
pub mod egress;
pub mod image;
pub mod limits;
mod merged;
pub mod none;
pub mod podman;
pub mod starting;

use std::path::PathBuf;
use std::time::Duration;

use ah_tools::ExecOutput;

/// Which kind of backend (engine) runs the tools.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BackendKind {
    /// Rootless podman container (the default).
    #[default]
    Podman,
    /// A podman container on another machine, through podman's remote
    /// client (`podman::remote`).
    PodmanRemote,
    /// No sandbox: commands run on the host, in the work copy.
    None,
}

impl BackendKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Podman => "podman",
            BackendKind::PodmanRemote => "podman-remote",
            BackendKind::None => "none",
        }
    }

    /// Whether commands run in a podman container (here or remote).
    pub fn is_podman(self) -> bool {
        self != BackendKind::None
    }
}

/// What a run sent to a remote engine and got back, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Traffic {
    /// At the start: the baseline and the tools, where the engine lacked
    /// them (nothing when it had them).
    pub start: u64,
    /// The steps' changes of files, both ways.
    pub steps: u64,
}

/// A long-lived program [`Backend::spawn`] starts.
#[derive(Debug, Clone, Copy)]
pub struct Program<'a> {
    pub command: &'a str,
    pub args: &'a [String],
    /// Added to the sandbox's environment.
    pub env: &'a [(String, String)],
}

/// A program [`Backend::spawn`] started: the host's end of it. Dropping it
/// kills what runs on the host; what runs in a container ends at the next
/// sweep or with the container.
pub struct Spawned {
    pub child: tokio::process::Child,
    /// The backend's [`Backend::sweeps`] when it started: once they grew,
    /// the program has ended.
    pub sweeps: u64,
    /// What must live until the program has started (the file podman
    /// reads its environment from).
    start_files: Option<tempfile::TempDir>,
}

impl Spawned {
    pub fn new(child: tokio::process::Child, sweeps: u64) -> Spawned {
        Spawned {
            child,
            sweeps,
            start_files: None,
        }
    }

    /// Removes what the program needed only to start (call it once the
    /// program has answered: it has started by then).
    pub fn started(&mut self) {
        self.start_files = None;
    }
}

/// The host's view of `/work` (see [`Backend::view`]): a folder on the
/// host that holds what the sandbox's `/work` holds, and where in it a step
/// may have changed something.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    /// The folder. The file tools act on it, the step's record reads it.
    pub root: PathBuf,
    /// Where the sandbox's changes can be.
    pub changed: Changed,
}

/// Where in a [`View`] the sandbox's commands may have changed something.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Changed {
    /// Anywhere: the step's record walks the whole view.
    Anywhere,
    /// Only in the folders this overlay upper folder holds (the project
    /// itself is the read-only lower layer).
    Within(PathBuf),
}

/// A sandbox backend: runs the commands of one run in `/work`, and is how
/// the host reaches their files. The contract assumes nothing of where the
/// sandbox runs: the host works on its *view* of `/work` ([`Backend::view`]),
/// which the backend brings up to date with what commands did, and hands
/// what the host changed there back to the sandbox ([`Backend::push`]).
/// The local backends' view is the sandbox's own files, so both are free
/// there; a backend on another machine keeps a mirror. ARCHITECTURE.md,
/// "Adding a sandbox backend", says what every backend must guarantee.
#[async_trait::async_trait]
pub trait Backend: Send + Sync {
    fn kind(&self) -> BackendKind;

    /// Runs `command` with `bash -c` in the work directory. On timeout the
    /// whole process group is killed and `timed_out` is set.
    async fn exec(&self, command: &str, timeout: Duration) -> std::io::Result<ExecOutput>;

    /// The host's view of `/work`, up to date with every command so far:
    /// the work copy, or for an overlay `/work` its merged view (see
    /// `merged`), valid until the next command runs.
    async fn view(&self) -> std::io::Result<View>;

    /// Makes the sandbox see what the host changed in its view since the
    /// last [`Backend::view`] (`paths`, relative to `/work`: a file tool's
    /// write, an undo, a withheld file hidden; `None` when anything may have
    /// changed), before anything runs there again. A backend whose view is
    /// the sandbox's own files has nothing to send.
    async fn push(&self, paths: Option<&[String]>) -> std::io::Result<()> {
        let _ = paths;
        Ok(())
    }

    /// Starts `program` for the rest of the run (an MCP server): in the
    /// sandbox, in `/work`, with `program.env` added to the sandbox's
    /// environment and its three standard streams piped to the host. It
    /// ends with the sandbox, and at every sweep (see [`Backend::sweeps`]).
    async fn spawn(&self, program: &Program<'_>) -> std::io::Result<Spawned> {
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            format!("this backend cannot start {}", program.command),
        ))
    }

    /// How many times, so far, every process in the sandbox was ended (a
    /// podman backend does it around each command, so that nothing a
    /// command started goes on changing `/work`): a program
    /// [`Backend::spawn`] started before the last sweep has ended with it.
    fn sweeps(&self) -> u64 {
        0
    }

    /// Bytes that went between this machine and a sandbox on another one
    /// (`None`: the sandbox is here).
    fn traffic(&self) -> Option<Traffic> {
        None
    }

    /// What the network proxy decided since the last call, oldest first
    /// (nothing for a backend without one).
    fn take_egress(&self) -> Vec<egress::EgressDecision> {
        Vec::new()
    }

    /// Stops and removes whatever the backend started. Safe to call twice.
    async fn shutdown(&self) -> std::io::Result<()>;

    /// Gives the sandbox up without removing it here, for a run's end that
    /// does not wait for it: after this call the backend removes nothing
    /// itself (not even when dropped), and the returned remains say what a
    /// cleanup elsewhere must remove (see [`cleanup`]). A start still under
    /// way is abandoned, not waited for. `None`: the backend cannot hand
    /// its sandbox off, and [`Backend::shutdown`] must remove it.
    async fn hand_off(&self) -> Option<cleanup::Remains> {
        None
    }
}
