//! What a run writes at its end counts against its disk budget: files that
//! take almost nothing in the work copy (sparse files, one file under many
//! hard links) are written out whole as artifacts and in the patch, so each
//! is counted by the bytes it will take, every link on its own, and writing
//! stops at the budget. Through the real binary (`--backend none`, and
//! podman's overlay for the sparse files), a scripted model; the run folder
//! is measured by its allocated blocks, as `du` does.

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Output;

use serde_json::Value;

use crate::support::host::{Host, describe, json_file};
use crate::support::mock::MockServer;
use crate::support::podman::podman_ready_blocking;
use crate::support::steps::{bash, script};

/// The budget of these runs.
const BUDGET: &str = "100M";
const BUDGET_BYTES: u64 = 100 << 20;

/// Exit code of a run stopped by one of its limits.
const LIMIT: i32 = 4;

/// Runs one bash step `command` on `host` with the budget, to the end,
/// with `--backend none`.
fn run(host: &Host, command: &str) -> Output {
    run_within(host, command, BUDGET, "none")
}

/// [`run`] with a budget of `budget` and the backend `backend`.
fn run_within(host: &Host, command: &str, budget: &str, backend: &str) -> Output {
    let mock = MockServer::start(script(vec![bash(command)]));
    host.ah(&mock.url())
        .args(["--backend", backend, "--review", "never"])
        .args(["--disk-budget", budget, "make files"])
        .output()
        .unwrap_or_else(|e| panic!("run ah: {e}"))
}

/// Bytes allocated under `dir`, each inode once, links not followed.
fn allocated(dir: &Path) -> u64 {
    let mut seen = HashSet::new();
    let mut pending = vec![dir.to_path_buf()];
    let mut total = 0;
    while let Some(folder) = pending.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let entry = entry.unwrap();
            let meta = entry.metadata().unwrap();
            if seen.insert((meta.dev(), meta.ino())) {
                total += meta.blocks() * 512;
            }
            if meta.is_dir() {
                pending.push(entry.path());
            }
        }
    }
    total
}

/// The artifacts the manifest says were not kept for the disk budget.
fn over_budget(manifest: &Value) -> Vec<String> {
    manifest["artifacts_skipped"]
        .as_array()
        .unwrap_or_else(|| panic!("no artifacts_skipped: {manifest}"))
        .iter()
        .filter(|skip| skip["kind"] == "over_budget")
        .map(|skip| skip["path"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn sparse_files_are_kept_as_artifacts_only_up_to_the_disk_budget() {
    sparse_files_within_the_budget("none");
}

#[test]
fn sparse_files_in_the_overlay_are_kept_only_up_to_the_disk_budget() {
    if podman_ready_blocking().is_none() {
        return;
    }
    sparse_files_within_the_budget("podman");
}

/// 40 sparse files of 10 MiB each, made with `backend`: 400 MiB if all
/// were kept.
fn sparse_files_within_the_budget(backend: &str) {
    let host = Host::git(&[("a.txt", "one\n")]);
    let out = run_within(
        &host,
        "for i in $(seq 40); do truncate -s 10M sparse$i; done",
        BUDGET,
        backend,
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let run = host.run();
    let used = allocated(&run);
    assert!(
        used < BUDGET_BYTES,
        "the run folder takes {used} bytes, over its {BUDGET} budget:\n{}",
        describe(&out)
    );
    // The patch is small (a compressed hunk of zeros per file): saved.
    let patch = std::fs::read_to_string(run.join("session.patch")).unwrap();
    assert_eq!(patch.matches("diff --git").count(), 40);
    let manifest = json_file(&run.join("manifest.json"));
    let kept = manifest["artifacts"].as_array().unwrap().len();
    let dropped = over_budget(&manifest);
    assert!(kept > 0 && kept < 10, "{manifest}");
    assert_eq!(kept + dropped.len(), 40, "{manifest}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "{} of the run's 40 new files were not kept",
            dropped.len()
        )) && stderr.contains("disk budget")
            && stderr.contains(&dropped[0]),
        "{stderr}"
    );
}

#[test]
fn a_file_under_many_links_is_counted_once_per_link_at_the_end() {
    let host = Host::git(&[("a.txt", "one\n")]);
    // 10 MiB that do not compress, under 41 names: a patch of ~500 MiB and
    // 410 MiB of artifacts, from a work copy of 10 MiB.
    let out = run(
        &host,
        "head -c 10M /dev/urandom > big && for i in $(seq 40); do ln big link$i; done",
    );
    assert_eq!(out.status.code(), Some(LIMIT), "{}", describe(&out));
    let run = host.run();
    let used = allocated(&run);
    assert!(
        used < BUDGET_BYTES,
        "the run folder takes {used} bytes, over its {BUDGET} budget:\n{}",
        describe(&out)
    );
    // The patch does not fit: not saved, and the run says where its
    // changes are.
    assert!(!run.join("session.patch").exists());
    let manifest = json_file(&run.join("manifest.json"));
    assert!(
        manifest["patch_not_saved"]
            .as_str()
            .is_some_and(|why| why.contains("disk budget")),
        "{manifest}"
    );
    assert_eq!(manifest["review"]["decision"], "stopped", "{manifest}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("session.patch was not saved")
            && stderr.contains("shadow.git diff --binary"),
        "{stderr}"
    );
    let kept = manifest["artifacts"].as_array().unwrap().len();
    let dropped = over_budget(&manifest);
    assert!(kept > 0 && kept < 10, "{manifest}");
    assert_eq!(kept + dropped.len(), 41, "{manifest}");
}

#[test]
fn a_run_stopped_at_its_budget_keeps_the_patch_that_fits() {
    let host = Host::git(&[("a.txt", "one\n")]);
    // 8 MiB written out in the work copy stop the run at a 5M budget; in
    // the shadow repo and the patch they take a few KiB.
    let out = run_within(&host, "head -c 8M /dev/zero > zeros", "5M", "none");
    assert_eq!(out.status.code(), Some(LIMIT), "{}", describe(&out));
    let run = host.run();
    assert!(allocated(&run) < 5 << 20, "{}", describe(&out));
    let patch = std::fs::read_to_string(run.join("session.patch")).unwrap();
    assert!(patch.contains("diff --git a/zeros b/zeros"), "{patch}");
    let manifest = json_file(&run.join("manifest.json"));
    assert!(manifest["patch_not_saved"].is_null(), "{manifest}");
    // The artifact of 8 MiB does not fit what is left.
    assert_eq!(over_budget(&manifest), ["zeros"], "{manifest}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("the patch so far is saved, not applied"),
        "{stderr}"
    );
}
