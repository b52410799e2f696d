//! The overlay work copy of podman runs, through the real binary: the patch
//! holds exactly what the commands changed, byte for byte, whatever kind of
//! change; the project is never written during the run; a file the user
//! changes during the run is reported; rootless runs record from the
//! overlay and leave nothing of it behind.

use std::collections::BTreeMap;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;
use std::process::Command;

use crate::support::host::{Host, describe, git};
use crate::support::mock::MockServer;
use crate::support::podman::podman_ready_blocking;
use crate::support::steps::{bash, script};

/// Every kind of change a step can make.
const CHANGES: &str = "set -e
echo edited >> a.txt
printf 'new\\n' > added.txt
mkdir -p nested/deeper && printf 'deep\\n' > nested/deeper/file.txt
rm gone.txt
mv old_name.txt new_name.txt
mv dir_a dir_b
chmod +x script.sh
ln -sfn target2.txt link
printf '\\000\\001\\002\\377' > bin.dat
rm -rf replaced && mkdir replaced && printf 'fresh\\n' > replaced/only.txt
printf 'x' > 'name with spaces.txt'
";

/// What a tree holds, `.git` and `.ah` left out: path → (executable, bytes
/// or link target, is a link).
fn snapshot(root: &Path) -> BTreeMap<String, (bool, Vec<u8>, bool)> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, (bool, Vec<u8>, bool)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if rel == ".git" || rel == ".ah" {
                continue;
            }
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                out.insert(
                    rel,
                    (false, target.into_os_string().into_encoded_bytes(), true),
                );
            } else if meta.is_dir() {
                walk(root, &path, out);
            } else {
                let exec = meta.permissions().mode() & 0o100 != 0;
                out.insert(rel, (exec, std::fs::read(&path).unwrap(), false));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

fn project() -> Host {
    let host = Host::git(&[
        ("a.txt", "one\n"),
        ("gone.txt", "bye\n"),
        ("old_name.txt", "moving\n"),
        ("dir_a/one.txt", "1\n"),
        ("dir_a/two.txt", "2\n"),
        ("script.sh", "#!/bin/sh\necho hi\n"),
        ("target1.txt", "t1\n"),
        ("target2.txt", "t2\n"),
        ("replaced/old1.txt", "o1\n"),
        ("replaced/old2.txt", "o2\n"),
    ]);
    std::fs::write(host.project.join("bin.dat"), [7u8, 0, 7]).unwrap();
    symlink("target1.txt", host.project.join("link")).unwrap();
    git(&host.project, &["add", "-A"]);
    git(&host.project, &["commit", "-q", "-m", "binary and link"]);
    host
}

#[test]
fn the_patch_holds_every_kind_of_change_byte_for_byte() {
    if podman_ready_blocking().is_none() {
        return;
    }
    let host = project();
    let before = snapshot(&host.project);
    // What the same commands make of a plain copy, on the host.
    let expected_dir = tempfile::tempdir().unwrap();
    let expected = expected_dir.path().join("p");
    let copied = Command::new("cp")
        .args(["-a"])
        .arg(&host.project)
        .arg(&expected)
        .status()
        .unwrap();
    assert!(copied.success());
    let ran = Command::new("bash")
        .args(["-c", CHANGES])
        .current_dir(&expected)
        .status()
        .unwrap();
    assert!(ran.success());

    let mock = MockServer::start(script(vec![bash(CHANGES)]));
    let out = host
        .ah(&mock.url())
        .args(["--review", "never", "change everything"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("copying the project"),
        "the run used the overlay:\n{}",
        describe(&out)
    );
    let run = host.run();
    assert!(!run.join("work").exists(), "nothing was copied");
    // The upper and scratch folders go with the container, after ah.
    crate::support::podman::sandbox_folders_gone(&run);
    // The project was never written; the patch carries everything.
    assert_eq!(snapshot(&host.project), before);
    git(
        &host.project,
        &[
            "apply",
            "--binary",
            "--index",
            run.join("session.patch").to_str().unwrap(),
        ],
    );
    assert_eq!(snapshot(&host.project), snapshot(&expected));
}

#[test]
fn a_file_the_user_changes_during_the_run_is_reported() {
    if podman_ready_blocking().is_none() {
        return;
    }
    let host = Host::git(&[("a.txt", "one\n"), ("b.txt", "bee\n")]);
    // The step marks that it runs (so the run's baseline is taken: no
    // command runs before it), waits until the user has changed a.txt in
    // the project, then changes it too (and shows what it saw).
    let wait = "touch started; \
                for i in $(seq 300); do grep -q user a.txt && break; sleep 0.1; done; \
                cat a.txt; echo run >> a.txt";
    let mock = MockServer::start(script(vec![bash(wait)]));
    let child = host
        .ah(&mock.url())
        .args(["--review", "never", "edit a"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Changed before the baseline is read, a.txt would be the run's
    // starting point, not a change during it.
    crate::support::host::wait_until(
        "the step to start",
        std::time::Duration::from_secs(60),
        || {
            host.runs()
                .first()
                .is_some_and(|run| run.join("upper/started").exists())
        },
    );
    host.write("a.txt", "one\nuser\n");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("the project changed during the run where the run changed it too (a.txt)"),
        "{stderr}"
    );
    let told = mock.requests()[1].told();
    assert!(
        told.contains("user"),
        "the agent saw the user's version: {told}"
    );
}
