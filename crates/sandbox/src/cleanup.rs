//! Removing a sandbox off the user's path. A run's end does not wait for
//! its container: the backend is handed off ([`crate::Backend::hand_off`])
//! and what it leaves on the host — the processes still making a container
//! of a start the run abandoned, the containers, the folders they wrote
//! to — is described by [`Remains`], which a process of its own removes
//! (`ah __sandbox-cleanup`, [`Remains::detach`]) while ah shows the review
//! and exits.
//!
//! That process outlives ah: it runs in a process group of its own (the
//! terminal's Ctrl+C and hangup go to ah's group, not to it) and ignores
//! SIGINT and SIGHUP besides; it keeps the run live (it holds the run's
//! `live.lock` through its standard input, so `ah runs prune` and the
//! sweep of a later ah leave the run alone while it works); it is bounded
//! in time ([`LIMIT`]). It waits for a start's `podman run` before it
//! removes the container (a `podman run` cut short can leave a container
//! half made), then removes the containers and then the folders, in that
//! order: an overlay's folders stay mounted while its container lives.
//! What a killed ah or a killed cleanup leaves is swept by a later ah (the
//! containers: `podman::cleanup_stale`; the folders:
//! `ah_record::rundir::sweep`).

use std::ffi::OsString;
use std::fs::File;
use std::io::Write as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::podman::{self, Connection, Owner, Podman};

/// The hidden subcommand that removes [`Remains`] (`ah __sandbox-cleanup`).
pub const COMMAND: &str = "__sandbox-cleanup";

/// The longest a cleanup takes; what is left after it is a later ah's to
/// sweep.
pub const LIMIT: Duration = Duration::from_secs(120);

/// The longest a cleanup waits for the `podman run` of an abandoned start.
const MAKER_LIMIT: Duration = Duration::from_secs(60);

/// How a run's sandbox is removed at its end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Cleanup {
    /// By a process of its own, while ah shows the review and exits.
    #[default]
    Detached,
    /// Before the review: the run waits for the sandbox's start to end and
    /// for its removal (ah's way before the detached cleanup; for scripts
    /// that look for containers the moment ah exits).
    Wait,
}

/// What a sandbox leaves on the host, to remove in this order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Remains {
    /// Processes that may still be making one of the containers (the
    /// `podman run` of a start that was abandoned): waited for first.
    pub makers: Vec<Owner>,
    /// Containers, by name (`podman rm -f`; a missing one is no error).
    pub containers: Vec<String>,
    /// Folders the containers wrote to (an overlay's scratch and upper
    /// folders, a work copy), removed once the containers are gone.
    pub folders: Vec<PathBuf>,
    /// The shared lock on the cached root file system a container stands
    /// on (`podman::rootfs`): held by the cleanup until it is done, so that
    /// no prune removes the copy under a container not yet removed.
    pub lease: Option<Lease>,
    /// The remote engine the containers are on (`None`: this machine's).
    pub engine: Option<Box<Connection>>,
}

/// An open lock file whose lock the cleanup holds while it works (given to
/// it as its standard output, which it does not write to otherwise).
#[derive(Debug, Clone)]
pub struct Lease(pub Arc<File>);

impl PartialEq for Lease {
    fn eq(&self, other: &Lease) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Lease {}

impl Remains {
    /// Whether there is nothing to remove.
    pub fn is_empty(&self) -> bool {
        self.containers.is_empty() && self.folders.is_empty()
    }

    /// Adds `other`'s remains to these.
    pub fn extend(&mut self, other: Remains) {
        self.makers.extend(other.makers);
        self.containers.extend(other.containers);
        self.folders.extend(other.folders);
        self.lease = self.lease.take().or(other.lease);
        self.engine = self.engine.take().or(other.engine);
    }

    /// The podman that removes the containers.
    fn podman(&self) -> Result<Podman, podman::PodmanError> {
        let podman = Podman::find()?;
        Ok(match &self.engine {
            Some(engine) => podman.remote((**engine).clone()),
            None => podman,
        })
    }

    /// Removes everything, within [`LIMIT`]: waits for the makers, then
    /// removes the containers, then the folders. What could not be
    /// removed, in words.
    pub async fn remove(&self) -> Result<(), Vec<String>> {
        match tokio::time::timeout(LIMIT, self.remove_unbounded()).await {
            Ok(result) => result,
            Err(_) => Err(vec![format!(
                "the sandbox within {} s; the next podman run of ah in this project removes \
                 what is left",
                LIMIT.as_secs()
            )]),
        }
    }

    /// Waits until every maker has ended, or every container exists: a
    /// made container goes with `podman rm -f` whatever its maker still
    /// does (podman's lock on it orders the two), and the `podman run -i`
    /// of a start with its agent runs as long as its container does.
    async fn wait_for_makers(&self) -> Result<(), String> {
        if self.makers.is_empty() {
            return Ok(());
        }
        let podman = self.podman().ok();
        let waited = tokio::time::timeout(MAKER_LIMIT, async {
            for round in 0u32.. {
                if !self.makers.iter().any(Owner::is_alive) {
                    return;
                }
                // A podman command every fifth round: ~100 ms of CPU each.
                if round % 5 == 4
                    && let Some(podman) = &podman
                    && self.all_exist(podman).await
                {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await;
        waited.map_err(|_| {
            let alive: Vec<String> = self
                .makers
                .iter()
                .filter(|maker| maker.is_alive())
                .map(|maker| maker.pid.to_string())
                .collect();
            format!(
                "podman (pid {}) was still making the sandbox after {} s",
                alive.join(", "),
                MAKER_LIMIT.as_secs()
            )
        })
    }

    /// Whether every container of these remains exists.
    async fn all_exist(&self, podman: &Podman) -> bool {
        for name in &self.containers {
            if !podman::container_exists(podman, name).await {
                return false;
            }
        }
        true
    }

    async fn remove_unbounded(&self) -> Result<(), Vec<String>> {
        let mut failed = Vec::new();
        if let Err(err) = self.wait_for_makers().await {
            failed.push(err);
        }
        if !self.containers.is_empty() {
            match self.podman() {
                Ok(podman) => {
                    for name in &self.containers {
                        if let Err(err) = podman::remove_container(&podman, name).await {
                            failed.push(format!("container {name}: {err}"));
                        }
                    }
                }
                Err(err) => failed.push(err.to_string()),
            }
        }
        // A folder still mounted by a container that could not be removed
        // is left for the sweep, which removes that container first.
        if failed.is_empty() {
            for folder in self.folders.clone() {
                let removed =
                    tokio::task::spawn_blocking(move || podman::remove_scratch(&folder)).await;
                match removed {
                    Ok(Ok(())) => {}
                    Ok(Err(err)) => failed.push(err.to_string()),
                    Err(err) => failed.push(format!("the removal of a folder failed: {err}")),
                }
            }
        }
        match failed.is_empty() {
            true => Ok(()),
            false => Err(failed),
        }
    }

    /// Hands these remains to `ah __sandbox-cleanup`, a process of its own
    /// that outlives this one (see the module's documentation), and
    /// returns at once. `live` is the run's held `live.lock`: the cleanup
    /// keeps it held until it is done. What it could not remove it appends
    /// to `log`. Then it sweeps what dead runs left: their containers, and
    /// the folders of the ended runs under `sweep` (the project's ah
    /// folder). The remains back, and why, when no such process could be
    /// started (the running program is not ah, say): remove them here.
    pub fn detach(self, live: File, log: &Path, sweep: &Path) -> Result<(), (Remains, String)> {
        let exe = match ah_executable() {
            Ok(exe) => exe,
            Err(why) => return Err((self, why)),
        };
        // The lease's lock is the open file's: a duplicate holds it too.
        let lease = match self.lease.as_ref().map(|lease| lease.0.try_clone()) {
            Some(Ok(held)) => Stdio::from(held),
            Some(Err(err)) => return Err((self, format!("the rootfs lease ({err})"))),
            None => Stdio::null(),
        };
        let spawned = std::process::Command::new(&exe)
            .arg(COMMAND)
            .args(self.to_args(log))
            .arg("--sweep")
            .arg(sweep)
            .stdin(Stdio::from(live))
            .stdout(lease)
            .stderr(Stdio::null())
            // Out of the terminal's foreground group from the fork on.
            .process_group(0)
            .spawn();
        match spawned {
            Ok(mut child) => {
                // Reaped when it ends, if this process still runs then.
                std::thread::spawn(move || child.wait());
                Ok(())
            }
            Err(err) => Err((
                self,
                format!("{} could not be started: {err}", exe.display()),
            )),
        }
    }

    /// The arguments of `ah __sandbox-cleanup` for these remains.
    fn to_args(&self, log: &Path) -> Vec<OsString> {
        let mut args = vec![OsString::from("--log"), log.as_os_str().to_owned()];
        for maker in &self.makers {
            args.push("--after".into());
            args.push(format!("{}:{}", maker.pid, maker.start).into());
        }
        for name in &self.containers {
            args.push("--container".into());
            args.push(name.into());
        }
        for folder in &self.folders {
            args.push("--folder".into());
            args.push(folder.as_os_str().to_owned());
        }
        if let Some(engine) = &self.engine {
            match &**engine {
                Connection::Named(name) => args.extend(["--connection".into(), name.into()]),
                Connection::Url(url) => args.extend(["--url".into(), url.into()]),
                Connection::Default => args.extend(["--url".into(), "".into()]),
            }
        }
        args
    }

    /// The job that `ah __sandbox-cleanup`'s arguments name (after the
    /// command's name); `None` when they are not its.
    fn from_args(args: &[OsString]) -> Option<Job> {
        let mut remains = Remains::default();
        let mut log = None;
        let mut sweep = None;
        let mut pairs = args.chunks(2);
        for pair in &mut pairs {
            let [flag, value] = pair else {
                return None;
            };
            match flag.to_str()? {
                "--log" => log = Some(PathBuf::from(value)),
                "--sweep" => sweep = Some(PathBuf::from(value)),
                "--after" => {
                    let (pid, start) = value.to_str()?.split_once(':')?;
                    remains.makers.push(Owner {
                        pid: pid.parse().ok()?,
                        start: start.parse().ok()?,
                    });
                }
                "--container" => remains.containers.push(value.to_str()?.to_string()),
                "--folder" => remains.folders.push(PathBuf::from(value)),
                "--connection" => {
                    let name = value.to_str()?.to_string();
                    remains.engine = Some(Box::new(Connection::Named(name)));
                }
                "--url" => {
                    let url = value.to_str()?;
                    remains.engine = Some(Box::new(Connection::choose(None, Some(url))));
                }
                _ => return None,
            }
        }
        Some(Job {
            remains,
            log: log?,
            sweep,
        })
    }
}

/// The running program, when it is ah (the cleanup is its hidden
/// subcommand, answered wherever the sandbox's agent is:
/// [`crate::channel::agent::answered_here`]), whatever its file is named.
fn ah_executable() -> Result<PathBuf, String> {
    let exe = std::env::current_exe()
        .map_err(|err| format!("the running program cannot be found ({err})"))?;
    match crate::channel::agent::is_answered_here() {
        true => Ok(exe),
        false => Err(format!(
            "the running program {} is not ah (it does not answer 'ah {COMMAND}')",
            exe.display()
        )),
    }
}

/// What a start has under way: its `podman run`, so that a cleanup of the
/// start abandoned meanwhile waits for it ([`Remains::makers`]), and the
/// folders it made for the container, which an abandoned start leaves to
/// that cleanup (a `StartDir`). Clones share it.
#[derive(Debug, Clone, Default)]
pub struct Makers(Arc<Mutex<Making>>);

#[derive(Debug, Default)]
struct Making {
    processes: Vec<Owner>,
    /// Set once the start is abandoned.
    abandoned: bool,
    /// The `StartDir`s let go since.
    left: Vec<PathBuf>,
}

impl Makers {
    /// Adds the running process `pid`.
    pub fn add(&self, pid: u32) {
        let Some(owner) = Owner::of(pid) else {
            return;
        };
        self.lock().processes.push(owner);
    }

    /// Those that still run.
    pub fn running(&self) -> Vec<Owner> {
        self.lock()
            .processes
            .iter()
            .filter(|owner| owner.is_alive())
            .cloned()
            .collect()
    }

    /// Marks the start abandoned (or, with `false`, not: it finished
    /// after all): the folders of the start let go meanwhile are left in
    /// place.
    pub fn abandon(&self, abandoned: bool) {
        self.lock().abandoned = abandoned;
    }

    /// The folders left in place since the start was abandoned.
    pub fn left(&self) -> Vec<PathBuf> {
        self.lock().left.clone()
    }

    /// Whether `dir` must stay (the start was abandoned); noted if so.
    fn keeps(&self, dir: &Path) -> bool {
        let mut making = self.lock();
        if making.abandoned {
            making.left.push(dir.to_path_buf());
        }
        making.abandoned
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Making> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A private temporary folder a start makes for its container (the init's
/// execute-only copy, the proxy's socket folder), removed when dropped —
/// unless the start was abandoned before: its `podman run` may still be
/// mounting it, so it is left for the cleanup, which removes it after the
/// container.
#[derive(Debug)]
pub(crate) struct StartDir {
    dir: Option<tempfile::TempDir>,
    makers: Makers,
}

impl StartDir {
    /// A new folder named `<prefix>…` under the system's temporary folder.
    pub(crate) fn new(prefix: &str, makers: &Makers) -> std::io::Result<StartDir> {
        let dir = tempfile::Builder::new().prefix(prefix).tempdir()?;
        Ok(StartDir {
            dir: Some(dir),
            makers: makers.clone(),
        })
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.as_ref().map_or(Path::new(""), |dir| dir.path())
    }
}

impl Drop for StartDir {
    fn drop(&mut self) {
        if let Some(dir) = self.dir.take()
            && self.makers.keeps(dir.path())
        {
            let _ = dir.keep();
        }
    }
}

/// What one `ah __sandbox-cleanup` does: remove a run's remains, then
/// sweep what dead runs of the project left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    pub remains: Remains,
    /// Where what could not be removed is noted.
    pub log: PathBuf,
    /// The project's ah folder, whose ended runs' folders are swept
    /// (after the containers of dead runs: they may mount them).
    pub sweep: Option<PathBuf>,
}

impl Job {
    /// The job `ah __sandbox-cleanup`'s arguments name (after the
    /// command's name); the usage, in words, when they are wrong.
    pub fn from_args(args: &[OsString]) -> Result<Job, String> {
        Remains::from_args(args).ok_or_else(|| {
            format!(
                "ah {COMMAND} --log FILE [--sweep AH_DIR] [--after PID:START]... \
                 [--container NAME]... [--folder PATH]... (run by ah at the end of a run)"
            )
        })
    }

    /// Does the job within [`LIMIT`], with the terminal's SIGINT and
    /// SIGHUP ignored; `leftovers` finds the folders of dead runs under
    /// the swept folder. What could not be removed goes to the log; the
    /// exit code.
    pub fn run(&self, leftovers: impl FnOnce(&Path) -> Vec<PathBuf>) -> i32 {
        let removed = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime.block_on(async {
                // The terminal's signals are for the ah that started this;
                // with their handlers set they no longer end this process.
                use tokio::signal::unix::{SignalKind, signal};
                let _interrupt = signal(SignalKind::interrupt());
                let _hangup = signal(SignalKind::hangup());
                match tokio::time::timeout(LIMIT, self.work(leftovers)).await {
                    Ok(result) => result,
                    Err(_) => Err(vec![format!(
                        "everything within {} s (it stopped there)",
                        LIMIT.as_secs()
                    )]),
                }
            }),
            Err(err) => Err(vec![format!(
                "anything: the async runtime did not start ({err})"
            )]),
        };
        let Err(failed) = removed else {
            return 0;
        };
        let lines: String = failed
            .iter()
            .map(|why| {
                format!(
                    "{}: the sandbox's cleanup could not remove {why}; the next podman run of \
                     ah in this project removes what is left\n",
                    ah_base::format_rfc3339(std::time::SystemTime::now())
                )
            })
            .collect();
        if let Ok(mut file) = File::options().create(true).append(true).open(&self.log) {
            let _ = file.write_all(lines.as_bytes());
        }
        1
    }

    async fn work(&self, leftovers: impl FnOnce(&Path) -> Vec<PathBuf>) -> Result<(), Vec<String>> {
        self.remains.remove_unbounded().await?;
        let Some(ah_dir) = &self.sweep else {
            return Ok(());
        };
        if let Err(err) = podman::cleanup_stale().await {
            return Err(vec![format!("the containers of dead runs: {err}")]);
        }
        if let Some(engine) = &self.remains.engine
            && let Err(err) = podman::cleanup_stale_on(engine).await
        {
            return Err(vec![format!(
                "the containers of dead runs on {}: {err}",
                engine.name()
            )]);
        }
        // This process does nothing else meanwhile: the walk may block it.
        let folders = leftovers(ah_dir);
        Remains {
            folders,
            ..Remains::default()
        }
        .remove_unbounded()
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_arguments_carry_the_remains() {
        let remains = Remains {
            makers: vec![Owner { pid: 42, start: 7 }],
            containers: vec!["ah-x".into(), "ah-x-ro".into()],
            folders: vec!["/r/overlay-work".into(), "/r/upper".into()],
            lease: None,
            engine: None,
        };
        let args = remains.to_args(Path::new("/r/cleanup.log"));
        let job = Remains::from_args(&args);
        let back = job.as_ref().map(|job| (&job.remains, job.log.as_path()));
        assert_eq!(back, Some((&remains, Path::new("/r/cleanup.log"))));
        assert!(Remains::from_args(&["--bogus".into(), "x".into()]).is_none());
        for engine in [
            Connection::Named("far".into()),
            Connection::Url("ssh://u@h/run/user/1/podman/podman.sock".into()),
            Connection::Default,
        ] {
            let remote = Remains {
                engine: Some(Box::new(engine)),
                ..remains.clone()
            };
            let args = remote.to_args(Path::new("/r/cleanup.log"));
            let back = Remains::from_args(&args).map(|job| job.remains);
            assert_eq!(back, Some(remote));
        }
        assert!(Remains::from_args(&["--container".into()]).is_none());
    }

    #[test]
    fn a_maker_that_ended_is_not_waited_for() {
        let makers = Makers::default();
        makers.add(std::process::id());
        assert_eq!(makers.running().len(), 1);
        let child = std::process::Command::new("true").spawn();
        let Ok(mut child) = child else { return };
        let pid = child.id();
        makers.add(pid);
        let _ = child.wait();
        assert_eq!(makers.running().len(), 1, "the reaped child does not run");
    }
}
