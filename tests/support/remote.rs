//! The "second machine" of the remote engine tests, simulated on this one:
//! the unprivileged user named by `AH_TEST_REMOTE_USER`, whose rootless
//! podman API service the local test user (`AH_TEST_USER`) reaches over ssh
//! through the podman connection [`CONNECTION`]; through the same login,
//! [`ROOTFUL_CONNECTION`] reaches root's podman service, whose socket the
//! remote user's group may use (a rootful engine). `scripts/setup` makes
//! them; `scripts/remote-engine` starts the services and sshd when they are
//! down, here before every test that uses them. Tests look at what happened
//! on the remote side with the engine's own podman, not through ssh.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::support::podman::{TestUser, podman_ready_blocking};

/// The name of the local test user's podman connection to the remote.
pub(crate) const CONNECTION: &str = "ahremote";

/// The name of the local test user's podman connection to the rootful
/// engine.
pub(crate) const ROOTFUL_CONNECTION: &str = "ahrootful";

/// Where the rootful engine's socket is (`scripts/remote-engine`).
const ROOTFUL_SOCKET: &str = "/run/ah-rootful-engine/podman.sock";

/// The tests' sshd, in front of the remote user's service.
pub(crate) const SSH_ADDRESS: &str = "127.0.0.1:2222";

/// Where `scripts/setup` keeps the tests' sshd configuration.
const SSHD_CONFIG: &str = "/etc/ah-test-sshd/sshd_config";

/// The search path of a login here, for the commands run as either user.
const PATH: &str = "PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";

/// The remote engine: who runs it, where its socket is, and the local test
/// user that reaches it.
pub(crate) struct RemoteEngine {
    /// The remote user (`AH_TEST_REMOTE_USER`, `ahremote` in CI).
    pub user: String,
    pub uid: u32,
    pub home: PathBuf,
    /// The local test user (`AH_TEST_USER`), whose podman has the
    /// connection and whose key logs in as the remote user.
    pub local: TestUser,
}

impl RemoteEngine {
    /// The remote engine, up (its service and sshd started if they were
    /// down), or `None` (skip) when `AH_TEST_REMOTE_USER` is unset or the
    /// tests do not run as root (switching users needs root).
    ///
    /// # Panics
    /// If it is named but not set up (`AH_TEST_USER` unset, a user, the
    /// sshd's configuration, the key or the connection missing), or cannot
    /// be started.
    pub(crate) fn from_env() -> Option<RemoteEngine> {
        let Some(user) = std::env::var("AH_TEST_REMOTE_USER")
            .ok()
            .filter(|n| !n.is_empty())
        else {
            eprintln!(
                "skipped: AH_TEST_REMOTE_USER is not set (CI sets it; scripts/setup makes the remote engine)"
            );
            return None;
        };
        if !rustix::process::geteuid().is_root() {
            eprintln!(
                "skipped: AH_TEST_REMOTE_USER needs the tests to run as root to switch users"
            );
            return None;
        }
        let setup = format!(
            "run AH_TEST_USER=... AH_TEST_REMOTE_USER={user} scripts/setup as root to set it up"
        );
        let local = TestUser::from_env().unwrap_or_else(|| {
            panic!("AH_TEST_REMOTE_USER needs AH_TEST_USER, the user that reaches it; {setup}")
        });
        let (uid, home) = passwd(&user)
            .unwrap_or_else(|| panic!("AH_TEST_REMOTE_USER={user}: no such user; {setup}"));
        assert!(
            Path::new(SSHD_CONFIG).is_file(),
            "the remote engine's sshd is not configured ({SSHD_CONFIG} is missing); {setup}"
        );
        let remote = RemoteEngine {
            user,
            uid,
            home,
            local,
        };
        assert!(
            remote.identity().is_file(),
            "{} has no ssh key {}; {setup}",
            remote.local.name,
            remote.identity().display()
        );
        let connections = output(
            remote.local_command("podman").args([
                "system",
                "connection",
                "list",
                "--format",
                "{{.Name}} {{.URI}}",
            ]),
            "podman system connection list",
        );
        let rootful_url = format!("ssh://{}@{SSH_ADDRESS}{ROOTFUL_SOCKET}", remote.user);
        for wanted in [
            format!("{CONNECTION} {}", remote.url()),
            format!("{ROOTFUL_CONNECTION} {rootful_url}"),
        ] {
            assert!(
                connections.lines().any(|line| line == wanted),
                "{}'s podman has no connection `{wanted}` (it has: {connections:?}); {setup}",
                remote.local.name
            );
        }
        remote.ensure_up();
        Some(remote)
    }

    /// The remote service's socket, on the remote machine.
    pub(crate) fn socket(&self) -> PathBuf {
        PathBuf::from(format!("/run/user/{}/podman/podman.sock", self.uid))
    }

    /// The service's address for a podman client (`CONTAINER_HOST`, or the
    /// connection's URI): ssh as the remote user to the tests' sshd, then
    /// the socket.
    pub(crate) fn url(&self) -> String {
        format!(
            "ssh://{}@{SSH_ADDRESS}{}",
            self.user,
            self.socket().display()
        )
    }

    /// The local test user's private key, which the remote user accepts
    /// (`CONTAINER_SSHKEY`, or the connection's identity).
    pub(crate) fn identity(&self) -> PathBuf {
        self.local.home.join(".ssh/id_ed25519")
    }

    /// Starts the remote service and the tests' sshd where they are down
    /// (`scripts/remote-engine`, the same start as `scripts/setup`'s).
    ///
    /// # Panics
    /// If either cannot be started.
    pub(crate) fn ensure_up(&self) {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/remote-engine");
        let out = Command::new(&script)
            .args(["up", &self.user])
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("{}: {e}", script.display()));
        assert!(
            out.status.success(),
            "{} up {} failed:\n{}{}",
            script.display(),
            self.user,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `program` run as the local test user, from `/` with a minimal login
    /// environment.
    pub(crate) fn local_command(&self, program: &str) -> Command {
        let mut cmd = self.local.command(Path::new(program), &[]);
        cmd.current_dir("/");
        cmd
    }

    /// `podman --remote --connection ahremote` run as the local test user:
    /// the remote engine reached the way ah reaches it.
    pub(crate) fn remote_podman(&self) -> Command {
        let mut cmd = self.local_command("podman");
        cmd.args(["--remote", "--connection", CONNECTION]);
        cmd
    }

    /// The remote user's own podman, run directly (not through ssh) with
    /// the environment its service has: for looking at the remote side.
    pub(crate) fn podman(&self) -> Command {
        let mut cmd = Command::new("runuser");
        cmd.args(["-u", &self.user, "--", "env", "-i"])
            .arg(format!("HOME={}", self.home.display()))
            .arg(format!("USER={}", self.user))
            .arg(format!("XDG_RUNTIME_DIR=/run/user/{}", self.uid))
            .arg(PATH)
            .arg("podman")
            .current_dir("/");
        cmd
    }

    /// IDs of the remote user's containers labelled with run `id`, one a
    /// line; empty when there are none.
    pub(crate) fn containers_of(&self, id: &str) -> String {
        let mut cmd = self.podman();
        cmd.args(["ps", "-a", "-q", "--filter"])
            .arg(format!("label=ah.run={id}"));
        output(&mut cmd, "podman ps")
    }

    /// IDs of the rootful engine's containers (root's) labelled with run
    /// `id`, one a line; empty when there are none.
    pub(crate) fn rootful_containers_of(&self, id: &str) -> String {
        let mut cmd = Command::new("podman");
        cmd.args(["ps", "-a", "-q", "--filter"])
            .arg(format!("label=ah.run={id}"))
            .current_dir("/");
        output(&mut cmd, "podman ps (root's)")
    }

    /// Names of the remote user's volumes labelled with run `id`, one a
    /// line; empty when there are none.
    pub(crate) fn volumes_of(&self, id: &str) -> String {
        let mut cmd = self.podman();
        cmd.args(["volume", "ls", "-q", "--filter"])
            .arg(format!("label=ah.run={id}"));
        output(&mut cmd, "podman volume ls")
    }

    /// Puts `image` into the remote user's storage, copied from root's
    /// (`podman save | podman load`, the sandbox image built there first
    /// where it is missing or stale), unless the remote already has that
    /// image, by id. Parallel tests wait for one copy under a file lock.
    /// From a plain (non-async) test: it may build root's image.
    ///
    /// # Panics
    /// If root's podman does not have `image` or the copy fails.
    pub(crate) fn ensure_image(&self, image: &str) {
        let lock_path =
            std::env::temp_dir().join(format!("ah-test-remote-image-{}.lock", self.user));
        let lock = std::fs::File::create(&lock_path)
            .unwrap_or_else(|e| panic!("create {}: {e}", lock_path.display()));
        // Released when `lock` closes.
        let locked = rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive);
        assert!(locked.is_ok(), "flock {}", lock_path.display());
        let podman = podman_ready_blocking().unwrap_or_else(|| {
            panic!("the remote engine tests need podman (scripts/setup installs it)")
        });
        let id_format = ["image", "inspect", "--format", "{{.Id}}", image];
        let id = output(
            Command::new(&podman).args(id_format),
            "podman image inspect",
        );
        let remote_id = self.podman().args(id_format).output().ok();
        let has = remote_id.is_some_and(|out| {
            out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == id
        });
        if !has {
            eprintln!("copying {image} into {}'s podman (once)", self.user);
            let started = std::time::Instant::now();
            let mut save = Command::new(&podman)
                .args(["save", "--format", "docker-archive", image])
                .stdout(Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| panic!("podman save: {e}"));
            let tar = save
                .stdout
                .take()
                .unwrap_or_else(|| panic!("podman save: no output"));
            let load = self
                .podman()
                .args(["load", "-q"])
                .stdin(tar)
                .output()
                .unwrap_or_else(|e| panic!("podman load as {}: {e}", self.user));
            let saved = save.wait().unwrap_or_else(|e| panic!("podman save: {e}"));
            assert!(saved.success(), "podman save {image} failed: {saved}");
            assert!(
                load.status.success(),
                "podman load as {}: {}",
                self.user,
                String::from_utf8_lossy(&load.stderr)
            );
            let loaded = output(self.podman().args(id_format), "podman image inspect");
            assert_eq!(
                loaded, id,
                "{image} loaded into {}'s podman with another id",
                self.user
            );
            eprintln!(
                "copied {image} into {}'s podman in {:?}",
                self.user,
                started.elapsed()
            );
        }
        drop(lock);
    }
}

/// The uid and home of `user`, or `None` when there is no such user.
fn passwd(user: &str) -> Option<(u32, PathBuf)> {
    let out = Command::new("getent")
        .args(["passwd", user])
        .output()
        .unwrap_or_else(|e| panic!("getent: {e}"));
    let entry = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let fields: Vec<&str> = entry.split(':').collect();
    if fields.len() < 6 {
        return None;
    }
    let uid = fields[2]
        .parse()
        .unwrap_or_else(|e| panic!("uid of {user}: {e}"));
    Some((uid, PathBuf::from(fields[5])))
}

/// The trimmed standard output of `cmd`.
///
/// # Panics
/// If it cannot run or fails; the message names `what` and has its error
/// output.
fn output(cmd: &mut Command, what: &str) -> String {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} ({cmd:?}) failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}
