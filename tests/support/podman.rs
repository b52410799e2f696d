//! Whether the podman tests can run here: podman must be installed (or the
//! tests are skipped, unless `AH_REQUIRE_PODMAN` asks for a failure) and the
//! sandbox image present. The image is built at most once, under a file
//! lock, however many tests and test binaries ask at the same time.

use std::path::{Path, PathBuf};
use std::process::Command;

use ah_sandbox::image::{BuildOptions, build_image, image_is_current};
use ah_sandbox::podman::{DEFAULT_IMAGE, find_podman};

/// Whether `AH_REQUIRE_PODMAN` turns a missing podman into a failure.
pub(crate) fn required() -> bool {
    std::env::var("AH_REQUIRE_PODMAN").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// The podman executable with the sandbox image in place, or `None` when
/// the test should be skipped (no podman, not required).
///
/// # Panics
/// If podman is missing while required, or the image cannot be built.
pub(crate) async fn podman_ready() -> Option<PathBuf> {
    let podman = match find_podman() {
        Ok(podman) => podman,
        Err(e) if required() => panic!("AH_REQUIRE_PODMAN is set but {e}"),
        Err(_) => {
            eprintln!("skipped: podman is not installed (set AH_REQUIRE_PODMAN=1 to fail instead)");
            return None;
        }
    };
    ensure_image().await;
    Some(podman)
}

/// [`podman_ready`] for plain (non-async) tests.
pub(crate) fn podman_ready_blocking() -> Option<PathBuf> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("tokio runtime: {e}"))
        .block_on(podman_ready())
}

/// Builds the image if missing, holding an exclusive lock on a file so that
/// parallel tests (and test binaries) wait for one build.
async fn ensure_image() {
    // Per user: image storage is per user, and so must the lock file be.
    let uid = rustix::process::geteuid().as_raw();
    let lock_path = std::env::temp_dir().join(format!("ah-test-image-build-{uid}.lock"));
    let lock = std::fs::File::create(&lock_path)
        .unwrap_or_else(|e| panic!("create {}: {e}", lock_path.display()));
    // Released when `lock` closes.
    let locked = rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive);
    assert!(locked.is_ok(), "flock {}", lock_path.display());
    // Built again when this ah's package list is not the one it was built
    // from.
    let current = image_is_current(DEFAULT_IMAGE)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    if current != Some(true) {
        eprintln!("building {DEFAULT_IMAGE} (once; a few minutes)");
        let report = build_image(&BuildOptions::default(), &mut |progress| {
            eprintln!("  {progress:?}")
        })
        .await
        .unwrap_or_else(|e| panic!("building the sandbox image failed: {e}"));
        eprintln!(
            "built {DEFAULT_IMAGE} via {:?} in {:?}",
            report.source, report.duration
        );
    }
    drop(lock);
}

/// IDs of the containers labelled with run `id` (`podman ps -a`), one a
/// line; empty when there are none.
pub(crate) fn containers_of(podman: &Path, id: &str) -> String {
    let out = Command::new(podman)
        .args(["ps", "-a", "-q", "--filter"])
        .arg(format!("label=ah.run={id}"))
        .output()
        .unwrap_or_else(|e| panic!("podman ps: {e}"));
    assert!(
        out.status.success(),
        "podman ps: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// How long a run's sandbox may take to be removed after ah exits (a few
/// hundred milliseconds when idle; podman slows down a lot under load).
pub(crate) const CLEANUP_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Waits until run `id` has no container left (its read-only one
/// included), for at most [`CLEANUP_LIMIT`]: a run's end hands the
/// removal to a cleanup that goes on after ah exits.
///
/// # Panics
/// If a container is still there after the limit.
pub(crate) fn no_container_left(podman: &Path, id: &str) {
    no_container_left_by(id, |id| containers_of(podman, id));
}

/// [`no_container_left`] with the containers of a run listed by `list`
/// (the podman of another user, say).
pub(crate) fn no_container_left_by(id: &str, list: impl Fn(&str) -> String) {
    let ro = format!("{id}-ro");
    let mut left = String::new();
    let gone = within_cleanup_limit(|| {
        left = [list(id), list(&ro)].concat();
        left.is_empty()
    });
    assert!(
        gone,
        "run {id} still has a container {} s after it ended: {left}",
        CLEANUP_LIMIT.as_secs()
    );
}

/// Waits until the run folder `run` holds none of its sandbox's folders
/// (work copy, upper folder, overlay scratch) and no process keeps the run
/// live (its cleanup has ended), for at most [`CLEANUP_LIMIT`].
///
/// # Panics
/// If something is still there after the limit.
pub(crate) fn sandbox_folders_gone(run: &Path) {
    let mut left = Vec::new();
    let gone = within_cleanup_limit(|| {
        left = ["work", "upper", "overlay"]
            .into_iter()
            .filter(|name| run.join(name).exists())
            .collect();
        left.is_empty() && !held(&run.join("live.lock"))
    });
    assert!(
        gone,
        "{} {} s after its run ended: left {left:?}, live.lock held: {}",
        run.display(),
        CLEANUP_LIMIT.as_secs(),
        held(&run.join("live.lock"))
    );
}

/// Whether a process holds the lock on `path`.
fn held(path: &Path) -> bool {
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockShared).is_err()
}

/// Polls `done` until it holds or [`CLEANUP_LIMIT`] has passed; whether it
/// held.
fn within_cleanup_limit(mut done: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + CLEANUP_LIMIT;
    loop {
        if done() {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// The unprivileged user named by `AH_TEST_USER` (CI creates it with
/// `scripts/setup`), for rootless tests run from root.
pub(crate) struct TestUser {
    pub name: String,
    pub uid: u32,
    pub home: PathBuf,
}

impl TestUser {
    /// The user, or `None` (skip) when `AH_TEST_USER` is unset or the tests
    /// do not run as root (switching users needs root).
    ///
    /// # Panics
    /// If `AH_TEST_USER` names a user that does not exist.
    pub(crate) fn from_env() -> Option<TestUser> {
        let name = std::env::var("AH_TEST_USER")
            .ok()
            .filter(|n| !n.is_empty())?;
        if !rustix::process::geteuid().is_root() {
            eprintln!("skipped: AH_TEST_USER needs the tests to run as root to switch users");
            return None;
        }
        let passwd = Command::new("getent")
            .args(["passwd", &name])
            .output()
            .unwrap_or_else(|e| panic!("getent: {e}"));
        let entry = String::from_utf8_lossy(&passwd.stdout).trim().to_string();
        let fields: Vec<&str> = entry.split(':').collect();
        assert!(
            fields.len() >= 6,
            "AH_TEST_USER={name}: no such user (scripts/setup creates it)"
        );
        Some(TestUser {
            uid: fields[2]
                .parse()
                .unwrap_or_else(|e| panic!("uid of {name}: {e}")),
            home: PathBuf::from(fields[5]),
            name,
        })
    }

    /// `program` run as this user with a minimal environment plus `env`.
    pub(crate) fn command(&self, program: &Path, env: &[(&str, &str)]) -> Command {
        let mut cmd = Command::new("runuser");
        cmd.args(["-u", &self.name, "--", "env", "-i"])
            .arg(format!("HOME={}", self.home.display()))
            .arg(format!("USER={}", self.name))
            .arg("PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
            .args(env.iter().map(|(k, v)| format!("{k}={v}")))
            .arg(program);
        cmd
    }

    /// IDs of this user's containers labelled with run `id` (its rootless
    /// podman), one a line.
    pub(crate) fn containers_of(&self, podman: &Path, id: &str) -> String {
        let out = self
            .command(podman, &[])
            .args(["ps", "-a", "-q", "--filter"])
            .arg(format!("label=ah.run={id}"))
            .output()
            .unwrap_or_else(|e| panic!("podman ps as {}: {e}", self.name));
        assert!(
            out.status.success(),
            "podman ps as {}: {}",
            self.name,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Gives `path` (and everything in it) to this user.
    pub(crate) fn chown(&self, path: &Path) {
        let status = Command::new("chown")
            .args(["-R", &format!("{0}:{0}", self.name)])
            .arg(path)
            .status()
            .unwrap_or_else(|e| panic!("chown: {e}"));
        assert!(status.success(), "chown {}", path.display());
    }

    /// A copy of `program` this user can run whatever the permissions of the
    /// checkout it was built in: a 0755 temp folder with a 0755 copy. Keep
    /// the folder alive while the copy runs.
    pub(crate) fn reachable_copy(&self, program: &Path) -> (tempfile::TempDir, PathBuf) {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .unwrap_or_else(|e| panic!("chmod: {e}"));
        let name = program
            .file_name()
            .unwrap_or_else(|| panic!("{} has no name", program.display()));
        let copy = dir.path().join(name);
        std::fs::copy(program, &copy).unwrap_or_else(|e| panic!("copy {}: {e}", program.display()));
        (dir, copy)
    }

    /// Builds the sandbox image in this user's storage, once (and again when
    /// this ah's package list changed), the way a user
    /// without root does where no registry is reachable: `ah image build
    /// --offline` (mmdebstrap in a user namespace). Parallel tests wait for
    /// one build under a file lock.
    ///
    /// # Panics
    /// If the build fails.
    pub(crate) fn build_image(&self) {
        let lock_path = std::env::temp_dir().join(format!("ah-test-user-image-{}.lock", self.name));
        let lock = std::fs::File::create(&lock_path)
            .unwrap_or_else(|e| panic!("create {}: {e}", lock_path.display()));
        // Released when `lock` closes.
        let locked = rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive);
        assert!(locked.is_ok(), "flock {}", lock_path.display());
        let (_dir, ah) = self.reachable_copy(Path::new(env!("CARGO_BIN_EXE_ah")));
        eprintln!(
            "building {DEFAULT_IMAGE} as {} if missing or stale (once; a few minutes)",
            self.name
        );
        let started = std::time::Instant::now();
        let built = self
            .command(&ah, &[])
            .args(["image", "build", "--offline", "--if-stale"])
            .output()
            .unwrap_or_else(|e| panic!("runuser: {e}"));
        assert!(
            built.status.success(),
            "ah image build --offline as {}:\n{}{}",
            self.name,
            String::from_utf8_lossy(&built.stdout),
            String::from_utf8_lossy(&built.stderr)
        );
        eprintln!(
            "built {DEFAULT_IMAGE} as {} in {:?}",
            self.name,
            started.elapsed()
        );
        drop(lock);
    }
}

/// Where a test sees the files of the run `run`'s `/work`: its work copy, or
/// for an overlay `/work` the merged view, through the root of the run's
/// container (the tests run as root). The container starts while the model
/// is asked, so this waits (up to a minute) for it to be running.
///
/// # Panics
/// If the run has neither a work copy nor, within a minute, a running
/// container.
pub(crate) fn work_view(run: &Path) -> PathBuf {
    let copy = run.join("work");
    if copy.exists() {
        return copy;
    }
    let id = run
        .file_name()
        .unwrap_or_else(|| panic!("{} names no run", run.display()))
        .to_string_lossy();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let pid = loop {
        let out = Command::new("podman")
            .args(["inspect", "--format", "{{.State.Pid}}", &format!("ah-{id}")])
            .output()
            .unwrap_or_else(|e| panic!("podman inspect: {e}"));
        let pid = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if out.status.success() && pid != "0" {
            break pid;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "run {id} has no work copy and no running container after a minute: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    PathBuf::from(format!("/proc/{pid}/root/work"))
}
