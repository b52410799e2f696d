//! Real MCP servers for the tests: `mcp-server-time` (a reference server
//! of the Model Context Protocol project, from PyPI) and `tests/mcp/probe.py`
//! (ours, on the official Python SDK from the same install). They are
//! installed once, under a file lock, with pip into `target/mcp-python`;
//! for podman, an image made from the sandbox image holds them in
//! `/opt/mcp` with a `mcp-python` launcher on the PATH.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::podman::TestUser;
use ah_sandbox::podman::DEFAULT_IMAGE;

/// What pip installs: pinned, so every run tests the same servers.
const PACKAGES: [&str; 2] = ["mcp-server-time==2026.10.19", "mcp==2.3.0"];

/// Holds an exclusive lock on `name` in the temp folder while alive.
fn locked(name: &str) -> std::fs::File {
    let path = std::env::temp_dir().join(name);
    let lock =
        std::fs::File::create(&path).unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
    // Released when `lock` closes.
    let locked = rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive);
    assert!(locked.is_ok(), "flock {}", path.display());
    lock
}

/// The folder the servers' Python packages are installed in (on the
/// host's Python, the same version as the image's).
pub(crate) fn site() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/mcp-python");
    let site = root.join("site");
    let _lock = locked("ah-test-mcp-python.lock");
    let probe = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/probe.py");
    if site.join("mcp_server_time").is_dir() {
        std::fs::copy(&probe, site.join("probe.py")).unwrap();
        return site;
    }
    let _ = std::fs::remove_dir_all(&root);
    let out = Command::new("python3")
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--target",
        ])
        .arg(&site)
        .args(PACKAGES)
        .output()
        .unwrap_or_else(|e| panic!("python3 -m pip: {e}"));
    assert!(
        out.status.success(),
        "pip install {PACKAGES:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::copy(&probe, site.join("probe.py")).unwrap();
    site
}

/// An image with the servers, made once from the sandbox image in the
/// storage of `user` (a [`TestUser`]'s rootless storage, or the caller's
/// when `None`); its tag follows the probe's text and the packages.
pub(crate) fn image(podman: &Path, user: Option<&TestUser>) -> String {
    use std::hash::{Hash, Hasher};
    let site = site();
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    std::fs::read(site.join("probe.py"))
        .unwrap()
        .hash(&mut hasher);
    PACKAGES.hash(&mut hasher);
    let tag = format!("localhost/ah-mcp-test:{:016x}", hasher.finish());
    let owner = user.map_or("caller", |user| user.name.as_str());
    let _lock = locked(&format!("ah-test-mcp-image-{owner}.lock"));
    let podman_as = || match user {
        Some(user) => user.command(podman, &[]),
        None => Command::new(podman),
    };
    let exists = podman_as()
        .args(["image", "exists", &tag])
        .status()
        .unwrap();
    if exists.success() {
        return tag;
    }
    // A context every user can read.
    let context = tempfile::tempdir().unwrap();
    std::fs::set_permissions(context.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let copied = Command::new("cp")
        .arg("-a")
        .arg(&site)
        .arg(context.path().join("site"))
        .status()
        .unwrap();
    assert!(copied.success());
    let readable = Command::new("chmod")
        .args(["-R", "a+rX"])
        .arg(context.path())
        .status()
        .unwrap();
    assert!(readable.success());
    let launcher = context.path().join("mcp-python");
    std::fs::write(
        &launcher,
        "#!/bin/sh\nPYTHONPATH=/opt/mcp exec python3 \"$@\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&launcher, std::fs::Permissions::from_mode(0o755)).unwrap();
    let containerfile = context.path().join("Containerfile");
    std::fs::write(
        &containerfile,
        format!(
            "FROM {DEFAULT_IMAGE}\nCOPY site /opt/mcp\nCOPY mcp-python /usr/local/bin/mcp-python\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&containerfile, std::fs::Permissions::from_mode(0o644)).unwrap();
    let built = podman_as()
        .args(["build", "-q", "-t", &tag])
        .arg(context.path())
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "podman build {tag} as {owner}: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    tag
}
