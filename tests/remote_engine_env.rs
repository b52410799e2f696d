//! The environment of the remote engine tests itself, before any engine
//! uses it: the local test user's `podman --remote` reaches the remote
//! user's podman over ssh (by connection and by `CONTAINER_HOST`), what it
//! makes there belongs to the remote user, and the two users cannot read
//! each other's homes, as two machines could not. Skipped unless
//! `AH_TEST_REMOTE_USER` is set (CI sets it; `scripts/setup` makes it).

use std::path::Path;
use std::process::{Command, Output, Stdio};

use ah_sandbox::podman::DEFAULT_IMAGE;

use crate::support::remote::RemoteEngine;

/// The output of `cmd`, which must succeed.
fn succeeds(cmd: &mut Command) -> Output {
    let out = cmd.stdin(Stdio::null()).output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A label value no other test run uses.
fn unique_id(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("remote-env-{what}-{}-{nanos}", std::process::id())
}

#[test]
fn the_local_user_runs_containers_of_the_remote_user_over_ssh() {
    let Some(remote) = RemoteEngine::from_env() else {
        return;
    };
    remote.ensure_image(DEFAULT_IMAGE);

    // A container run through the connection runs in the remote user's
    // user namespace: its root is the remote user outside. Without a
    // network, as ah's sandboxes run (rootless slirp4netns needs
    // /dev/net/tun, which some hosts keep from users).
    let out = succeeds(remote.remote_podman().args([
        "run",
        "--rm",
        "--network=none",
        DEFAULT_IMAGE,
        "sh",
        "-c",
        "id -u; head -n 1 /proc/self/uid_map",
    ]));
    let text = stdout(&out);
    let lines: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(lines.first(), Some(&vec!["0"]), "id -u: {text}");
    let own = remote.uid.to_string();
    assert_eq!(
        lines.get(1),
        Some(&vec!["0", own.as_str(), "1"]),
        "the container's root is not {} ({}) outside: {text}",
        remote.user,
        remote.uid
    );

    // While it runs, the remote user's podman lists it by its label, and
    // neither the local user's podman nor root's does.
    let id = unique_id("container");
    let label = format!("ah.run={id}");
    let out = succeeds(remote.remote_podman().args([
        "run",
        "-d",
        "--rm",
        "--network=none",
        "--label",
        &label,
        DEFAULT_IMAGE,
        "sleep",
        "300",
    ]));
    let container = stdout(&out);
    let listed = remote.containers_of(&id);
    let local = remote.local.containers_of(Path::new("podman"), &id);
    let root = crate::support::podman::containers_of(Path::new("podman"), &id);
    succeeds(
        remote
            .remote_podman()
            .args(["rm", "-f", "-t", "0", &container]),
    );
    assert!(
        !listed.is_empty() && container.starts_with(&listed),
        "{}'s podman does not list the container {container} (it lists {listed:?})",
        remote.user
    );
    assert_eq!(local, "", "the local user's own podman lists it");
    assert_eq!(root, "", "root's podman lists it");
    assert_eq!(
        remote.containers_of(&id),
        "",
        "removed over ssh, still there"
    );

    // A volume made over ssh is the remote user's too.
    let id = unique_id("volume");
    let out = succeeds(remote.remote_podman().args([
        "volume",
        "create",
        "--label",
        &format!("ah.run={id}"),
    ]));
    let volume = stdout(&out);
    let listed = remote.volumes_of(&id);
    succeeds(remote.remote_podman().args(["volume", "rm", &volume]));
    assert_eq!(listed, volume, "{}'s podman volumes", remote.user);
    assert_eq!(remote.volumes_of(&id), "", "removed over ssh, still there");

    // The same service named the other way a client may: the URL and the
    // key in the environment, no connection.
    let url = remote.url();
    let key = remote.identity();
    let out = succeeds(
        remote
            .local
            .command(
                Path::new("podman"),
                &[
                    ("CONTAINER_HOST", url.as_str()),
                    ("CONTAINER_SSHKEY", &key.to_string_lossy()),
                ],
            )
            .current_dir("/")
            .args([
                "--remote",
                "info",
                "--format",
                "{{.Host.RemoteSocket.Path}}",
            ]),
    );
    assert_eq!(
        stdout(&out),
        format!("unix://{}", remote.socket().display())
    );
}

#[test]
fn the_local_and_the_remote_user_cannot_read_each_others_files() {
    let Some(remote) = RemoteEngine::from_env() else {
        return;
    };
    // (who, whose home, a file there)
    let cases = [
        (
            remote.local.name.as_str(),
            remote.home.as_path(),
            remote.home.join(".ssh/authorized_keys"),
        ),
        (
            remote.user.as_str(),
            remote.local.home.as_path(),
            remote.identity(),
        ),
    ];
    for (who, home, file) in cases {
        assert!(file.is_file(), "{} is missing", file.display());
        for args in [vec!["ls", "-A"], vec!["cat"]] {
            let path = if args[0] == "ls" { home } else { &file };
            let out = Command::new("runuser")
                .args(["-u", who, "--"])
                .args(&args)
                .arg(path)
                .current_dir("/")
                .stdin(Stdio::null())
                .output()
                .unwrap();
            assert!(
                !out.status.success(),
                "{who} can read {}: {}",
                path.display(),
                String::from_utf8_lossy(&out.stdout)
            );
        }
    }
}
