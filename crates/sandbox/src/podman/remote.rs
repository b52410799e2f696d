//! A podman engine on another machine (`--engine podman-remote`), reached
//! through podman's own remote client (`podman --remote`, over ssh). The
//! container is made as a local one (the same flags, labels, limits and
//! init in pause mode) but nothing of this host's file system is named to
//! the engine: `/work` is an overlay of the run's baseline, kept in a
//! volume of the engine (`store`, sent once per baseline), the init and the
//! agent come from another (`/run/ah`), and the changes travel over the
//! command channel. The host keeps a mirror of `/work` (the run's own work
//! folder, `RemoteOptions::mirror`): after each command the agent reports
//! what changed and the mirror takes it (`mirror`), the record reads the
//! mirror as it reads a local view, and what the host changes there (a file
//! tool's write, an undo) is sent back before the next command.
//!
//! What cannot be known fails closed: when the agent that saw `/work` is
//! gone (a command killed it) or a report is cut short or too large, no
//! view is given and the run stops.

mod mirror;
pub(crate) mod store;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::Mutex;

use super::channel::{self, AgentAt, Bounds, Channel};
pub use super::program::Connection;
use super::{
    Makers, Podman, PodmanBackend, PodmanError, PodmanOptions, args, find_init, image_exists,
    side_by_side, stale,
};
use crate::egress::NetworkMode;
use crate::none::NoneBackend;
use crate::{Backend, View};

/// The baseline a remote sandbox starts from, as the host has it.
pub trait Snapshot: Send + Sync + std::fmt::Debug {
    /// A name of the baseline's content (the same files, the same key);
    /// may wait for the baseline to be taken.
    fn key(&self) -> Result<String, String>;
    /// Writes the baseline's files as a tar stream.
    fn write(&self, out: &mut dyn std::io::Write) -> Result<(), String>;
}

/// What a run on a remote engine needs besides the usual options.
#[derive(Debug, Clone)]
pub struct RemoteOptions {
    pub connection: Connection,
    /// The host's mirror of `/work`: a backend whose view holds the
    /// baseline at the start (its commands are never run).
    pub mirror: NoneBackend,
    pub snapshot: Arc<dyn Snapshot>,
}

/// Why `--network proxy` is refused on a remote engine.
pub const PROXY_REFUSED: &str = "--network proxy is not available on a remote engine (its proxy \
     would run on this machine, out of the sandbox's reach): use --network none, or --network \
     full to give the sandbox the remote machine's network";

/// The most one step's report may bring.
const BOUNDS: Bounds = Bounds {
    entries: 200_000,
    bytes: 2 * 1024 * 1024 * 1024,
    time: Duration::from_secs(600),
};

/// Where the agent is in a remote container.
const AGENT: AgentAt = AgentAt {
    path: args::SHARED_AGENT_PATH,
    changes: true,
};

/// Bytes that went to and came from the engine so far (see
/// [`crate::Traffic`]).
#[derive(Debug, Default)]
struct Counters {
    start: AtomicU64,
    steps: AtomicU64,
}

/// A remote backend's own part of a [`PodmanBackend`].
#[derive(Debug)]
pub(super) struct Remote {
    mirror: NoneBackend,
    /// The paths the reports since the last command began touched: what
    /// an undo may have put back.
    last: std::sync::Mutex<Vec<String>>,
    /// Something may have run in `/work` since the last report: a command
    /// began, or a program started beside the commands (which may write
    /// at any time), so every view asks again. Without either, the mirror
    /// already holds what the sandbox holds (the host's own changes went
    /// there through the agent, which took them into its index), and a
    /// view walks nothing: a step asks for a view more than once.
    unreported: AtomicBool,
    beside: AtomicBool,
    traffic: Arc<Counters>,
}

impl Remote {
    /// What went between this machine and the engine so far.
    pub(super) fn traffic(&self) -> crate::Traffic {
        crate::Traffic {
            start: self.traffic.start.load(Ordering::Relaxed),
            steps: self.traffic.steps.load(Ordering::Relaxed),
        }
    }
}

/// Starts the run's container on the engine of `remote`.
pub(super) async fn start(
    opts: &PodmanOptions,
    remote: &RemoteOptions,
) -> Result<PodmanBackend, PodmanError> {
    let podman = super::Podman::find()?.remote(remote.connection.clone());
    super::check_run_id(&opts.run_id)?;
    if opts.network == NetworkMode::Proxy {
        return Err(PodmanError::Remote(PROXY_REFUSED.to_string()));
    }
    let agent = channel::agent_executable(opts.ah_executable.as_deref()).map_err(|why| {
        PodmanError::Remote(format!(
            "a remote sandbox needs the command channel's agent: {why}"
        ))
    })?;
    let init = find_init().ok_or(PodmanError::InitMissing)?;
    let (removed_stale, image, volumes) = tokio::join!(
        side_by_side::sweep_once(&podman),
        image_exists(&podman, &opts.image),
        store::Volumes::list(&podman)
    );
    let (removed_stale, volumes) = (removed_stale?, volumes?);
    if !image? {
        return Err(PodmanError::RemoteImageMissing {
            image: opts.image.clone(),
            connection: remote.connection.name().to_string(),
        });
    }
    let ulimits = super::stood_in(opts.ulimits, opts.stand_ins);
    let owner = stale::Owner::current();
    let mut labels = vec![(stale::RUN_LABEL, opts.run_id.clone())];
    labels.extend(owner.labels());
    labels.push((stale::CLIENT_LABEL, stale::client_id()));
    let filler = store::Filler {
        podman: &podman,
        image: &opts.image,
        ulimits,
        labels: &labels,
    };
    let traffic = Arc::new(Counters::default());
    let fill_both = |volumes: store::Volumes| {
        let (filler, traffic, agent, init) = (&filler, &traffic, &agent, &init);
        async move {
            let (tools, base) = tokio::join!(
                store::tools(filler, &volumes, agent, init),
                store::base(filler, &volumes, Arc::clone(&remote.snapshot))
            );
            let (tools, base) = (tools?, base?);
            traffic
                .start
                .fetch_add(tools.sent + base.sent, Ordering::Relaxed);
            Ok::<_, PodmanError>((tools, base))
        }
    };
    let (mut tools, mut base) = fill_both(volumes).await?;

    let container = super::container_name(&opts.run_id);
    // The engine's cgroups cannot be looked into from here: a per-process
    // limit of the memory asked holds wherever they do not.
    let data_limit = crate::limits::memory_bytes(&opts.memory);
    let network = match opts.network {
        NetworkMode::Full => args::Network::Full("slirp4netns"),
        _ => args::Network::None,
    };
    let mut refilled = false;
    let lane = loop {
        let spec = args::RunSpec {
            name: &container,
            labels: labels.clone(),
            root: args::Root::Image(&opts.image),
            runtime: opts.runtime.resolve_remote(),
            pids_limit: opts.pids_limit,
            memory: &opts.memory,
            ulimits,
            data_limit,
            work_dir: &opts.work_dir,
            overlay: None,
            init: &init,
            agent: None,
            pidfile: None,
            attached: false,
            // Not the engine's user, whether it is rootless or not: the
            // host never sees the files, so no one's ids need to match.
            rootless: false,
            user: Some((args::SANDBOX_UID, args::SANDBOX_UID)),
            network: network.clone(),
            env: &opts.env,
            remote: Some(args::RemoteMounts {
                base: &base.folder,
                base_volume: &base.volume,
                tools: &tools.volume,
            }),
        };
        let named = [base.volume.as_str(), tools.volume.as_str()];
        if let Some(channel) = create_checked(&podman, &spec, &opts.makers, &named).await? {
            break channel::Lane {
                channel: Some(channel),
                opened: 1,
            };
        }
        if refilled {
            return Err(PodmanError::Remote(format!(
                "the volumes {} and {} were removed twice while this run started (another \
                 client pruning the engine's cache); run again",
                base.volume, tools.volume
            )));
        }
        refilled = true;
        (tools, base) = fill_both(store::Volumes::list(&podman).await?).await?;
    };
    Ok(PodmanBackend {
        podman,
        container,
        work_dir: opts.work_dir.clone(),
        agent: AGENT,
        turns: Arc::new(Mutex::new(lane)),
        use_channel: AtomicBool::new(true),
        notes: std::sync::Mutex::new(Vec::new()),
        restarted: Arc::new(AtomicBool::new(false)),
        egress: None,
        oom: None,
        memory: opts.memory.clone(),
        data_limit,
        observed: None,
        overlay: None,
        merged: Mutex::new(None),
        _init: None,
        _agent: None,
        _rootfs: None,
        stopped: AtomicBool::new(false),
        sweeps: AtomicU64::new(0),
        removed_stale,
        remote: Some(Remote {
            mirror: remote.mirror.clone(),
            last: std::sync::Mutex::new(Vec::new()),
            unreported: AtomicBool::new(false),
            beside: AtomicBool::new(false),
            traffic,
        }),
    })
}

/// Makes the run's container from `spec` and opens its channel; `None`
/// (the container removed) when another client pruned the volumes it
/// mounts (`named`) between their listing and the container naming them
/// (after which it cannot): their markers, which pruning removes first,
/// say whether what is mounted is still what was filled.
async fn create_checked(
    podman: &Podman,
    spec: &args::RunSpec<'_>,
    makers: &Makers,
    named: &[&str],
) -> Result<Option<Channel>, PodmanError> {
    let (opened, kept) = match super::create(podman, spec, makers).await {
        Ok(()) => {
            let (opened, kept) = tokio::join!(
                Channel::open(podman, spec.name, &AGENT),
                store::still_filled(podman, named)
            );
            (Ok(opened), kept)
        }
        Err(err) => (Err(err), store::still_filled(podman, named).await),
    };
    if !kept? {
        let _ = super::remove_container(podman, spec.name).await;
        return Ok(None);
    }
    match opened? {
        Ok(channel) => Ok(Some(channel)),
        Err(err) => {
            let _ = super::remove_container(podman, spec.name).await;
            Err(PodmanError::StartFailed {
                stderr: format!("the command channel did not open: {}", err.reason()),
                hint: "; run 'ah doctor --engine podman-remote' to see what is wrong".to_string(),
            })
        }
    }
}

impl Remote {
    /// The mirror, up to date with what the agent reports.
    pub(super) async fn view(&self, backend: &PodmanBackend) -> std::io::Result<View> {
        let view = self.mirror.view().await?;
        let mut turn = backend.turns.lock().await;
        let channel = live(&mut turn)?;
        let asked = self.unreported.swap(false, Ordering::SeqCst);
        if !asked && !self.beside.load(Ordering::SeqCst) {
            return Ok(view);
        }
        let mut mirror = mirror::Mirror::new(&view.root);
        match channel.scan(&mut mirror, BOUNDS).await {
            Ok(scanned) => {
                self.traffic
                    .steps
                    .fetch_add(scanned.bytes, Ordering::Relaxed);
                lock(&self.last).extend(mirror.touched);
                Ok(view)
            }
            Err(why) => {
                turn.channel = None;
                self.unreported.store(true, Ordering::SeqCst);
                Err(std::io::Error::other(why))
            }
        }
    }

    /// Sends what the host changed at `paths` of the mirror (`None`: what
    /// the reports since the last command began touched, which an undo may
    /// have put back).
    pub(super) async fn push(
        &self,
        backend: &PodmanBackend,
        paths: Option<&[String]>,
    ) -> std::io::Result<()> {
        let paths = match paths {
            Some(paths) => paths.to_vec(),
            None => std::mem::take(&mut *lock(&self.last)),
        };
        if paths.is_empty() {
            return Ok(());
        }
        let view = self.mirror.view().await?;
        let root = view.root.clone();
        let puts = tokio::task::spawn_blocking(move || mirror::read_puts(&root, &paths))
            .await
            .map_err(std::io::Error::other)?
            .map_err(std::io::Error::other)?;
        let bytes: u64 = puts.iter().map(|(_, data)| data.len() as u64).sum();
        let mut turn = backend.turns.lock().await;
        let channel = live(&mut turn)?;
        match channel.put(&puts).await {
            Ok(()) => {
                self.traffic.steps.fetch_add(bytes, Ordering::Relaxed);
                Ok(())
            }
            Err(why) => {
                turn.channel = None;
                Err(std::io::Error::other(why))
            }
        }
    }

    /// A command begins: what the reports before it touched was recorded
    /// (or undone and sent back) by now.
    pub(super) fn command_begins(&self) {
        lock(&self.last).clear();
        self.unreported.store(true, Ordering::SeqCst);
    }

    /// A program starts beside the commands: from now on every view asks.
    pub(super) fn program_starts(&self) {
        self.beside.store(true, Ordering::SeqCst);
    }

    /// Ends the mirror's own namespace (its folders are the run's).
    pub(super) async fn close(&self) {
        let _ = self.mirror.shutdown().await;
    }
}

/// The channel of the agent that has seen every change since the start.
fn live(lane: &mut channel::Lane) -> std::io::Result<&mut Channel> {
    match (lane.opened, lane.channel.as_mut()) {
        (1, Some(channel)) => Ok(channel),
        _ => Err(std::io::Error::other(
            "the sandbox's agent that kept track of /work is gone (a command ended it, or the \
             container stopped): what changed there since cannot be known",
        )),
    }
}

fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
