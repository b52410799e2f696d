//! What a remote engine keeps between runs, in podman volumes of its own
//! (labelled `ah.cache`): the init and the agent (`ah-tools-KEY-u1000`,
//! keyed by their bytes, mounted read-only at `/run/ah`), and each baseline
//! a run started from (`ah-base-KEY-u1000`, keyed by the baseline's
//! content, the lower layer of `/work`). A volume is filled once, from a
//! gzip-compressed tar stream sent into a container that only unpacks it
//! as the sandbox's user (`SANDBOX_UID`, the name's last part), and counts
//! only once an empty marker volume (`ah-ok-…`) says it was filled whole: a
//! run on a baseline the engine has already sends nothing. The engine
//! keeps the newest 12 baselines and 4 builds of the tools ([`BASE`],
//! [`TOOLS`]); one a run's container names stays. Nothing of this host's
//! file system is named to the engine.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, OnceLock};

use flate2::Compression;
use flate2::write::GzEncoder;
use sha2::{Digest, Sha256};

use super::super::{Podman, PodmanError, SANDBOX_UID};
use super::Snapshot;

/// The label every volume of the store carries.
pub(crate) const CACHE_LABEL: &str = "ah.cache";

/// A kind of volume the store keeps.
struct Kind {
    /// What its names begin with (the key follows).
    prefix: &'static str,
    /// Its `ah.cache` label.
    label: &'static str,
    /// How many an engine keeps (the oldest unused go first).
    kept: usize,
}

/// The init and the agent, by their bytes (clients of other versions may
/// share the engine).
const TOOLS: Kind = Kind {
    prefix: "ah-tools-",
    label: "tools",
    kept: 4,
};
/// A baseline, by its content.
const BASE: Kind = Kind {
    prefix: "ah-base-",
    label: "base",
    kept: 12,
};

/// How many looks, half a second apart, a fill gives another ah filling
/// the same volume (while its container is there) before it gives up.
const FILL_WAIT_ROUNDS: u32 = 240;

/// How many looks in a row must find no container using a volume being
/// filled before it counts as left half filled (its filler made the volume
/// and has yet to start its container, or is gone).
const LEFTOVER_ROUNDS: u32 = 10;

/// One fill at a time in this process: runs side by side (`ah -N`) on one
/// baseline fill its volume once, the others wait and find it filled.
static FILLING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The store's volumes on the engine, by name, with their folders there
/// and when they were made.
pub(super) struct Volumes(HashMap<String, (String, String)>);

impl Volumes {
    /// Lists the store's volumes.
    pub(super) async fn list(podman: &Podman) -> Result<Volumes, PodmanError> {
        let filter = format!("label={CACHE_LABEL}");
        let listing = answer(
            podman,
            "list the remote engine's volumes",
            "volume ls",
            &[
                "--format",
                "{{.Name}}\t{{.Mountpoint}}\t{{.CreatedAt}}",
                "--filter",
                &filter,
            ],
        )
        .await?;
        Ok(Volumes::parse(&listing))
    }

    /// Reads `volume ls`'s lines: name, folder, when it was made.
    fn parse(listing: &str) -> Volumes {
        Volumes(
            listing
                .lines()
                .filter_map(|line| {
                    let mut fields = line.splitn(3, '\t');
                    let name = fields.next()?.to_string();
                    let folder = fields.next()?.to_string();
                    Some((
                        name,
                        (folder, fields.next().unwrap_or_default().to_string()),
                    ))
                })
                .collect(),
        )
    }

    /// The volumes of `kind` to remove so that, with one more, as many as
    /// it keeps are kept: the oldest first.
    fn beyond_kept(&self, kind: &Kind) -> Vec<&str> {
        let mut bases: Vec<(&str, &str)> = self
            .0
            .iter()
            .filter(|(name, _)| name.starts_with(kind.prefix))
            .map(|(name, (_, created))| (created.as_str(), name.as_str()))
            .collect();
        let extra = (bases.len() + 1).saturating_sub(kind.kept);
        bases.sort();
        bases
            .into_iter()
            .take(extra)
            .map(|(_, name)| name)
            .collect()
    }

    /// The folder of volume `name`, when it was filled whole.
    pub(super) fn filled(&self, name: &str) -> Option<&str> {
        self.0
            .contains_key(&marker(name))
            .then(|| self.0.get(name).map(|(folder, _)| folder.as_str()))
            .flatten()
    }
}

/// How a volume is filled: the image whose `tar` unpacks, and the
/// container's limits.
pub(super) struct Filler<'a> {
    pub(super) podman: &'a Podman,
    pub(super) image: &'a str,
    pub(super) ulimits: super::super::Ulimits,
    /// The run's labels: a filling container this ah left (killed) is
    /// swept as its run's would be.
    pub(super) labels: &'a [(&'static str, String)],
}

/// A volume of the store on the engine.
pub(super) struct Cached {
    /// Its name.
    pub(super) volume: String,
    /// Its folder on the engine's machine.
    pub(super) folder: String,
    /// The bytes sent to fill it (0: the engine had it).
    pub(super) sent: u64,
}

/// The volume holding the init and the agent (made when missing).
pub(super) async fn tools(
    filler: &Filler<'_>,
    volumes: &Volumes,
    agent: &Path,
    init: &Path,
) -> Result<Cached, PodmanError> {
    let (agent, init) = (agent.to_path_buf(), init.to_path_buf());
    let paths = (agent.clone(), init.clone());
    let key = blocking("read the agent and the init", move || {
        tools_key(&paths.0, &paths.1)
    })
    .await?;
    cached(filler, volumes, &TOOLS, &key, move |out| {
        tools_tar(&agent, &init, out)
    })
    .await
}

/// The volume holding `snapshot`'s baseline (sent when the engine lacks
/// it).
pub(super) async fn base(
    filler: &Filler<'_>,
    volumes: &Volumes,
    snapshot: Arc<dyn Snapshot>,
) -> Result<Cached, PodmanError> {
    let keyed = Arc::clone(&snapshot);
    let key = blocking("take the baseline", move || keyed.key()).await?;
    cached(filler, volumes, &BASE, &key, move |out| snapshot.write(out)).await
}

/// The volume of `kind` and `key`, filled with what `write` writes when
/// `volumes` lacks it (the oldest of its kind pruned then).
async fn cached(
    filler: &Filler<'_>,
    volumes: &Volumes,
    kind: &Kind,
    key: &str,
    write: impl FnOnce(&mut dyn Write) -> Result<(), String> + Send + 'static,
) -> Result<Cached, PodmanError> {
    let volume = volume_name(kind, key);
    if let Some(folder) = volumes.filled(&volume) {
        return Ok(Cached {
            folder: folder.to_string(),
            volume,
            sent: 0,
        });
    }
    // Another run of this process may fill it meanwhile: `fill` looks.
    let _filling = FILLING.lock().await;
    let sent = fill(filler, &volume, kind.label, write).await?;
    if sent > 0 {
        prune(filler.podman, volumes, kind).await;
    }
    let folder = Volumes::list(filler.podman)
        .await?
        .filled(&volume)
        .map(str::to_string)
        .ok_or_else(|| PodmanError::Command {
            what: "volume ls",
            stderr: format!("the volume {volume} is not there after it was filled"),
        })?;
    Ok(Cached {
        volume,
        folder,
        sent,
    })
}

/// Whether volumes `names` are there and filled whole (their markers are
/// there).
pub(super) async fn still_filled(podman: &Podman, names: &[&str]) -> Result<bool, PodmanError> {
    let volumes = Volumes::list(podman).await?;
    Ok(names.iter().all(|name| volumes.filled(name).is_some()))
}

/// Makes volume `name` (of `kind`) anew, unpacks into it what `write`
/// writes as a tar stream, then makes its marker; the bytes sent.
async fn fill(
    filler: &Filler<'_>,
    name: &str,
    kind: &str,
    write: impl FnOnce(&mut dyn Write) -> Result<(), String> + Send + 'static,
) -> Result<u64, PodmanError> {
    let podman = filler.podman;
    // The one whose `volume create` makes it fills it; another ah filling
    // it now (its marker comes when it is done) is waited for while its
    // filling container is there. A volume is never removed before it is
    // made again here: another ah's `podman run` would then make one of
    // that name itself, without the label that lists it. One left half
    // filled by a killed ah is removed, and made at the next look; never
    // with `-f`, which would remove the containers of the runs using it.
    let label = format!("--label={CACHE_LABEL}={kind}");
    let began = std::time::Instant::now();
    let mut unused = 0;
    let mut made = false;
    for _ in 0..FILL_WAIT_ROUNDS {
        let now = Volumes::list(podman).await?;
        if now.filled(name).is_some() {
            return Ok(0);
        }
        if !now.0.contains_key(name) {
            if create(podman, &label, name).await? {
                made = true;
                break;
            }
            // There but not listed: another ah made it a moment ago (the
            // next look lists it), or podman made it, empty and without
            // the label, for a run's container that named it after it was
            // pruned. That one is nobody's: removed, and made here.
            if unlabelled(podman, name).await? {
                let _ = volume(podman, &["rm", name]).await;
                continue;
            }
            unused = 0;
        } else {
            // A filler makes the volume, then its container: a volume no
            // container has used for several looks is a gone filler's.
            unused = match used(podman, name).await? {
                true => 0,
                false => unused + 1,
            };
            if unused >= LEFTOVER_ROUNDS {
                let _ = volume(podman, &["rm", name]).await;
                unused = 0;
                continue;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    if !made {
        return Err(PodmanError::Remote(format!(
            "another ah has been filling the engine's volume {name} for {} s; run again once \
             it is done (or remove the volume if no ah is running: podman --remote volume rm \
             {name})",
            began.elapsed().as_secs()
        )));
    }
    let sent = match unpack(filler, name, write).await {
        Ok(sent) => sent,
        Err(err) => {
            let _ = volume(podman, &["rm", name]).await;
            return Err(err);
        }
    };
    let label = format!("--label={CACHE_LABEL}=marker");
    volume(podman, &["create", &label, &marker(name)]).await?;
    Ok(sent)
}

/// Unpacks `write`'s tar stream into volume `name` with a container of
/// the filler's image; the bytes sent. The stream goes gzip-compressed: a
/// tree of small files is mostly tar's headers and padding.
async fn unpack(
    filler: &Filler<'_>,
    name: &str,
    write: impl FnOnce(&mut dyn Write) -> Result<(), String> + Send + 'static,
) -> Result<u64, PodmanError> {
    let podman = filler.podman;
    let super::super::Ulimits { nofile, nproc } = filler.ulimits;
    let mut command = podman.std_command();
    command
        .args([
            "run",
            "--rm",
            "-i",
            "--pull=never",
            "--network=none",
            "--cap-drop=all",
            "--security-opt=no-new-privileges",
            "--read-only",
            "--http-proxy=false",
            "--unsetenv-all",
        ])
        .arg(format!("--ulimit=nofile={nofile}:{nofile}"))
        .arg(format!("--ulimit=nproc={nproc}:{nproc}"))
        .arg(format!("--env=PATH={}", super::super::CONTAINER_PATH))
        .args(
            filler
                .labels
                .iter()
                .map(|(key, value)| format!("--label={key}={value}")),
        )
        // As the sandbox's user, into a volume made its own (`U`): the
        // files are the user's whether the engine is rootless or not.
        .arg(format!("--user={SANDBOX_UID}:{SANDBOX_UID}"))
        .arg(format!("--volume={name}:/fill:U"))
        .args([
            filler.image,
            "tar",
            "-x",
            "-z",
            "-p",
            "--no-same-owner",
            "-f",
            "-",
            "-C",
            "/fill",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    blocking("send the files to the remote engine", move || {
        let mut child = command.spawn().map_err(|e| format!("podman run: {e}"))?;
        let mut stdin = child
            .stdin
            .take()
            .ok_or("podman run started without a pipe")?;
        let mut counted = Counted {
            inner: &mut stdin,
            bytes: 0,
        };
        let mut gzip = GzEncoder::new(&mut counted, Compression::fast());
        let written = write(&mut gzip).and_then(|()| {
            gzip.finish()
                .map(drop)
                .map_err(|e| format!("compressing the files: {e}"))
        });
        let sent = counted.bytes;
        drop(stdin);
        let mut said = String::new();
        if let Some(mut stderr) = child.stderr.take() {
            let _ = stderr.by_ref().take(4096).read_to_string(&mut said);
        }
        let status = child.wait().map_err(|e| format!("podman run: {e}"))?;
        match (status.success(), written) {
            (true, Ok(())) => Ok(sent),
            (false, _) => Err(format!(
                "unpacking failed (the sandbox image needs tar and gzip): {}",
                said.trim()
            )),
            (true, Err(why)) => Err(why),
        }
    })
    .await
}

/// Removes the oldest volumes of `kind` beyond those it keeps (by when
/// `volumes` says they were made). The marker goes first: a run that
/// finds the markers of its volumes after its container was made knows
/// they were not removed before (see `remote::start`). One a container
/// uses stays (its containers name it), and gets its marker back.
async fn prune(podman: &Podman, volumes: &Volumes, kind: &Kind) {
    for name in volumes.beyond_kept(kind) {
        // One without a marker was left half filled (or is being filled:
        // its container keeps it).
        let whole = volumes.0.contains_key(&marker(name));
        if whole && volume(podman, &["rm", &marker(name)]).await.is_err() {
            continue;
        }
        if volume(podman, &["rm", name]).await.is_err() && whole {
            let label = format!("--label={CACHE_LABEL}=marker");
            let _ = volume(podman, &["create", &label, &marker(name)]).await;
        }
    }
}

/// Whether volume `name` is there without the store's label.
async fn unlabelled(podman: &Podman, name: &str) -> Result<bool, PodmanError> {
    let format = format!("{{{{index .Labels \"{CACHE_LABEL}\"}}}}");
    let args = ["--format", &format, name];
    match answer(podman, "run podman volume", "volume inspect", &args).await {
        Ok(label) => Ok(label.trim().is_empty()),
        Err(PodmanError::Command { .. }) => Ok(false),
        Err(err) => Err(err),
    }
}

/// Whether a container (one filling it, or a run's) names volume `name`.
async fn used(podman: &Podman, name: &str) -> Result<bool, PodmanError> {
    let filter = format!("volume={name}");
    let ids = answer(
        podman,
        "list the remote engine's containers",
        "ps",
        &["-a", "-q", "--filter", &filter],
    )
    .await?;
    Ok(!ids.trim().is_empty())
}

/// What `podman COMMAND ARGS` (which `what` says in words) printed; its
/// error when it failed.
async fn answer(
    podman: &Podman,
    what: &'static str,
    command: &'static str,
    args: &[&str],
) -> Result<String, PodmanError> {
    let output = podman
        .command()
        .args(command.split(' '))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|source| PodmanError::Io { what, source })?;
    match output.status.success() {
        true => Ok(String::from_utf8_lossy(&output.stdout).into_owned()),
        false => Err(PodmanError::Command {
            what: command,
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        }),
    }
}

/// The volume of `kind` and `key`. Its files belong to the sandbox's user
/// (the volume's last part): a volume whose files another layout owns
/// (made by an earlier ah) is never mounted, only pruned in time.
fn volume_name(kind: &Kind, key: &str) -> String {
    format!("{}{key}-u{SANDBOX_UID}", kind.prefix)
}

/// The marker volume that says `name` was filled whole.
fn marker(name: &str) -> String {
    format!("ah-ok-{name}")
}

/// Makes volume `name` with `label`: whether this call made it (not when
/// it was there already).
async fn create(podman: &Podman, label: &str, name: &str) -> Result<bool, PodmanError> {
    let made = answer(podman, "run podman volume", "volume create", &[label, name]).await;
    match made {
        Ok(_) => Ok(true),
        Err(PodmanError::Command { stderr, .. }) if stderr.contains("already exists") => Ok(false),
        Err(err) => Err(err),
    }
}

/// `podman volume ARGS`; "already exists" is no error.
async fn volume(podman: &Podman, args: &[&str]) -> Result<(), PodmanError> {
    match answer(podman, "run podman volume", "volume", args).await {
        Err(PodmanError::Command { stderr, .. }) if stderr.contains("already exists") => Ok(()),
        done => done.map(drop),
    }
}

/// A key of the init's and the agent's bytes (worked out once per
/// process: the files do not change under a running ah).
fn tools_key(agent: &Path, init: &Path) -> Result<String, String> {
    static KEY: OnceLock<String> = OnceLock::new();
    if let Some(key) = KEY.get() {
        return Ok(key.clone());
    }
    let mut hash = Sha256::new();
    for path in [init, agent] {
        let mut file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        std::io::copy(&mut file, &mut hash).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let key: String = hash
        .finalize()
        .iter()
        .take(12)
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok(KEY.get_or_init(|| key).clone())
}

/// Writes the tar stream of the init and the agent, execute-only (a
/// command can neither read nor trace them).
fn tools_tar(agent: &Path, init: &Path, out: &mut dyn Write) -> Result<(), String> {
    let mut builder = tar::Builder::new(out);
    for (name, path) in [("init", init), ("agent", agent)] {
        let mut file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let size = file.metadata().map_err(|e| e.to_string())?.len();
        let mut header = tar::Header::new_gnu();
        header.set_size(size);
        header.set_mode(0o111);
        header.set_entry_type(tar::EntryType::Regular);
        builder
            .append_data(&mut header, name, &mut file)
            .map_err(|e| e.to_string())?;
    }
    builder.finish().map_err(|e| e.to_string())
}

/// A writer that counts what went through it.
struct Counted<'a> {
    inner: &'a mut dyn Write,
    bytes: u64,
}

impl Write for Counted<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Runs `work` on a thread where it may block.
async fn blocking<T: Send + 'static>(
    what: &'static str,
    work: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, PodmanError> {
    match tokio::task::spawn_blocking(work).await {
        Ok(Ok(done)) => Ok(done),
        Ok(Err(why)) => Err(PodmanError::Remote(format!("could not {what}: {why}"))),
        Err(err) => Err(PodmanError::Remote(format!("could not {what}: {err}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_baselines_beyond_those_kept_go_first_and_a_marker_says_filled() {
        let mut listing = String::new();
        // Made a minute apart, listed in no order; tools and markers are
        // no baselines.
        for minute in [7, 2, 11, 0, 5, 9, 1, 12, 3, 10, 4, 8, 6] {
            listing.push_str(&format!(
                "ah-base-{minute}\t/v/ah-base-{minute}/_data\t2026-11-27 13:{minute:02}:00.5 +0000 UTC\n"
            ));
        }
        listing.push_str("ah-tools-k\t/v/ah-tools-k/_data\t2026-11-27 12:00:00 +0000 UTC\n");
        listing
            .push_str("ah-ok-ah-base-3\t/v/ah-ok-ah-base-3/_data\t2026-11-27 12:00:00 +0000 UTC\n");
        let volumes = Volumes::parse(&listing);
        // 13 baselines and the one being filled: 2 beyond the 12 kept.
        assert_eq!(volumes.beyond_kept(&BASE), ["ah-base-0", "ah-base-1"]);
        assert_eq!(volumes.beyond_kept(&TOOLS), [""; 0]);
        assert_eq!(volumes.filled("ah-base-3"), Some("/v/ah-base-3/_data"));
        assert_eq!(volumes.filled("ah-base-4"), None, "no marker: not whole");
    }
}
