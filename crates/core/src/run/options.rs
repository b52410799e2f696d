//! What a front-end asks of a run, without any argument parser: the task,
//! the project and session, and every setting the command line can give.
//! Settings left unset (or, for those with a default, not in
//! [`OnCommandLine`]) take their configured value when the run settles them (see
//! `config::fill`).

use std::path::PathBuf;

use crate::config::Config;
pub use ah_record::rundir::ReviewMode;
pub use ah_sandbox::BackendKind;
pub use ah_sandbox::cleanup::Cleanup;
pub use ah_sandbox::disk::parse_size;
pub use ah_sandbox::egress::NetworkMode;
pub use ah_tools::OutputLimits;

/// One run's options. `prompt` holds the words of the task (a leading
/// `@N` forks at message N; see `run::begin`).
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    pub prompt: Vec<String>,
    pub project: Option<PathBuf>,
    /// `-c KEY=VALUE` overrides of the configuration.
    pub overrides: Vec<String>,
    /// The configuration the run uses, filled in when the run settles.
    pub config: Config,
    pub backend: BackendKind,
    pub image: Option<String>,
    pub sandbox: SandboxOptions,
    pub review: Option<ReviewMode>,
    pub skills: Vec<String>,
    pub model: Option<String>,
    pub new_session: bool,
    pub session: SessionChoice,
    pub steer: Option<String>,
    pub followup: Option<String>,
    /// A prompt queued for another ah is followed to its answer.
    pub wait: bool,
    pub no_restore: bool,
    /// Events go out as JSON lines: nobody can be asked anything.
    pub json: bool,
    pub max_tools: Option<u32>,
    pub bash_timeout: Option<u64>,
    pub loop_window: usize,
    pub compact_reserve: u64,
    pub no_commit: bool,
    pub policy: Option<PathBuf>,
    pub allow: Vec<String>,
    pub deny: Vec<String>,
    /// Output limits per tool, in the order given (a later one wins).
    pub output_limits: Vec<(OutputLimit, usize)>,
    /// MiB.
    pub max_artifact_size: u64,
    /// Which settings with a default the user gave explicitly.
    pub given: OnCommandLine,
}

/// The sandbox's settings.
#[derive(Debug, Clone, Default)]
pub struct SandboxOptions {
    pub runtime: Option<String>,
    pub memory: String,
    pub disk_budget: Option<u64>,
    pub pids_limit: u32,
    /// Refuse to run when a limit cannot be enforced by a cgroup.
    pub strict_limits: bool,
    pub ulimits: Vec<(UlimitKind, u64)>,
    pub network: Option<NetworkMode>,
    pub allow_hosts: Vec<String>,
    pub env: Vec<String>,
    /// How the sandbox is removed at the run's end (configuration only).
    pub cleanup: Cleanup,
    /// The remote engine's connection (`--engine podman-remote`): a name
    /// of `podman system connection`; unset: `CONTAINER_HOST`, else
    /// podman's default connection.
    pub connection: Option<String>,
}

/// Which of the settings that have a default value were given by the user
/// (on the command line): only those win over the configuration.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OnCommandLine {
    pub backend: bool,
    /// `--connection`.
    pub connection: bool,
    pub loop_window: bool,
    pub compact_reserve: bool,
    pub max_artifact_size: bool,
    pub memory: bool,
    pub pids_limit: bool,
}

/// The flags that choose a session: `--db PATH`, `--name NAME`,
/// `-S PREFIX`; none of them means the project's most recent session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionChoice {
    pub db: Option<PathBuf>,
    pub name: Option<String>,
    pub session: Option<String>,
}

/// A tool whose output has a limit (`--output-limit TOOL=N`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputLimit {
    Read,
    Bash,
    BashLines,
    Edit,
    Write,
}

/// A resource limit of the sandbox (`--ulimit KIND=N`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UlimitKind {
    Nofile,
    Nproc,
}
