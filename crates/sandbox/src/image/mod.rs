//! The sandbox image `localhost/ah-sandbox:latest`: whether it exists, and
//! building it. Where a container registry is reachable the image comes from
//! `containers/Containerfile` and `podman build`; elsewhere (no registry, only
//! a Debian mirror) from a Debian rootfs (debootstrap as root, mmdebstrap
//! without root) and `podman import`, with the same packages (see `offline`).
//!
//! Choosing the way: a `podman pull` against an unreachable registry hangs
//! or fails slowly, so `Auto` decides with a quick check instead: the base
//! image already in local storage means `podman build --pull=never`;
//! otherwise the registry host must resolve (2 s) and accept a TCP
//! connection (3 s). Anything else builds offline, which works wherever apt
//! works. Behind an HTTPS proxy the check can say "unreachable" although
//! podman would get through: choose `Registry` explicitly there.
//!
//! A project's own image (its toolchain on top of the sandbox image) is built
//! from the project's Containerfile with `podman build` ([`BuildOptions`]'s
//! `containerfile`), and gets the same copy of its root as the default image
//! where rootless storage is vfs.
//!
//! A build reports what it is doing as [`Progress`]: the phase it enters,
//! notes a person should read, and every line the build tools print, so the
//! caller can show a phase and keep the hundreds of output lines in a log.

mod offline;
mod send;
mod stream;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tokio::net::TcpStream;

use super::podman::{self, PodmanError};

pub use super::podman::DEFAULT_IMAGE;
pub use send::{Sent, send_image};

/// The Containerfile, built into ah so `ah image build` needs no checkout.
pub const CONTAINERFILE: &str = include_str!("../../../../containers/Containerfile");

/// The Containerfile's base image.
pub const BASE_IMAGE: &str = "docker.io/library/debian:bookworm-slim";

/// The host that serves [`BASE_IMAGE`].
const REGISTRY_HOST: &str = "registry-1.docker.io";

/// Debian release of the image.
pub const SUITE: &str = "bookworm";

/// Packages in the image, whichever way it is built, without their
/// recommends; the offline build's `--variant=minbase` adds Debian's
/// required set (dash, sed, grep, findutils, diffutils, tar, gzip,
/// util-linux, e2fsprogs, apt, …). The README's image section gives the
/// reasons and the sizes.
pub const PACKAGES: &[&str] = &[
    // Every command runs with `bash -c`.
    "bash",
    // sleep, timeout, id, env, …: required already, named to say it is relied on.
    "coreutils",
    // Agents diff and commit; it brings perl, which git needs.
    "git",
    "ripgrep",
    "python3",
    "curl",
    "ca-certificates",
    // ps, pgrep, top.
    "procps",
    // A C toolchain: cc, make, libc's headers and start files. Not
    // build-essential, whose g++ and dpkg-dev add ~60 MB for C++ and Debian
    // packaging only.
    "gcc",
    "make",
    "libc6-dev",
    // Applies the diffs models write (`patch -p1`); came with dpkg-dev.
    "patch",
];

/// dpkg's path filters in the image: no documentation but each package's
/// copyright, no manual or info pages, no translated messages (~95 MB of
/// the image built with build-essential, read by no command an agent
/// runs). They stay in `/etc/dpkg/dpkg.cfg.d/`, so what a project's image
/// installs on top is filtered too.
pub const DPKG_FILTERS: &[&str] = &[
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/info/*",
    "path-exclude=/usr/share/locale/*",
    "path-include=/usr/share/locale/locale.alias",
    "path-exclude=/usr/share/lintian/*",
];

/// The label that names the recipe an image of ah's was built from.
pub const RECIPE_LABEL: &str = "ah.recipe";

/// This ah's recipe for its image: a hash of the Containerfile, the
/// package list and the dpkg filters (FNV-1a, 64 bits, in hex). An image
/// labelled with another was built by another ah: `ah image build` makes
/// it anew.
pub fn recipe() -> String {
    let parts = [CONTAINERFILE]
        .into_iter()
        .chain(PACKAGES.iter().copied())
        .chain(DPKG_FILTERS.iter().copied());
    recipe_of(parts)
}

/// The hash of `parts`, each ended by a NUL so that where one ends counts.
fn recipe_of<'a>(parts: impl IntoIterator<Item = &'a str>) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for byte in part.bytes().chain([0]) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{hash:016x}")
}

/// Whether `image` is there and was built from this ah's [`recipe`]
/// (`None`: it is not there).
pub async fn image_is_current(image: &str) -> Result<Option<bool>, ImageError> {
    let podman = podman::Podman::find()?;
    if !podman::image_exists(&podman, image).await? {
        return Ok(None);
    }
    let format = format!("{{{{index .Labels \"{RECIPE_LABEL}\"}}}}");
    let output = podman
        .command()
        .args(["image", "inspect", "--format", &format, image])
        .output()
        .await
        .map_err(|source| ImageError::Io {
            what: "ask podman for the image's labels",
            source,
        })?;
    let label = String::from_utf8_lossy(&output.stdout);
    Ok(Some(output.status.success() && label.trim() == recipe()))
}

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error(transparent)]
    Podman(#[from] PodmanError),
    #[error(
        "debootstrap not found: install it (apt-get install debootstrap) to build the image offline"
    )]
    DebootstrapMissing,
    #[error(
        "mmdebstrap not found: without root, the image is built offline with mmdebstrap \
         (apt-get install mmdebstrap; your user needs subordinate ids in /etc/subuid and \
         /etc/subgid, as rootless podman does), or build it from a registry where one is \
         reachable"
    )]
    MmdebstrapMissing,
    #[error("{} is not a file: give --file the path of a Containerfile", .0.display())]
    NoContainerfile(PathBuf),
    #[error("could not {what}: {source}")]
    Io {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("{step} failed:\n{output}\n{fix}")]
    Step {
        step: &'static str,
        output: String,
        fix: &'static str,
    },
}

/// Where the image comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageSource {
    /// Decide by a quick reachability check (see the module doc).
    Auto,
    /// `podman build` from the Containerfile.
    Registry,
    /// debootstrap (as root) or mmdebstrap (without root) from the host's
    /// Debian mirror, then `podman import`.
    Offline,
}

#[derive(Debug, Clone)]
pub struct BuildOptions {
    pub image: String,
    pub source: ImageSource,
    /// Debian mirror for the offline build; default: the host's apt sources.
    pub mirror: Option<String>,
    /// A Containerfile to build instead of ah's own (`source` does not
    /// apply): `podman build` with the file's folder as the context.
    pub containerfile: Option<PathBuf>,
}

impl Default for BuildOptions {
    fn default() -> BuildOptions {
        BuildOptions {
            image: DEFAULT_IMAGE.to_string(),
            source: ImageSource::Auto,
            mirror: None,
            containerfile: None,
        }
    }
}

/// What a build is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Deciding which way to build ([`ImageSource::Auto`]).
    CheckRegistry,
    /// `podman build` from the Containerfile.
    PodmanBuild,
    /// debootstrap of the rootfs (offline, as root).
    Debootstrap,
    /// mmdebstrap of the rootfs in a user namespace (offline, without root).
    Mmdebstrap,
    /// `tar | podman import` of the rootfs (offline).
    Import,
}

impl Phase {
    /// What the phase is, in a few words.
    pub fn name(self) -> &'static str {
        match self {
            Phase::CheckRegistry => "checking whether a container registry is reachable",
            Phase::PodmanBuild => "podman build",
            Phase::Debootstrap => "debootstrap",
            Phase::Mmdebstrap => "mmdebstrap",
            Phase::Import => "podman import",
        }
    }

    /// Which phase of its way this is, and of how many (none for the
    /// check, which comes before a way is chosen).
    pub fn step(self) -> Option<(u8, u8)> {
        match self {
            Phase::CheckRegistry => None,
            Phase::PodmanBuild => Some((1, 1)),
            Phase::Debootstrap | Phase::Mmdebstrap => Some((1, 2)),
            Phase::Import => Some((2, 2)),
        }
    }
}

/// What a build reports as it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress<'a> {
    /// A phase starts.
    Phase(Phase),
    /// A line for a person: what was chosen, where from, how it ended.
    Note(&'a str),
    /// One line a build tool printed (stdout or stderr).
    Output(&'a str),
}

/// The callback a build reports to.
pub type OnProgress<'p> = dyn FnMut(Progress<'_>) + Send + 'p;

/// What a build did.
#[derive(Debug, Clone)]
pub struct BuildReport {
    /// `Registry` (any `podman build`, a given Containerfile's too) or
    /// `Offline`: the way actually taken.
    pub source: ImageSource,
    pub duration: Duration,
}

/// Whether `image` is in local podman storage; what podman said of it is
/// kept for the sandboxes started in the next moments.
pub async fn image_exists(image: &str) -> Result<bool, ImageError> {
    let podman = podman::Podman::find()?;
    Ok(podman::image_known(&podman, image).await?)
}

/// Builds the image, reporting its phases and output as it goes.
pub async fn build_image(
    opts: &BuildOptions,
    progress: &mut OnProgress<'_>,
) -> Result<BuildReport, ImageError> {
    let podman = podman::Podman::find()?;
    let started = Instant::now();
    let source = match opts.source {
        _ if opts.containerfile.is_some() => ImageSource::Registry,
        ImageSource::Auto => {
            progress(Progress::Phase(Phase::CheckRegistry));
            let base_local = podman::image_exists(&podman, BASE_IMAGE).await?;
            if base_local || registry_reachable().await {
                ImageSource::Registry
            } else {
                progress(Progress::Note(
                    "no registry reachable: building offline from the Debian mirror",
                ));
                ImageSource::Offline
            }
        }
        chosen => chosen,
    };
    match (&opts.containerfile, source) {
        (Some(file), _) => build_from_file(&podman, &opts.image, file, progress).await?,
        (None, ImageSource::Offline) => offline::build(&podman, opts, progress).await?,
        (None, _) => build_from_registry(&podman, &opts.image, progress).await?,
    }
    let duration = started.elapsed();
    progress(Progress::Note(&format!(
        "built {} in {:.1} s",
        opts.image,
        duration.as_secs_f64()
    )));
    copy_root(&podman, &opts.image, progress).await;
    Ok(BuildReport { source, duration })
}

/// Rootless on storage that copies the image into every container (`vfs`):
/// makes the copy of the image's root that runs stand on
/// (`podman::rootfs`) now, so that the first run does not wait for it.
/// What fails here the first run tries again, so it is only said.
async fn copy_root(podman: &podman::Podman, image: &str, progress: &mut OnProgress<'_>) {
    if !podman::rootless() {
        return;
    }
    let facts = match podman::rootfs::inspect(podman, image).await {
        Ok(Some(facts)) if facts.copied_per_container() => facts,
        _ => return,
    };
    progress(Progress::Note(
        "copying the image's root file system for runs (podman's storage here is vfs; \
         once per image)",
    ));
    if let Err(why) = podman::rootfs::prepare(podman, &facts.id).await {
        progress(Progress::Note(&format!(
            "the copy could not be made ({why}); the first run tries again"
        )));
    }
}

/// The quick check: the registry host resolves and accepts a connection.
async fn registry_reachable() -> bool {
    let lookup = tokio::time::timeout(
        Duration::from_secs(2),
        tokio::net::lookup_host((REGISTRY_HOST, 443)),
    )
    .await;
    let Ok(Ok(mut addrs)) = lookup else {
        return false;
    };
    let Some(addr) = addrs.next() else {
        return false;
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(3), TcpStream::connect(addr)).await,
        Ok(Ok(_))
    )
}

async fn build_from_registry(
    podman: &podman::Podman,
    image: &str,
    progress: &mut OnProgress<'_>,
) -> Result<(), ImageError> {
    progress(Progress::Phase(Phase::PodmanBuild));
    let context = tempfile::tempdir().map_err(|source| ImageError::Io {
        what: "create a build directory",
        source,
    })?;
    let file = context.path().join("Containerfile");
    std::fs::write(&file, CONTAINERFILE).map_err(|source| ImageError::Io {
        what: "write the Containerfile",
        source,
    })?;
    let mut cmd = podman.command();
    cmd.args(["build", "--pull=missing", "-t", image])
        .arg(format!("--label={RECIPE_LABEL}={}", recipe()))
        .arg("-f")
        .arg(&file)
        .arg(context.path());
    stream::run(
        cmd,
        "podman build",
        "if no registry is reachable, build offline instead (ah image build --offline)",
        progress,
    )
    .await
}

/// `podman build` of the caller's Containerfile, its folder the context.
async fn build_from_file(
    podman: &podman::Podman,
    image: &str,
    file: &Path,
    progress: &mut OnProgress<'_>,
) -> Result<(), ImageError> {
    // Podman runs in a folder of its own: the paths it is given are absolute.
    let file = std::path::absolute(file)
        .ok()
        .filter(|file| file.is_file())
        .ok_or_else(|| ImageError::NoContainerfile(file.to_path_buf()))?;
    let context = file.parent().unwrap_or(Path::new("/"));
    progress(Progress::Phase(Phase::PodmanBuild));
    let mut cmd = podman.command();
    cmd.args(["build", "-t", image, "-f"])
        .arg(&file)
        .arg(context);
    stream::run(
        cmd,
        "podman build",
        "fix what podman says above; a Containerfile FROM localhost/ah-sandbox:latest needs that \
         image built first (ah image build)",
        progress,
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recipe_changes_with_what_the_image_is_made_from() {
        let recipe = recipe();
        assert_eq!(recipe.len(), 16);
        assert!(recipe.bytes().all(|b| b.is_ascii_hexdigit()));
        let packages = |extra: &'static str| {
            let mut parts = vec![CONTAINERFILE];
            parts.extend(PACKAGES);
            parts.push(extra);
            parts.extend(DPKG_FILTERS);
            recipe_of(parts)
        };
        assert_ne!(packages("g++"), recipe, "a package more is another recipe");
        assert_ne!(recipe_of(["ab", "c"]), recipe_of(["a", "bc"]));
        assert_eq!(recipe_of(["a", "bc"]), recipe_of(["a", "bc"]));
    }

    #[test]
    fn the_containerfile_installs_the_offline_packages_from_the_base_image() {
        assert!(CONTAINERFILE.contains(&format!("FROM {BASE_IMAGE}")));
        let install = CONTAINERFILE
            .split("--no-install-recommends")
            .nth(1)
            .and_then(|rest| rest.split("&&").next())
            .unwrap_or("");
        let listed: Vec<&str> = install.split_whitespace().filter(|w| *w != "\\").collect();
        assert_eq!(listed, PACKAGES);
        assert!(CONTAINERFILE.contains(r#"CMD ["sleep", "infinity"]"#));
    }

    #[test]
    fn the_containerfile_writes_the_offline_dpkg_filters() {
        let written = CONTAINERFILE
            .split("printf '%s\\n'")
            .nth(1)
            .and_then(|rest| rest.split("> /etc/dpkg/dpkg.cfg.d/").next())
            .unwrap_or("");
        let rules: Vec<&str> = written
            .split_whitespace()
            .filter(|w| *w != "\\")
            .map(|w| w.trim_matches('\''))
            .collect();
        assert_eq!(rules, DPKG_FILTERS);
    }
}
