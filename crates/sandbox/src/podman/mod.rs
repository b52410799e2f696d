//! The podman backend: one container per run, started once and closed like a
//! box (no network unless asked, no capabilities, read-only root, nothing of
//! the host but the work copy, an init no command can trace, an environment
//! built from nothing); commands enter it through one long-lived agent
//! (`channel`), else one `podman exec` each (`exec`), and nothing a command
//! starts outlives it. See `args` for the flags, `env` for the environment,
//! `init` for the execute-only copies of the init and the agent, `make` for
//! the start that opens the channel with the container, `commands`,
//! `channel` and `exec` for running a command and ending everything it
//! started, `oom` for telling a command that the memory limit was hit,
//! `network` for the egress proxy's side, `stale` for cleaning up after
//! crashed runs, `program` for where podman itself runs, `rootfs` for the
//! root file system where podman's storage would copy the image per run.

mod args;
mod channel;
mod commands;
mod env;
mod exec;
mod init;
mod make;
mod network;
mod oom;
pub(crate) use oom::parse_kills;
mod program;
pub mod remote;
pub mod rootfs;
mod serve;
mod side_by_side;
mod stale;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::Mutex;

use super::cleanup::{Makers, Remains};
use super::egress::{Allowlist, EgressDecision, NetworkMode};
use super::limits::{Observed, StandIns};
use super::{Backend, BackendKind, Changed, View};
use ah_tools::ExecOutput;
use commands::without_channel;

pub use args::{
    AGENT_PATH, AH_BIN, CONTAINER_PATH, EGRESS_DIR, HostLimits, INIT_PATH, Runtime, SANDBOX_UID,
    SHARED_AGENT_PATH, SHARED_DIR, SHARED_INIT_PATH, Ulimits, find_init, find_tool, rootless,
};
pub use env::{Withheld, container_env, is_secret_name, refusal as env_refusal};
pub use exec::OUTPUT_CAP;
pub use program::{Connection, Podman};

/// Whether `path` can be a podman volume's source (an overlay's folders
/// included).
pub fn can_mount(path: &Path) -> bool {
    mountable(path).is_ok()
}
pub(crate) use stale::container_exists;
pub use stale::{Owner, RUN_LABEL};

/// The image runs use unless told otherwise.
pub const DEFAULT_IMAGE: &str = "localhost/ah-sandbox:latest";

/// What went wrong starting or driving the container.
#[derive(Debug, thiserror::Error)]
pub enum PodmanError {
    #[error(
        "podman not found: install podman (apt-get install podman runc uidmap) \
         or use --backend none to run tools unsandboxed on a copy"
    )]
    NotFound,
    #[error(
        "catatonit not found: the sandbox runs it as its init (apt-get install catatonit), \
         or use --backend none to run tools unsandboxed on a copy"
    )]
    InitMissing,
    #[error("the sandbox image {image} is missing: run 'ah image build'")]
    ImageMissing { image: String },
    #[error("run id {0:?} is not usable in a container name: use letters, digits, '-', '_' or '.'")]
    BadRunId(String),
    #[error("{path} cannot be mounted into the container: {reason}")]
    BadPath { path: PathBuf, reason: &'static str },
    #[error("could not {what}: {source}")]
    Io {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("podman {what} failed: {stderr}; run 'ah doctor' to see what is wrong")]
    Command { what: &'static str, stderr: String },
    #[error("could not start the sandbox container: {stderr}{hint}")]
    StartFailed { stderr: String, hint: String },
    #[error(
        "--network full needs a user-mode network stack: install slirp4netns \
         (apt-get install slirp4netns) or passt, or use --network proxy"
    )]
    NoUserNetwork,
    #[error("{0}")]
    Remote(String),
    #[error(
        "the sandbox image {image} is missing on the remote engine {connection}: run \
         'ah image build --engine podman-remote --connection {connection}'"
    )]
    RemoteImageMissing { image: String, connection: String },
}

/// How to make a run's container.
#[derive(Debug, Clone)]
pub struct PodmanOptions {
    /// Names the container (`ah-<run_id>`) and labels it.
    pub run_id: String,
    /// The host work copy, mounted at `/work`: the only host folder the
    /// container sees (the project itself is not mounted).
    pub work_dir: PathBuf,
    pub image: String,
    pub runtime: Runtime,
    pub pids_limit: u32,
    /// A podman memory size, e.g. `4g`.
    pub memory: String,
    /// Clamped again to the host's hard limits at start.
    pub ulimits: Ulimits,
    /// Per-process limits that stand in for cgroup limits podman would
    /// ignore here (see `limits::plan`).
    pub stand_ins: StandIns,
    /// Mount `/work` as an overlay whose lower layer is `work_dir` (the
    /// project, never written) and whose changes go to these folders.
    pub overlay: Option<OverlayDirs>,
    pub network: NetworkMode,
    /// What the proxy may reach ([`NetworkMode::Proxy`]).
    pub allow: Allowlist,
    /// Where the proxy logs its decisions (`network.log` of the run).
    pub network_log: PathBuf,
    /// The whole environment of the container ([`container_env`]).
    pub env: Vec<(String, String)>,
    /// The `ah` executable that runs the command channel's agent and hands
    /// the proxy its port inside the container (default: the running
    /// executable; the agent runs only when that is `ah`).
    pub ah_executable: Option<PathBuf>,
    /// Where the start puts its `podman run` while it runs, for a cleanup
    /// of the start abandoned meanwhile to wait for.
    pub makers: Makers,
    /// Start the container from the image in podman's storage even where
    /// that copies the whole image (`vfs`), instead of on the cached copy
    /// of its root file system (`rootfs`): the old way, for comparisons.
    pub from_image: bool,
    /// Start it on a remote engine instead (`work_dir` and `overlay` are
    /// then not used: the baseline travels, see `remote`).
    pub remote: Option<remote::RemoteOptions>,
}

impl PodmanOptions {
    /// Defaults: the standard image, runtime chosen automatically, 1024
    /// processes, 4 GiB of memory, limits at or below the caller's, no
    /// network, only the fixed environment, `network.log` beside `work_dir`.
    pub fn new(run_id: &str, work_dir: &Path) -> PodmanOptions {
        PodmanOptions {
            run_id: run_id.to_string(),
            work_dir: work_dir.to_path_buf(),
            image: DEFAULT_IMAGE.to_string(),
            runtime: Runtime::Auto,
            pids_limit: 1024,
            memory: "4g".to_string(),
            ulimits: Ulimits::for_host(),
            stand_ins: StandIns::default(),
            overlay: None,
            network: NetworkMode::None,
            allow: Allowlist::default(),
            network_log: work_dir.with_file_name("network.log"),
            env: container_env(NetworkMode::None, &[], &|_| None).0,
            ah_executable: None,
            makers: Makers::default(),
            from_image: false,
            remote: None,
        }
    }

    /// What a start with these options may leave on the host: its
    /// container and an overlay's scratch folder (see
    /// [`Backend::hand_off`]).
    pub fn remains(&self) -> Remains {
        Remains {
            makers: Vec::new(),
            containers: vec![container_name(&self.run_id)],
            folders: self.overlay.iter().map(|dirs| dirs.work.clone()).collect(),
            lease: None,
            engine: self
                .remote
                .as_ref()
                .map(|remote| Box::new(remote.connection.clone())),
        }
    }
}

/// The container of run `run_id`.
fn container_name(run_id: &str) -> String {
    format!("ah-{run_id}")
}

/// Refuses a run id a container's name cannot carry.
fn check_run_id(run_id: &str) -> Result<(), PodmanError> {
    let fits = !run_id.is_empty()
        && run_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    match fits {
        true => Ok(()),
        false => Err(PodmanError::BadRunId(run_id.to_string())),
    }
}

/// Where the agent is in a local container.
const LOCAL_AGENT: channel::AgentAt = channel::AgentAt {
    path: AGENT_PATH,
    changes: false,
};

/// Creates and starts the container `spec` describes (`podman run -d`),
/// telling `makers` about the `podman run` while it works; a failed start
/// leaves no container.
async fn create(
    podman: &Podman,
    spec: &args::RunSpec<'_>,
    makers: &Makers,
) -> Result<(), PodmanError> {
    let io = |source| PodmanError::Io {
        what: "run podman run",
        source,
    };
    let making = podman
        .command()
        .args(args::run_args(spec))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(io)?;
    if let Some(pid) = making.id() {
        makers.add(pid);
    }
    let output = making.wait_with_output().await.map_err(io)?;
    if output.status.success() {
        return Ok(());
    }
    // A half-created container must not outlive the failure.
    let _ = remove_container(podman, spec.name).await;
    let stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
    let hint = start_hint(&stderr);
    Err(PodmanError::StartFailed { stderr, hint })
}

/// The folders of an overlay `/work` besides its lower layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverlayDirs {
    /// Receives every change the container makes.
    pub upper: PathBuf,
    /// The overlay's own scratch folder (same file system as `upper`).
    pub work: PathBuf,
}

/// A running container for one run.
#[derive(Debug)]
pub struct PodmanBackend {
    podman: Podman,
    container: String,
    work_dir: PathBuf,
    /// Execs take turns: the end of one kills every process in the container.
    /// The command channel lives in the turn.
    turns: Arc<Mutex<channel::Lane>>,
    /// Commands go through the channel (else one `podman exec` each).
    use_channel: AtomicBool,
    /// Why the channel is not used, for the run to show.
    notes: std::sync::Mutex<Vec<String>>,
    /// The container was restarted: the proxy port must be handed over again.
    restarted: Arc<AtomicBool>,
    egress: Option<network::Egress>,
    /// The OOM kill count of the container's memory cgroup; `None` where
    /// podman gave it no memory limit (see `oom`).
    oom: Option<oom::OomCounter>,
    /// The memory limit, as given (`4g`), to name in a command's result.
    memory: String,
    /// The data limit that stands in for the memory cgroup, where one does.
    data_limit: Option<u64>,
    /// What the container's init got, read once it started.
    observed: Option<Observed>,
    /// An overlay `/work`: its folders, and its merged view once opened.
    overlay: Option<OverlayDirs>,
    merged: Mutex<Option<crate::merged::Merged>>,
    /// The init the container runs (and runs again on a restart; on a
    /// remote engine, the engine's copy).
    _init: Option<init::ExecOnly>,
    /// The agent's `ah` (started again when the channel breaks).
    _agent: Option<init::ExecOnly>,
    /// Where the agent is in the container, and how it starts.
    agent: channel::AgentAt,
    /// A container on a remote engine: the mirror of its `/work`.
    remote: Option<remote::Remote>,
    /// The copy of the image the container's root stands on, held while
    /// it lives (`None`: the image itself, from podman's storage).
    _rootfs: Option<rootfs::Rootfs>,
    stopped: AtomicBool,
    /// Commands run so far: each ended every process but the init.
    sweeps: AtomicU64,
    /// Containers of crashed runs removed before this one started.
    removed_stale: Vec<String>,
}

/// The host pid of the container's init, from the file podman wrote as it
/// started the container (`None`: podman wrote none, or not a pid).
fn init_pid_written(pidfile: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(pidfile).ok()?;
    text.trim().parse().ok().filter(|pid| *pid != 0)
}

/// Finds the podman executable.
pub fn find_podman() -> Result<PathBuf, PodmanError> {
    find_tool("podman").ok_or(PodmanError::NotFound)
}

/// Whether `image` is in local storage, from the facts the starts of the
/// next moments share (see `side_by_side`): a run's check costs its starts
/// no second look.
pub async fn image_known(podman: &Podman, image: &str) -> Result<bool, PodmanError> {
    Ok(side_by_side::image_facts(podman, image).await?.is_some())
}

/// Whether `image` is in local storage.
pub async fn image_exists(podman: &Podman, image: &str) -> Result<bool, PodmanError> {
    let status = podman
        .command()
        .args(["image", "exists", image])
        .status()
        .await
        .map_err(|source| PodmanError::Io {
            what: "run podman image exists",
            source,
        })?;
    Ok(status.success())
}

/// What the run is told when its root is a copy of the whole image after
/// all.
fn without_copy(why: &str) -> String {
    format!(
        "the sandbox starts from a copy of the whole image, made for this run (podman's \
         storage driver here is vfs): the cached root file system could not be used: {why}"
    )
}

/// Removes every container labelled `ah.run` whose owning process is gone
/// (left by a crash). Returns the names removed.
pub async fn cleanup_stale() -> Result<Vec<String>, PodmanError> {
    stale::cleanup_stale(&Podman::find()?).await
}

/// [`cleanup_stale`] on a remote engine: the containers this machine's
/// runs made there whose process is gone.
pub async fn cleanup_stale_on(engine: &Connection) -> Result<Vec<String>, PodmanError> {
    stale::cleanup_stale(&Podman::find()?.remote(engine.clone())).await
}

impl PodmanBackend {
    /// Starts the run's container (after removing stale ones).
    pub async fn start(opts: &PodmanOptions) -> Result<PodmanBackend, PodmanError> {
        if let Some(on) = &opts.remote {
            return remote::start(opts, on).await;
        }
        let podman = Podman::find()?;
        check_run_id(&opts.run_id)?;
        let work_meta = mountable(&opts.work_dir)?;
        if let Some(dirs) = &opts.overlay {
            for dir in [&dirs.upper, &dirs.work] {
                mountable(dir)?;
            }
        }
        let mut notes = Vec::new();
        let agent = channel::agent_executable(opts.ah_executable.as_deref()).and_then(|exe| {
            init::ExecOnly::copy(&exe, "ah-agent", &opts.makers)
                .map_err(|err| format!("{} could not be copied ({err})", exe.display()))
        });
        let agent = agent.map_err(|why| notes.push(without_channel(&why))).ok();
        // Without an agent, catatonit pauses as the init (see `make`).
        let paused = match agent {
            Some(_) => None,
            None => Some(make::copy_init(&opts.makers)?),
        };
        // The sweep of crashed runs' containers goes on while this one is
        // made (it removes none of a live process): each podman command
        // costs ~100 ms, and the image's facts were most often found by
        // the run's check already.
        let sweeping = tokio::spawn({
            let podman = podman.clone();
            async move { side_by_side::sweep_once(&podman).await }
        });
        let is_rootless = rootless();
        let image = side_by_side::image_facts(&podman, &opts.image).await;
        let image = image?.ok_or_else(|| PodmanError::ImageMissing {
            image: opts.image.clone(),
        })?;
        let copy = if is_rootless && image.copied_per_container() && !opts.from_image {
            rootfs::prepare(&podman, &image.id)
                .await
                .map_err(|why| notes.push(without_copy(&why)))
                .ok()
        } else {
            None
        };

        let container = container_name(&opts.run_id);
        let egress = match opts.network {
            NetworkMode::Proxy => Some(network::Egress::prepare(
                opts.allow.clone(),
                &opts.network_log,
                opts.ah_executable.as_deref(),
                &opts.makers,
            )?),
            _ => None,
        };
        let network = match (&egress, opts.network) {
            (Some(egress), _) => args::Network::Proxy {
                socket_dir: egress.socket_dir(),
                ah: egress.executable(),
            },
            (None, NetworkMode::Full) => args::Network::Full(user_network()?),
            (None, _) => args::Network::None,
        };
        let owner = stale::Owner::current();
        let mut labels = vec![(stale::RUN_LABEL, opts.run_id.clone())];
        labels.extend(owner.labels());
        // The init's host pid, from podman as it starts the container: no
        // `podman inspect` after it (~100 ms of CPU per start).
        let pidfile = podman.dir().join("init.pid");
        let init_copy = agent
            .as_ref()
            .or(paused.as_ref())
            .ok_or(PodmanError::InitMissing)?;
        let spec = args::RunSpec {
            name: &container,
            labels,
            root: match &copy {
                Some(copy) => args::Root::Copy(copy.path()),
                None => args::Root::Image(&opts.image),
            },
            runtime: opts.runtime.resolve(),
            pids_limit: opts.pids_limit,
            memory: &opts.memory,
            ulimits: stood_in(opts.ulimits, opts.stand_ins).clamped(&HostLimits::read()),
            data_limit: opts
                .stand_ins
                .data
                .map(|bytes| bytes.min(args::data_hard())),
            work_dir: &opts.work_dir,
            overlay: opts.overlay.as_ref(),
            init: init_copy.path(),
            agent: agent.as_ref().map(init::ExecOnly::path),
            pidfile: Some(&pidfile),
            attached: agent.is_some(),
            rootless: is_rootless,
            user: (!is_rootless).then(|| (work_meta.uid(), work_meta.gid())),
            network,
            env: &opts.env,
            remote: None,
        };
        let made = make::make(&podman, &spec, &opts.makers).await?;
        let swept = sweeping.await.unwrap_or_else(|join| {
            Err(PodmanError::Io {
                what: "remove the containers of crashed runs",
                source: std::io::Error::other(join),
            })
        });
        let removed_stale = match swept {
            Ok(removed) => removed,
            Err(err) => {
                let _ = remove_container(&podman, &container).await;
                return Err(err);
            }
        };
        if let Some(egress) = &egress
            && let Err(err) = egress.connect(&podman, &container).await
        {
            let _ = remove_container(&podman, &container).await;
            return Err(err);
        }
        let pid = init_pid_written(&pidfile);
        let observed = pid.map(Observed::of_process);
        let oom = pid
            .zip(observed.as_ref())
            .and_then(|(pid, seen)| oom::OomCounter::find(&opts.memory, pid, seen));
        // The way into an overlay's /work, through the init just found: the
        // first step asks podman for nothing more (see `work_root`).
        let merged = match (&opts.overlay, pid) {
            (Some(_), Some(pid)) => i32::try_from(pid)
                .ok()
                .and_then(rustix::process::Pid::from_raw)
                .and_then(|pid| crate::merged::Merged::open(pid, Path::new("/work")).ok()),
            _ => None,
        };
        let mut lane = channel::Lane::default();
        match made.opened {
            Some(Ok(opened)) => {
                lane.channel = Some(opened);
                lane.opened = 1;
            }
            Some(Err(err)) => notes.push(without_channel(&err.reason())),
            None => {}
        }
        Ok(PodmanBackend {
            podman,
            container,
            work_dir: opts.work_dir.clone(),
            use_channel: AtomicBool::new(lane.channel.is_some()),
            turns: Arc::new(Mutex::new(lane)),
            notes: std::sync::Mutex::new(notes),
            restarted: Arc::new(AtomicBool::new(false)),
            egress,
            oom,
            memory: opts.memory.clone(),
            data_limit: opts.stand_ins.data,
            observed,
            overlay: opts.overlay.clone(),
            merged: Mutex::new(merged),
            _init: made.init.or(paused),
            _agent: agent,
            agent: LOCAL_AGENT,
            remote: None,
            _rootfs: copy,
            stopped: AtomicBool::new(false),
            sweeps: AtomicU64::new(0),
            removed_stale,
        })
    }

    /// The limits the container's init got, read from the host once it
    /// started (`None` when podman could not say which process it is).
    pub fn observed_limits(&self) -> Option<Observed> {
        self.observed
    }

    /// The containers left by crashed runs that the start removed.
    pub fn removed_stale(&self) -> &[String] {
        &self.removed_stale
    }

    /// The container's name (`ah-<run_id>`).
    pub fn container(&self) -> &str {
        &self.container
    }

    /// Host path of the directory mounted at `/work`.
    pub fn work_dir(&self) -> &Path {
        &self.work_dir
    }

    /// The proxy's decisions since the last call (none without a proxy).
    pub fn take_egress(&self) -> Vec<EgressDecision> {
        self.egress
            .as_ref()
            .map(network::Egress::take_decisions)
            .unwrap_or_default()
    }

    /// Where the host reaches `/work`: the work copy, or the merged view
    /// of an overlay (opened again after a restart).
    pub async fn work_root(&self) -> std::io::Result<PathBuf> {
        if self.overlay.is_none() {
            return Ok(self.work_dir.clone());
        }
        // Not while a command, or the end of a cancelled one, may restart
        // the container.
        let _turn = self.turns.lock().await;
        let mut merged = self.merged.lock().await;
        if let Some(open) = merged.as_mut()
            && open.alive()
        {
            return open.path();
        }
        *merged = None;
        let pid = init_pid(&self.podman, &self.container).await?;
        let open = merged.insert(crate::merged::Merged::open(pid, Path::new("/work"))?);
        open.path()
    }

    /// What removing this container takes elsewhere; from now on the
    /// backend removes nothing itself (see [`Backend::hand_off`]).
    pub async fn hand_off(&self) -> Remains {
        *self.merged.lock().await = None;
        self.stopped.store(true, Ordering::Relaxed);
        if let Some(remote) = &self.remote {
            remote.close().await;
        }
        Remains {
            makers: Vec::new(),
            containers: vec![self.container.clone()],
            folders: self.overlay.iter().map(|dirs| dirs.work.clone()).collect(),
            lease: self._rootfs.as_ref().and_then(rootfs::Rootfs::lease),
            engine: self.podman.connection().cloned().map(Box::new),
        }
    }

    /// Removes the container (and an overlay's scratch folder); safe to
    /// call twice.
    pub async fn shutdown(&self) -> Result<(), PodmanError> {
        *self.merged.lock().await = None;
        remove_container(&self.podman, &self.container).await?;
        self.stopped.store(true, Ordering::Relaxed);
        if let Some(remote) = &self.remote {
            remote.close().await;
        }
        if let Some(dirs) = &self.overlay {
            let dir = dirs.work.clone();
            tokio::task::spawn_blocking(move || remove_scratch(&dir))
                .await
                .map_err(|e| PodmanError::Io {
                    what: "remove the overlay's scratch folder",
                    source: std::io::Error::other(e),
                })??;
        }
        Ok(())
    }
}

impl Drop for PodmanBackend {
    /// A backend dropped without `shutdown` (an error path) still removes
    /// its container, without blocking the dropping thread.
    fn drop(&mut self) {
        if self.stopped.load(Ordering::Relaxed) {
            return;
        }
        let spawned = self
            .podman
            .std_command()
            .args(["rm", "-f", "-t", "0", "-i", &self.container])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        if let Ok(mut child) = spawned {
            std::thread::spawn(move || child.wait());
        }
    }
}

#[async_trait::async_trait]
impl Backend for PodmanBackend {
    fn kind(&self) -> BackendKind {
        match self.remote {
            Some(_) => BackendKind::PodmanRemote,
            None => BackendKind::Podman,
        }
    }

    async fn exec(&self, command: &str, timeout: Duration) -> std::io::Result<ExecOutput> {
        PodmanBackend::exec(self, command, timeout).await
    }

    async fn view(&self) -> std::io::Result<View> {
        if let Some(remote) = &self.remote {
            return remote.view(self).await;
        }
        let root = PodmanBackend::work_root(self).await?;
        let changed = match &self.overlay {
            Some(dirs) => Changed::Within(dirs.upper.clone()),
            None => Changed::Anywhere,
        };
        Ok(View { root, changed })
    }

    async fn push(&self, paths: Option<&[String]>) -> std::io::Result<()> {
        match &self.remote {
            Some(remote) => remote.push(self, paths).await,
            None => Ok(()),
        }
    }

    async fn spawn(&self, program: &super::Program<'_>) -> std::io::Result<super::Spawned> {
        PodmanBackend::spawn(self, program).await
    }

    fn sweeps(&self) -> u64 {
        self.sweeps.load(Ordering::Relaxed)
    }

    fn take_egress(&self) -> Vec<EgressDecision> {
        PodmanBackend::take_egress(self)
    }

    fn traffic(&self) -> Option<super::Traffic> {
        self.remote.as_ref().map(remote::Remote::traffic)
    }

    async fn shutdown(&self) -> std::io::Result<()> {
        PodmanBackend::shutdown(self)
            .await
            .map_err(|e| std::io::Error::other(e.to_string()))
    }

    async fn hand_off(&self) -> Option<Remains> {
        Some(PodmanBackend::hand_off(self).await)
    }
}

/// How often `podman rm` is tried on a container caught between states.
const RM_ATTEMPTS: u32 = 5;

/// `podman rm -f -t 0 -i`: no error when the container is already gone.
/// A container whose init just ended is briefly in a state podman 4.3
/// cannot stop ("container state improper"), and on a loaded machine its
/// processes may outlast podman's wait for them ("given PIDs did not die
/// within timeout"): either is tried again a few times, a little later
/// each time.
pub(crate) async fn remove_container(podman: &Podman, name: &str) -> Result<(), PodmanError> {
    let mut attempt = 1;
    loop {
        let output = podman
            .command()
            .args(["rm", "-f", "-t", "0", "-i", name])
            .stdin(std::process::Stdio::null())
            .output()
            .await
            .map_err(|source| PodmanError::Io {
                what: "run podman rm",
                source,
            })?;
        if output.status.success() {
            return Ok(());
        }
        let stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
        let passing = stderr.contains("state improper") || stderr.contains("did not die");
        if attempt >= RM_ATTEMPTS || !passing {
            return Err(PodmanError::Command { what: "rm", stderr });
        }
        tokio::time::sleep(Duration::from_millis(200) * attempt).await;
        attempt += 1;
    }
}

/// Removes a folder a container wrote to: an overlay's scratch folder, its
/// upper folder, a work copy (blocking: also for `ah runs prune`, where a
/// crashed run left one). Rootless, the kernel leaves a folder in the
/// scratch folder that belongs to the container's root, and a command may
/// leave files of another of the container's users, which only the user
/// namespace may remove (`podman unshare`).
pub fn remove_scratch(dir: &Path) -> Result<(), PodmanError> {
    // The none backend's scratch folder is the user's own.
    if !rootless() || crate::none::holder::remove_scratch(dir).is_ok() {
        return match std::fs::remove_dir_all(dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(PodmanError::Io {
                what: "remove the overlay's scratch folder",
                source: e,
            }),
            _ => Ok(()),
        };
    }
    let output = Podman::find()?
        .std_command()
        .args(["unshare", "rm", "-rf", "--"])
        .arg(dir)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|source| PodmanError::Io {
            what: "run podman unshare",
            source,
        })?;
    if output.status.success() {
        Ok(())
    } else {
        Err(PodmanError::Command {
            what: "unshare rm",
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        })
    }
}

/// `ulimits` with the process limit that stands in for the pids cgroup.
fn stood_in(ulimits: Ulimits, stand_ins: StandIns) -> Ulimits {
    Ulimits {
        nproc: stand_ins
            .nproc
            .map_or(ulimits.nproc, |n| ulimits.nproc.min(n)),
        ..ulimits
    }
}

/// The host's process id of `container`'s init.
async fn init_pid(podman: &Podman, container: &str) -> std::io::Result<rustix::process::Pid> {
    let output = podman
        .command()
        .args(["inspect", "--format", "{{.State.Pid}}", container])
        .stdin(std::process::Stdio::null())
        .output()
        .await?;
    let text = String::from_utf8_lossy(&output.stdout);
    match text.trim().parse::<i32>() {
        Ok(pid) if output.status.success() && pid > 0 => rustix::process::Pid::from_raw(pid),
        _ => None,
    }
    .ok_or_else(|| {
        std::io::Error::other(format!(
            "the sandbox container is not running (podman inspect: {}{})",
            text.trim(),
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    })
}

/// The user-mode network stack `--network full` uses: slirp4netns (podman
/// 4.3's rootless default), else pasta.
fn user_network() -> Result<&'static str, PodmanError> {
    if find_tool("slirp4netns").is_some() {
        Ok("slirp4netns")
    } else if find_tool("pasta").is_some() {
        Ok("pasta")
    } else {
        Err(PodmanError::NoUserNetwork)
    }
}

/// Checks that `path` is a directory whose name `-v` can carry.
fn mountable(path: &Path) -> Result<std::fs::Metadata, PodmanError> {
    let bytes = path.as_os_str().as_encoded_bytes();
    if bytes.contains(&b':') || bytes.contains(&b',') {
        return Err(PodmanError::BadPath {
            path: path.to_path_buf(),
            reason: "podman volume paths cannot contain ':' or ','",
        });
    }
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => Ok(meta),
        Ok(_) => Err(PodmanError::BadPath {
            path: path.to_path_buf(),
            reason: "it is not a directory",
        }),
        Err(_) => Err(PodmanError::BadPath {
            path: path.to_path_buf(),
            reason: "it does not exist",
        }),
    }
}

/// What to try next, from podman's words.
fn start_hint(stderr: &str) -> String {
    let hint = if stderr.contains("hybrid mode") || stderr.contains("crun") {
        "crun cannot run on this host's cgroups: install runc (apt-get install runc) \
         or choose runtime runc"
    } else if stderr.contains("rlimit") {
        "a resource limit is above this host's hard limit: lower nofile/nproc"
    } else if stderr.contains("newuidmap") || stderr.contains("subuid") {
        "rootless podman needs uidmap and /etc/subuid, /etc/subgid entries: run 'ah doctor'"
    } else {
        "run 'ah doctor' to see what is wrong"
    };
    format!("; {hint}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_hints_name_the_fix() {
        assert!(start_hint("error: cgroups in hybrid mode").contains("runc"));
        assert!(start_hint("error setting rlimit type 6").contains("nproc"));
        assert!(start_hint("something else").contains("ah doctor"));
    }

    #[test]
    fn mountable_rejects_colons_files_and_missing_paths() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        assert!(mountable(dir.path()).is_ok());
        let colon = dir.path().join("a:b");
        assert!(matches!(
            mountable(&colon),
            Err(PodmanError::BadPath { .. })
        ));
        let file = dir.path().join("f");
        std::fs::write(&file, "x").unwrap_or_else(|e| panic!("write: {e}"));
        assert!(matches!(mountable(&file), Err(PodmanError::BadPath { .. })));
        assert!(matches!(
            mountable(&dir.path().join("none")),
            Err(PodmanError::BadPath { .. })
        ));
    }
}
