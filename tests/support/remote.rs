//! The remote podman engine of the tests: the user named by
//! `AH_TEST_REMOTE_USER`, whose rootless podman service the test user
//! reaches over ssh as the connection `ahremote` (`scripts/setup`).

use std::process::Command;

/// The remote engine, as the tests reach it.
pub(crate) struct RemoteEngine {
    pub(crate) name: String,
}

impl RemoteEngine {
    /// The engine, or `None` (skip) when `AH_TEST_REMOTE_USER` is unset or
    /// the tests do not run as root.
    pub(crate) fn from_env() -> Option<RemoteEngine> {
        let name = std::env::var("AH_TEST_REMOTE_USER")
            .ok()
            .filter(|n| !n.is_empty())?;
        if !rustix::process::geteuid().is_root() {
            eprintln!("skipped: AH_TEST_REMOTE_USER needs the tests to run as root");
            return None;
        }
        Some(RemoteEngine { name })
    }

    /// The connection's name, as `--connection` takes it.
    pub(crate) fn connection(&self) -> &str {
        "ahremote"
    }

    /// `podman` as the remote user, on its own machine.
    pub(crate) fn podman(&self) -> Command {
        let mut command = Command::new("runuser");
        command
            .current_dir("/")
            .args(["-u", &self.name, "--", "podman"]);
        command
    }

    /// The remote user's containers of run `id`, one a line.
    pub(crate) fn containers_of(&self, id: &str) -> String {
        let out = self
            .podman()
            .args(["ps", "-a", "-q", "--filter"])
            .arg(format!("label=ah.run={id}"))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Makes `image` present in the remote user's storage.
    pub(crate) fn ensure_image(&self, image: &str) {
        let present = self
            .podman()
            .args(["image", "exists", image])
            .status()
            .unwrap();
        assert!(present.success(), "{image} is missing on the remote engine");
    }
}
