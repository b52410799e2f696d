//! A run's root file system where podman's storage would copy the image.
//!
//! With the `vfs` storage driver (rootless podman where neither native
//! overlay nor fuse-overlayfs is set up) every container podman creates
//! starts with a full copy of its image: ~800 MB as podman counts it, seconds before a
//! run's first command, and as long again to remove. There, ah copies the
//! image's root file system once per image into the user's cache
//! ([`cache_root`]) and starts each container on an overlay of it (`podman
//! run --rootfs DIR:O`): the copy is the overlay's lower layer only, never
//! written; what a container writes goes to an upper folder podman makes
//! for the container and removes with it (and the root is mounted
//! read-only besides).
//!
//! The copy is owned as a run's container must see it: podman creates a
//! container from the image in the run's user namespace
//! (`--userns=keep-id`), whose storage then holds the tree with those
//! owners; that tree is copied with its owners (`cp -a` inside `podman
//! unshare`) into a folder beside the entry, and renamed into place only
//! when complete, so a half-made copy is never used. Builders take turns
//! under `build.lock` (a second ah waits for the first one's copy); each
//! run holds a shared lock on its entry's `<id>.lock` while its container
//! lives; a build removes what a killed build left and the copies of
//! images gone from podman's storage that no run holds. The key is the
//! image's id, so a rebuilt image gets a copy of its own (made by `ah image
//! build`, else at its first run).
//!
//! Where storage shares the image's layers between containers (`overlay`),
//! and for rootful podman, containers start from the image itself.

use std::fs::{self, File};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use rustix::fs::FlockOperation;

use super::{Podman, PodmanError};

/// The storage driver that copies a whole image into each new container.
const COPYING_DRIVER: &str = "vfs";

/// A folder that holds a copy being made (`.building-<id>`).
const BUILDING: &str = ".building-";

/// What a run needs to know of its image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageFacts {
    /// The image's id (64 hex digits): the cache's key.
    pub id: String,
    /// Podman's storage driver for this user (`overlay`, `vfs`, …).
    pub driver: String,
    /// The image's size in bytes, as podman counts it.
    pub size: u64,
}

impl ImageFacts {
    /// Whether each container podman creates from the image starts with a
    /// copy of all of it.
    pub fn copied_per_container(&self) -> bool {
        self.driver == COPYING_DRIVER
    }
}

/// The facts of `image`, `None` when it is not in the user's storage.
pub async fn inspect(podman: &Podman, image: &str) -> Result<Option<ImageFacts>, PodmanError> {
    let output = podman
        .command()
        .args([
            "image",
            "inspect",
            "--format",
            "{{.Id}} {{.GraphDriver.Name}} {{.Size}}",
            image,
        ])
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|source| PodmanError::Io {
            what: "run podman image inspect",
            source,
        })?;
    let stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
    if !output.status.success() {
        // A name podman cannot even read names no image it has.
        let missing = ["image not known", "no such", "invalid reference format"];
        return if missing.iter().any(|said| stderr.contains(said)) {
            Ok(None)
        } else {
            Err(PodmanError::Command {
                what: "image inspect",
                stderr,
            })
        };
    }
    let text = String::from_utf8_lossy(&output.stdout);
    parse_facts(&text).map(Some).ok_or(PodmanError::Command {
        what: "image inspect",
        stderr: format!("unexpected answer {:?}", text.trim()),
    })
}

/// `ID DRIVER SIZE`, as [`inspect`] asks podman for them.
fn parse_facts(text: &str) -> Option<ImageFacts> {
    let mut words = text.split_whitespace();
    let (id, driver, size) = (words.next()?, words.next()?, words.next()?);
    (is_image_id(id) && words.next().is_none()).then(|| ImageFacts {
        id: id.to_string(),
        driver: driver.to_string(),
        size: size.parse().unwrap_or(0),
    })
}

/// 64 lowercase hex digits: an id that is also a safe file name.
fn is_image_id(id: &str) -> bool {
    id.len() == 64 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Where the copies live: `$XDG_CACHE_HOME/ah/rootfs`, else
/// `~/.cache/ah/rootfs` (`None` when neither variable is an absolute path).
pub fn cache_root() -> Option<PathBuf> {
    let absolute = |name| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|path| path.is_absolute())
    };
    absolute("XDG_CACHE_HOME")
        .map(|cache| cache.join("ah"))
        .or_else(|| absolute("HOME").map(|home| home.join(".cache").join("ah")))
        .map(|ah| ah.join("rootfs"))
}

/// A copy of an image's root file system that a container may stand on:
/// while this lives, no build removes it.
#[derive(Debug)]
pub struct Rootfs {
    path: PathBuf,
    /// Held shared while a container stands on the copy.
    lease: File,
}

impl Rootfs {
    /// The copy, to give `podman run --rootfs` as the overlay's lower layer.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The lock that keeps the copy, for whoever removes the container
    /// after this is dropped (`None` when it cannot be duplicated: the
    /// copy is then kept only while this lives).
    pub fn lease(&self) -> Option<crate::cleanup::Lease> {
        let held = self.lease.try_clone().ok()?;
        Some(crate::cleanup::Lease(std::sync::Arc::new(held)))
    }
}

/// The copy of the image `id`, made first if there is none (waiting for
/// another ah that is making it). The error says what failed.
pub async fn prepare(podman: &Podman, id: &str) -> Result<Rootfs, String> {
    let podman = podman.clone();
    let id = id.to_string();
    tokio::task::spawn_blocking(move || prepare_blocking(&podman, &id))
        .await
        .map_err(|err| format!("the copy's task failed ({err})"))?
}

fn prepare_blocking(podman: &Podman, id: &str) -> Result<Rootfs, String> {
    if !is_image_id(id) {
        return Err(format!("{id:?} is not an image id"));
    }
    let root = cache_root().ok_or("neither XDG_CACHE_HOME nor HOME is an absolute path")?;
    let text = root.as_os_str().as_encoded_bytes();
    if text.contains(&b':') || text.contains(&b',') {
        return Err(format!(
            "{} cannot be given to podman (':' or ',' in the path): set XDG_CACHE_HOME",
            root.display()
        ));
    }
    private_dir(&root)?;
    let lease = lock(&root.join(format!("{id}.lock")), FlockOperation::LockShared)?;
    let path = root.join(id);
    if !is_dir(&path) {
        let _turn = lock(&root.join("build.lock"), FlockOperation::LockExclusive)?;
        if !is_dir(&path) {
            build(podman, &root, id)?;
            prune(podman, &root, id, &|other| image_gone(podman, other));
        }
    }
    Ok(Rootfs { path, lease })
}

/// Makes `root` (and its parents) a folder only the user can enter: made
/// with mode 0700, or checked to be the user's own and set to it.
fn private_dir(root: &Path) -> Result<(), String> {
    if let Some(parent) = root.parent() {
        fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    match fs::DirBuilder::new().mode(0o700).create(root) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("cannot create {}: {e}", root.display())),
    }
    let meta = fs::symlink_metadata(root).map_err(|e| format!("{}: {e}", root.display()))?;
    if !meta.is_dir() || meta.uid() != rustix::process::geteuid().as_raw() {
        return Err(format!(
            "{} is not a folder of yours: remove it and run again",
            root.display()
        ));
    }
    if meta.mode() & 0o077 != 0 {
        fs::set_permissions(root, fs::Permissions::from_mode(0o700))
            .map_err(|e| format!("cannot make {} private: {e}", root.display()))?;
    }
    Ok(())
}

fn is_dir(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|meta| meta.is_dir())
}

/// The lock file `path` (made if missing), locked as `how`. The lock is
/// taken on the file that is at `path` once it is held: a file a build
/// removed while this waited is tried again.
fn lock(path: &Path, how: FlockOperation) -> Result<File, String> {
    let fail = |e: std::io::Error| format!("cannot lock {}: {e}", path.display());
    loop {
        let file = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(fail)?;
        rustix::fs::flock(&file, how).map_err(|e| fail(e.into()))?;
        let held = file.metadata().map_err(fail)?;
        match fs::metadata(path) {
            Ok(now) if now.ino() == held.ino() && now.dev() == held.dev() => return Ok(file),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(fail(e)),
        }
    }
}

/// Copies the image `id` to `root/id`, through a folder renamed into place
/// when complete.
fn build(podman: &Podman, root: &Path, id: &str) -> Result<(), String> {
    for left in entries(root).filter(|name| name.starts_with(BUILDING)) {
        remove_tree(podman, &root.join(left))?;
    }
    let staging = root.join(format!("{BUILDING}{id}"));
    let container = format!("ah-rootfs-{}", &id[..12]);
    run(
        podman.std_command().args(["rm", "-f", "-i", &container]),
        "rm",
    )?;
    run(
        podman.std_command().args([
            "create",
            "--pull=never",
            "--network=none",
            "--userns=keep-id",
            "--name",
            &container,
            id,
            "true",
        ]),
        "create",
    )?;
    let copied = run(
        podman
            .std_command()
            .args(["unshare", "sh", "-c", COPY_SCRIPT, "sh", &container])
            .arg(&staging)
            .arg(podman.path()),
        "unshare cp",
    );
    let removed = run(podman.std_command().args(["rm", "-f", &container]), "rm");
    copied.and(removed)?;
    fs::rename(&staging, root.join(id))
        .map_err(|e| format!("cannot rename {} into place: {e}", staging.display()))
}

/// Run in `podman unshare` with the container's name, the staging folder
/// and podman: copies the container's root, owners and all, and unmounts
/// it.
const COPY_SCRIPT: &str = "set -e; root=$(\"$3\" mount \"$1\"); cp -a -- \"$root\" \"$2\"; \
                           \"$3\" umount \"$1\" >/dev/null";

/// Removes the copies of images that are gone from podman's storage
/// (rebuilt or removed) and that no run holds; the copies of other images
/// still there stay, so runs that take turns between two images do not
/// copy them again and again. Best effort: what cannot be removed now is
/// tried at the next build.
fn prune(podman: &Podman, root: &Path, keep: &str, image_gone: &dyn Fn(&str) -> bool) {
    let mut ids: Vec<String> = entries(root)
        .map(|name| name.trim_end_matches(".lock").to_string())
        .filter(|id| is_image_id(id) && id != keep)
        .collect();
    ids.sort();
    ids.dedup();
    for id in ids.into_iter().filter(|id| image_gone(id)) {
        let lock_path = root.join(format!("{id}.lock"));
        let Ok(_unused) = lock(&lock_path, FlockOperation::NonBlockingLockExclusive) else {
            continue;
        };
        let tree = root.join(&id);
        if !is_dir(&tree) || remove_tree(podman, &tree).is_ok() {
            let _ = fs::remove_file(&lock_path);
        }
    }
}

/// Whether podman says it has no image `id` (not when podman cannot say).
fn image_gone(podman: &Podman, id: &str) -> bool {
    podman
        .std_command()
        .args(["image", "exists", id])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.code() == Some(1))
}

/// The names in `root`.
fn entries(root: &Path) -> impl Iterator<Item = String> {
    fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().into_string().ok())
}

/// Removes a copy: its files belong to the ids of the user namespace, so
/// only inside it (`podman unshare`).
fn remove_tree(podman: &Podman, tree: &Path) -> Result<(), String> {
    run(
        podman
            .std_command()
            .args(["unshare", "rm", "-rf", "--"])
            .arg(tree),
        "unshare rm",
    )
}

/// Runs a podman command to its end; its error output when it fails.
fn run(command: &mut Command, what: &str) -> Result<(), String> {
    let output = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .output()
        .map_err(|e| format!("podman {what} could not run: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "podman {what} failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "48a492f933518273c040ef4edd68910479fcf3648d3ef2ff02304f4c5233eea7";

    #[test]
    fn facts_are_read_from_podmans_answer() {
        let facts = parse_facts(&format!("{ID} vfs 1090000000\n"));
        assert_eq!(
            facts,
            Some(ImageFacts {
                id: ID.to_string(),
                driver: "vfs".to_string(),
                size: 1_090_000_000,
            })
        );
        assert!(facts.is_some_and(|f| f.copied_per_container()));
        let overlay = parse_facts(&format!("{ID} overlay 5"));
        assert!(overlay.is_some_and(|f| !f.copied_per_container()));
    }

    #[test]
    fn only_an_image_id_names_an_entry() {
        assert!(parse_facts("../../etc vfs 1").is_none());
        assert!(parse_facts(&format!("{ID} vfs")).is_none());
        assert!(parse_facts(&format!("{ID} vfs 1 more")).is_none());
        assert!(!is_image_id(&ID.to_uppercase()));
        assert!(matches!(
            prepare_blocking(&unused_podman(), "../x"),
            Err(why) if why.contains("not an image id")
        ));
    }

    fn unused_podman() -> Podman {
        Podman::at(PathBuf::from("/nonexistent/podman")).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn the_cache_folder_is_made_private_and_must_be_the_users() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let root = dir.path().join("ah").join("rootfs");
        private_dir(&root).unwrap_or_else(|e| panic!("{e}"));
        let mode = |p: &Path| fs::metadata(p).map(|m| m.mode() & 0o777).unwrap_or(0);
        assert_eq!(mode(&root), 0o700);
        fs::set_permissions(&root, fs::Permissions::from_mode(0o755))
            .unwrap_or_else(|e| panic!("{e}"));
        private_dir(&root).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(mode(&root), 0o700);
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&root, &link).unwrap_or_else(|e| panic!("{e}"));
        assert!(private_dir(&link).is_err_and(|why| why.contains("not a folder of yours")));
    }

    #[test]
    fn only_copies_of_gone_images_that_no_run_holds_are_pruned() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let root = dir.path();
        let (held, gone, there) = (
            ID.replace('4', "5"),
            ID.replace('4', "6"),
            ID.replace('4', "7"),
        );
        for id in [ID, &held, &gone, &there] {
            fs::create_dir(root.join(id)).unwrap_or_else(|e| panic!("{e}"));
        }
        let _lease = lock(
            &root.join(format!("{held}.lock")),
            FlockOperation::LockShared,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let image_gone = |id: &str| id != there;
        // Removing a tree needs podman, missing here: the free copy of a
        // gone image is tried, fails, and keeps its lock file.
        prune(&unused_podman(), root, ID, &image_gone);
        for id in [ID, &held, &gone, &there] {
            assert!(is_dir(&root.join(id)), "{id}");
        }
        assert!(root.join(format!("{gone}.lock")).exists());
        assert!(!root.join(format!("{there}.lock")).exists(), "never tried");
        // Without its tree, it goes; the held one stays.
        fs::remove_dir(root.join(&gone)).unwrap_or_else(|e| panic!("{e}"));
        prune(&unused_podman(), root, ID, &image_gone);
        assert!(!root.join(format!("{gone}.lock")).exists());
        assert!(root.join(format!("{held}.lock")).exists());
        assert!(
            !image_gone_here(&unused_podman()),
            "podman cannot say: kept"
        );
    }

    fn image_gone_here(podman: &Podman) -> bool {
        image_gone(podman, ID)
    }
}
