//! `ah doctor --engine podman-remote`: checks a remote podman engine the
//! way a run would use it — the connection answers, its podman's version,
//! whether it is rootless (either works: the sandbox runs as
//! [`SANDBOX_UID`], inside the engine user's namespace on a rootless one),
//! that the image is there, and that a container starts with the run's
//! confinement — and says how to fix what fails. Nothing of this host is
//! mounted there, so the host-side checks that remain are git and the init
//! ah sends.

use super::{Check, git_check};
use crate::podman::{self, Connection, Podman, SANDBOX_UID, find_init};

/// What `podman info` says of the engine.
#[derive(Debug, serde::Deserialize)]
struct Info {
    host: Host,
    version: Version,
}

#[derive(Debug, serde::Deserialize)]
struct Host {
    security: Security,
    #[serde(rename = "ociRuntime", default)]
    runtime: Option<Runtime>,
}

#[derive(Debug, serde::Deserialize)]
struct Security {
    rootless: bool,
}

#[derive(Debug, serde::Deserialize)]
struct Runtime {
    name: String,
}

#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Version {
    version: String,
}

/// Every check of a remote engine, in the order the CLI prints them.
pub(super) async fn checks(podman: Podman, engine: &Connection, image: &str) -> Vec<Check> {
    let podman = podman.remote(engine.clone());
    let mut checks = Vec::new();
    let name = engine.name();
    let info = podman
        .command()
        .args(["info", "--format", "json"])
        .stdin(std::process::Stdio::null())
        .output()
        .await;
    let info = match info {
        Ok(out) if out.status.success() => serde_json::from_slice::<Info>(&out.stdout)
            .map_err(|e| format!("podman info said something unexpected ({e})")),
        Ok(out) => Err(String::from_utf8_lossy(&out.stderr).trim().to_string()),
        Err(e) => Err(e.to_string()),
    };
    let info = match info {
        Ok(info) => info,
        Err(why) => {
            checks.push(Check::fail(
                "connection",
                format!("{name}: {why}"),
                "check 'podman system connection list' (the connection's ssh key, user and \
                 socket path), that sshd runs on the remote machine, and that the user's podman \
                 service listens there ('systemctl --user enable --now podman.socket' as that \
                 user)",
            ));
            checks.push(git_check());
            return checks;
        }
    };
    let runtime = info.host.runtime.map(|r| r.name).unwrap_or_default();
    checks.push(Check::pass(
        "connection",
        format!("{name}: podman {} ({runtime})", info.version.version),
    ));
    checks.push(match info.host.security.rootless {
        true => Check::pass(
            "rootless",
            format!(
                "the remote podman runs rootless: the sandbox's uid {SANDBOX_UID} is one of \
                 the user's subordinate ids there"
            ),
        ),
        false => Check::pass(
            "rootless",
            format!(
                "the remote podman runs as root: the sandbox runs as uid {SANDBOX_UID} of the \
                 remote machine, with no user namespace (a user's rootless podman socket adds \
                 one)"
            ),
        ),
    });
    checks.push(match find_init() {
        Some(path) => Check::pass("init", format!("{} (sent to the engine)", path.display())),
        None => Check::fail(
            "init",
            "catatonit not found; ah sends it to the engine as the sandbox's init",
            "apt-get install catatonit",
        ),
    });
    let present = podman::image_exists(&podman, image).await;
    let present = match present {
        Ok(true) => {
            checks.push(Check::pass("image", format!("{image} present on {name}")));
            true
        }
        Ok(false) => {
            checks.push(Check::fail(
                "image",
                format!("{image} missing on {name}"),
                format!(
                    "run 'ah image build --engine podman-remote --connection {name}' (it builds \
                     here and loads the image there)"
                ),
            ));
            false
        }
        Err(e) => {
            checks.push(Check::fail(
                "image",
                e.to_string(),
                "check 'podman --remote images'",
            ));
            false
        }
    };
    if present {
        checks.extend(start_check(&podman, image).await);
    }
    checks.push(git_check());
    checks
}

/// Below this many inotify watches per user on the engine's machine, a
/// large project's steps walk `/work` (the agent watches each folder, and
/// the runs on the engine all count against one user, [`SANDBOX_UID`]).
const FEW_WATCHES: u64 = 65_536;

/// Starts a container with a run's confinement (no network, no
/// capabilities, read-only root, the sandbox's user) that says how many
/// inotify watches that user may hold.
async fn start_check(podman: &Podman, image: &str) -> Vec<Check> {
    let out = podman
        .command()
        .args([
            "run",
            "--rm",
            "--pull=never",
            "--network=none",
            "--cap-drop=all",
            "--security-opt=no-new-privileges",
            "--read-only",
            &format!("--user={SANDBOX_UID}:{SANDBOX_UID}"),
            // Limits of their own, as a run's: the engine's defaults may
            // exceed what its service may set.
            "--ulimit=nofile=1024:1024",
            "--ulimit=nproc=1024:1024",
            image,
            "cat",
            "/proc/sys/fs/inotify/max_user_watches",
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .await;
    match out {
        Ok(out) if out.status.success() => {
            let watches = String::from_utf8_lossy(&out.stdout).trim().parse::<u64>();
            vec![
                Check::pass("start", "a confined container starts"),
                watches_check(watches.ok()),
            ]
        }
        Ok(out) => vec![Check::fail(
            "start",
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
            format!(
                "on the remote machine, run 'podman run --rm --user {SANDBOX_UID}:{SANDBOX_UID} \
                 IMAGE true' as the connection's user and fix what it reports (crun on cgroup \
                 v1: set runtime = \"runc\" in that user's containers.conf; rootless: the user \
                 needs subordinate ids in /etc/subuid and /etc/subgid)"
            ),
        )],
        Err(e) => vec![Check::fail("start", e.to_string(), "reinstall podman")],
    }
}

/// Whether the sandbox's user may hold enough inotify watches (`None`: the
/// container could not say).
fn watches_check(watches: Option<u64>) -> Check {
    let fix = format!(
        "on the remote machine, raise fs.inotify.max_user_watches to {} or more (sysctl -w \
         fs.inotify.max_user_watches=524288, and in /etc/sysctl.d to keep it): the agent \
         watches every folder of /work, and where it cannot, each step walks the whole tree",
        FEW_WATCHES
    );
    match watches {
        Some(n) if n >= FEW_WATCHES => Check::pass(
            "watches",
            format!("{n} inotify watches per user: each step looks only at what it touched"),
        ),
        Some(n) => Check::fail(
            "watches",
            format!("only {n} inotify watches per user: large projects' steps walk /work"),
            fix,
        )
        .warning(),
        None => Check::fail("watches", "the container could not say", fix).warning(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::Severity;

    #[test]
    fn few_inotify_watches_are_a_warning_with_the_fix() {
        let enough = watches_check(Some(192_536));
        assert!(enough.ok && enough.detail.starts_with("192536 inotify watches"));
        let few = watches_check(Some(8_192));
        assert!(!few.ok && few.severity == Severity::Warning);
        assert!(
            few.fix
                .is_some_and(|fix| fix.contains("fs.inotify.max_user_watches"))
        );
        let unknown = watches_check(None);
        assert!(!unknown.ok && unknown.severity == Severity::Warning);
    }
}
