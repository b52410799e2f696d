//! The `podman run` command line that makes a run's sandbox, and the host
//! facts it depends on: resource limits, the OCI runtime, rootless or not,
//! the init program. Kept pure where it can be so the flags that make the
//! sandbox are checked by unit tests without podman.
//!
//! The container sees nothing of the host but the work copy at `/work`
//! (and the init, the agent's `ah`, and in proxy mode the handoff socket
//! and `ah`): the
//! project itself is not mounted, so what the read policy withholds from
//! the copy, and the project's `.git` and `.ah`, are not there to read.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use rustix::process::Resource;

/// `PATH` inside the container; the environment is built from nothing.
pub const CONTAINER_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Where the host's catatonit is mounted in the container. It runs as PID 1
/// in pause mode (`-P`): it starts no child and reaps orphans, so every other
/// process in the container belongs to a command and may be killed when the
/// command ends (see `exec`).
pub const INIT_PATH: &str = "/run/ah-init";

/// Where PID 1 runs from when the engine cannot bind-mount host files into
/// the container (a remote podman's named volume, a Kubernetes Pod's
/// `emptyDir`): the init and the agent are copied into one folder mounted
/// read-only at `/run/ah`. The agent's interlock accepts this path besides
/// [`INIT_PATH`], and no other.
pub const SHARED_INIT_PATH: &str = "/run/ah/init";

/// Where the command channel's agent is found beside [`SHARED_INIT_PATH`].
pub const SHARED_AGENT_PATH: &str = "/run/ah/agent";

/// The folder holding both (a remote engine's volume, `remote::store`).
pub const SHARED_DIR: &str = "/run/ah";

/// The user and group a sandbox runs as where the host never sees its
/// files (a remote engine's container, a Kubernetes Pod): fixed, not root,
/// with no name in the image. Not the engine's own user: on a rootless
/// engine it is one of that user's subordinate ids, on a rootful one an
/// unprivileged id of that machine.
pub const SANDBOX_UID: u32 = 1000;

/// Where the folder holding the proxy handoff socket is mounted.
pub const EGRESS_DIR: &str = "/run/ah-egress";

/// Where the running `ah` executable is mounted (read-only) in proxy mode,
/// to hand the proxy its listening socket (see `egress::handoff`).
pub const AH_BIN: &str = "/run/ah-bin";

/// Where the execute-only copy of `ah` that runs the command channel's
/// agent (`ah __sandbox-agent`) is mounted, read-only.
pub const AGENT_PATH: &str = "/run/ah-agent";

/// Where podman's own `--init` looks for catatonit (containers.conf
/// `init_path`), tried before `PATH`.
const PODMAN_INIT: &str = "/usr/libexec/podman/catatonit";

/// Directories searched for runtimes besides `PATH` (a non-root user's `PATH`
/// often lacks the sbin directories where Debian puts `runc`).
const SBIN_DIRS: &[&str] = &["/usr/sbin", "/usr/local/sbin", "/sbin", "/usr/bin"];

/// Which OCI runtime podman uses.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Runtime {
    /// `runc` when it is installed, else podman's default. crun, podman's
    /// usual default, fails on cgroup v1/hybrid hosts ("cgroups in hybrid
    /// mode"), while runc works on both cgroup layouts.
    #[default]
    Auto,
    /// A runtime name podman knows (`runc`, `crun`) or a path to one.
    Named(String),
}

impl Runtime {
    /// The `--runtime` value to pass, or `None` for podman's default.
    pub fn resolve(&self) -> Option<String> {
        match self {
            Runtime::Named(name) => Some(name.clone()),
            Runtime::Auto => find_tool("runc").map(|_| "runc".to_string()),
        }
    }

    /// [`Runtime::resolve`] for a remote engine, whose programs this host
    /// cannot look for: automatic is the engine's own default.
    pub fn resolve_remote(&self) -> Option<String> {
        match self {
            Runtime::Named(name) => Some(name.clone()),
            Runtime::Auto => None,
        }
    }
}

/// Finds an executable on `PATH` or in the sbin directories.
pub fn find_tool(name: &str) -> Option<PathBuf> {
    which::which(name).ok().or_else(|| {
        SBIN_DIRS
            .iter()
            .map(|dir| Path::new(dir).join(name))
            .find(|path| path.is_file())
    })
}

/// The host's catatonit, which the container runs as its init.
pub fn find_init() -> Option<PathBuf> {
    let podmans = Path::new(PODMAN_INIT);
    let found = if podmans.is_file() {
        Some(podmans.to_path_buf())
    } else {
        find_tool("catatonit")
    };
    // The bind mount needs the file itself, not a symlink to it.
    found.map(|path| std::fs::canonicalize(&path).unwrap_or(path))
}

/// The caller's hard limits, which bound what the container may ask for:
/// without CAP_SYS_RESOURCE, asking for more makes `podman run` fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostLimits {
    pub nofile_hard: u64,
    pub nproc_hard: u64,
    /// `kernel.pid_max`: podman hands conmon a hard nproc limit no higher
    /// than this, so a larger `--ulimit nproc` fails at container start.
    pub pid_max: u64,
}

impl HostLimits {
    /// Reads the limits of this process (`u64::MAX` stands for unlimited).
    pub fn read() -> HostLimits {
        let pid_max = std::fs::read_to_string("/proc/sys/kernel/pid_max")
            .ok()
            .and_then(|text| text.trim().parse().ok())
            .unwrap_or(u64::MAX);
        HostLimits {
            nofile_hard: hard_limit(Resource::Nofile),
            nproc_hard: hard_limit(Resource::Nproc),
            pid_max,
        }
    }
}

/// The hard limit of `resource` (`u64::MAX`: unlimited).
fn hard_limit(resource: Resource) -> u64 {
    rustix::process::getrlimit(resource)
        .maximum
        .unwrap_or(u64::MAX)
}

/// The caller's hard data limit, which bounds the stand-in for the memory
/// cgroup (`u64::MAX`: unlimited).
pub(super) fn data_hard() -> u64 {
    hard_limit(Resource::Data)
}

/// `--ulimit` values for the container (soft = hard).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ulimits {
    pub nofile: u64,
    pub nproc: u64,
}

impl Ulimits {
    /// What a run asks for before clamping to the host.
    pub const WANTED: Ulimits = Ulimits {
        nofile: 65_536,
        nproc: 32_768,
    };

    /// [`Ulimits::WANTED`] clamped to this host's limits.
    pub fn for_host() -> Ulimits {
        Ulimits::WANTED.clamped(&HostLimits::read())
    }

    /// Lowers each value to what `host` allows.
    pub fn clamped(self, host: &HostLimits) -> Ulimits {
        Ulimits {
            nofile: self.nofile.min(host.nofile_hard),
            nproc: self.nproc.min(host.nproc_hard).min(host.pid_max),
        }
    }
}

/// True when podman will run rootless (the caller is not root).
pub fn rootless() -> bool {
    !rustix::process::geteuid().is_root()
}

/// The container's network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Network<'a> {
    /// No network at all.
    None,
    /// No network, plus the mounts the proxy handoff needs: the folder of
    /// the host's unix socket and the `ah` executable.
    Proxy { socket_dir: &'a Path, ah: &'a Path },
    /// A user-mode network stack: `slirp4netns` or `pasta`.
    Full(&'static str),
}

/// What the container's root file system is made from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Root<'a> {
    /// The image, through podman's storage.
    Image(&'a str),
    /// An overlay whose lower layer is this copy of the image's root file
    /// system (see `rootfs`), never written.
    Copy(&'a Path),
}

/// Everything `podman run` needs to create one run's container.
#[derive(Debug, Clone)]
pub(super) struct RunSpec<'a> {
    pub name: &'a str,
    /// Labels identifying the run and the process that owns the container.
    pub labels: Vec<(&'static str, String)>,
    pub root: Root<'a>,
    pub runtime: Option<String>,
    pub pids_limit: u32,
    pub memory: &'a str,
    pub ulimits: Ulimits,
    /// `--ulimit data`: the per-process stand-in for a memory cgroup
    /// podman would ignore.
    pub data_limit: Option<u64>,
    pub work_dir: &'a Path,
    /// Mount `/work` as an overlay of `work_dir` with these folders.
    pub overlay: Option<&'a super::OverlayDirs>,
    /// The execute-only copy of the host's catatonit ([`find_init`]; see
    /// `init`).
    pub init: &'a Path,
    /// The execute-only copy of `ah` for the command channel's agent, where
    /// there is one.
    pub agent: Option<&'a Path>,
    /// Where podman writes the host pid of the container's init as it
    /// starts it (this host's engine only).
    pub pidfile: Option<&'a Path>,
    /// The init is ah's (`init` is then ah's execute-only copy): it starts
    /// the agent on the container's stdin and stdout, which `podman run
    /// -i` connects to its caller. Else catatonit pauses (`podman run -d`)
    /// and agents come with `podman exec`. This host's engine only.
    pub attached: bool,
    /// Rootless podman: map the caller to the same uid inside.
    pub rootless: bool,
    /// Rootful podman: run as this uid:gid (the work dir's owner).
    pub user: Option<(u32, u32)>,
    pub network: Network<'a>,
    /// The whole environment (see `env::container_env`).
    pub env: &'a [(String, String)],
    /// On a remote engine: `/work` and the init come from that engine's
    /// volumes, and nothing of this host is mounted or written (`work_dir`,
    /// `overlay`, `init`, `agent` and `pidfile` are not used).
    pub remote: Option<RemoteMounts<'a>>,
}

/// What a remote engine's container mounts instead of this host's folders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct RemoteMounts<'a> {
    /// The folder, on the engine's machine, holding the baseline: the
    /// lower layer of an overlay `/work` whose changes the container
    /// keeps to itself.
    pub base: &'a str,
    /// The baseline's volume, named so that the engine refuses to remove
    /// it while the container is there (mounted read-only at
    /// [`BASELINE_DIR`]; `/work` is an overlay of its folder, which podman
    /// does not count as a use).
    pub base_volume: &'a str,
    /// The engine's volume holding the init and the agent.
    pub tools: &'a str,
}

/// Where a remote container sees its baseline as it was sent.
pub(super) const BASELINE_DIR: &str = "/run/ah-baseline";

/// The arguments after `podman` that create and start the container.
pub(super) fn run_args(spec: &RunSpec) -> Vec<OsString> {
    let mut args: Vec<OsString> = Vec::new();
    let mut push = |arg: &str| args.push(OsString::from(arg));
    push("run");
    match spec.attached && spec.remote.is_none() {
        // Signals to the caller's podman stay there (the init takes none),
        // and the channel's bytes go into no log.
        true => ["-i", "--sig-proxy=false", "--log-driver=none"]
            .into_iter()
            .for_each(&mut push),
        false => push("-d"),
    }
    for arg in [
        "--pull=never",
        "--cap-drop=all",
        "--security-opt=no-new-privileges",
        "--read-only",
        "--tmpfs=/tmp:rw,exec,mode=1777",
        "--http-proxy=false",
        "--unsetenv-all",
        "--workdir=/work",
    ] {
        push(arg);
    }
    push(match spec.network {
        Network::None | Network::Proxy { .. } => "--network=none",
        Network::Full("pasta") => "--network=pasta",
        Network::Full(_) => "--network=slirp4netns",
    });
    push(&format!("--name={}", spec.name));
    for (key, value) in &spec.labels {
        push(&format!("--label={key}={value}"));
    }
    if let Some(runtime) = &spec.runtime {
        push(&format!("--runtime={runtime}"));
    }
    push(&format!("--pids-limit={}", spec.pids_limit));
    push(&format!("--memory={}", spec.memory));
    let Ulimits { nofile, nproc } = spec.ulimits;
    push(&format!("--ulimit=nofile={nofile}:{nofile}"));
    push(&format!("--ulimit=nproc={nproc}:{nproc}"));
    if let Some(data) = spec.data_limit {
        push(&format!("--ulimit=data={data}:{data}"));
    }
    if spec.rootless {
        push("--userns=keep-id");
    } else if let Some((uid, gid)) = spec.user {
        push(&format!("--user={uid}:{gid}"));
    }
    for (name, value) in spec.env {
        push(&format!("--env={name}={value}"));
    }
    if let Some(remote) = spec.remote {
        push(&format!(
            "--volume={}:{}:O",
            remote.base,
            ah_tools::path::WORK
        ));
        push(&format!(
            "--volume={}:{BASELINE_DIR}:ro",
            remote.base_volume
        ));
        push(&format!("--volume={}:{SHARED_DIR}:ro", remote.tools));
        args.extend(image_and_init(spec.root, SHARED_INIT_PATH, false));
        return args;
    }
    let work_mode = match spec.overlay {
        Some(dirs) => {
            let mut mode = OsString::from(":O,upperdir=");
            mode.push(dirs.upper.as_os_str());
            mode.push(",workdir=");
            mode.push(dirs.work.as_os_str());
            mode
        }
        None => ":rw".into(),
    };
    if let Some(pidfile) = spec.pidfile {
        let mut arg = OsString::from("--pidfile=");
        arg.push(pidfile.as_os_str());
        args.push(arg);
    }
    args.push(volume(spec.work_dir, ah_tools::path::WORK, &work_mode));
    args.push(volume(spec.init, INIT_PATH, ":ro"));
    if let Some(agent) = spec.agent {
        args.push(volume(agent, AGENT_PATH, ":ro"));
    }
    if let Network::Proxy { socket_dir, ah } = spec.network {
        args.push(volume(socket_dir, EGRESS_DIR, ":ro"));
        args.push(volume(ah, AH_BIN, ":ro"));
    }
    args.extend(image_and_init(spec.root, INIT_PATH, spec.attached));
    args
}

/// The root file system and the init at `init`, ah's (`ah_init`) or
/// catatonit in pause mode: the end of the command line.
fn image_and_init(root: Root<'_>, init: &str, ah_init: bool) -> Vec<OsString> {
    let mut args = Vec::new();
    match root {
        Root::Image(image) => args.push(image.into()),
        Root::Copy(tree) => {
            args.push("--rootfs".into());
            let mut lower = tree.as_os_str().to_owned();
            lower.push(":O");
            args.push(lower);
        }
    }
    args.push(init.into());
    args.push(match ah_init {
        true => crate::channel::init::COMMAND.into(),
        false => "-P".into(),
    });
    args
}

fn volume(host: &Path, target: &str, mode: impl AsRef<std::ffi::OsStr>) -> OsString {
    let mut arg = OsString::from("--volume=");
    arg.push(host.as_os_str());
    arg.push(":");
    arg.push(target);
    arg.push(mode.as_ref());
    arg
}

#[cfg(test)]
mod tests;
