//! The host `ah` process stays small whatever the model does with the
//! sandbox's files (issue 13 §7): each case below drives one worst case
//! through the real binary (`--backend none`, a scripted model) while the
//! test polls the process's peak resident size (`VmHWM` in
//! `/proc/<pid>/status`) until it exits, and asserts it stays under
//! [`PEAK_LIMIT`].

use std::io::Read as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::host::{Host, json_file, query};
use crate::support::mock::MockServer;
use crate::support::steps::{bash, script};
use serde_json::{Value, json};

/// The most the host `ah` may hold in memory at once.
pub(crate) const PEAK_LIMIT: u64 = 256 * 1024 * 1024;

/// Spawns `command` with its stderr piped, and returns the largest
/// `VmHWM` (peak resident size) seen while it ran, in bytes, its exit code
/// and its stderr; the peak is printed with the time taken.
pub(crate) fn run_measuring_peak(mut command: Command) -> (u64, Option<i32>, String) {
    command.stdout(Stdio::null()).stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = command.spawn().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let (peak, code) = peak_until_exit(child);
    let stderr = reader.join().unwrap();
    eprintln!(
        "peak RSS {:.1} MiB in {:.1}s",
        peak as f64 / 1048576.0,
        started.elapsed().as_secs_f64()
    );
    (peak, code, stderr)
}

/// The largest `VmHWM` (peak resident size) seen while `child` ran, in
/// bytes, and its exit code.
fn peak_until_exit(mut child: Child) -> (u64, Option<i32>) {
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    loop {
        // Read before checking for the exit: once reaped, /proc is gone.
        if let Ok(status) = std::fs::read_to_string(&status_file)
            && let Some(kib) = status
                .lines()
                .find_map(|line| line.strip_prefix("VmHWM:"))
                .and_then(|rest| {
                    rest.trim()
                        .trim_end_matches("kB")
                        .trim()
                        .parse::<u64>()
                        .ok()
                })
        {
            peak = peak.max(kib * 1024);
        }
        if let Some(status) = child.try_wait().unwrap() {
            return (peak, status.code());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Runs `ah` on `host` with the scripted `steps` and extra `args`, and
/// returns its peak resident size, its stderr and the mock model.
fn run(host: &Host, steps: Vec<(&str, Value)>, args: &[&str]) -> (u64, String, MockServer) {
    run_exit(host, steps, args, 0)
}

/// [`run`], for a run that ends with exit code `exit`.
fn run_exit(
    host: &Host,
    steps: Vec<(&str, Value)>,
    args: &[&str],
    exit: i32,
) -> (u64, String, MockServer) {
    let mock = MockServer::start(script(steps));
    let mut command: Command = host.ah(&mock.url());
    command
        .args(["--backend", "none"])
        .args(args)
        .arg("stress the host");
    let (peak, code, stderr) = run_measuring_peak(command);
    assert_eq!(code, Some(exit), "{stderr}");
    (peak, stderr, mock)
}

/// The tool results the model was sent, in order.
fn results(mock: &MockServer) -> Vec<Value> {
    let requests = mock.requests();
    requests
        .last()
        .unwrap()
        .messages()
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|block| block["type"] == "tool_result")
        .cloned()
        .collect()
}

pub(crate) fn assert_small(peak: u64) {
    assert!(
        peak < PEAK_LIMIT,
        "peak RSS {} MiB is over {} MiB",
        peak >> 20,
        PEAK_LIMIT >> 20
    );
}

fn size(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().len()
}

#[test]
fn reading_a_sparse_gigabyte_file_reads_only_a_page() {
    // Ignored by the project's git, so the step keeps a file over the
    // 50 MiB a recorded file may have.
    let host = Host::git(&[(".gitignore", "scratch/\n")]);
    let (peak, _, mock) = run(
        &host,
        vec![
            bash("mkdir scratch && truncate -s 1G scratch/sparse.bin"),
            ("read", json!({"path": "scratch/sparse.bin"})),
        ],
        &["--review", "never"],
    );
    assert_small(peak);
    let told = results(&mock)[1]["content"].as_str().unwrap().to_string();
    assert!(told.contains("binary"), "{told}");
}

#[test]
fn an_edit_that_would_multiply_a_file_is_refused() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let (peak, _, mock) = run(
        &host,
        vec![
            bash("head -c 1000000 /dev/zero | tr '\\0' a > big.txt"),
            (
                "edit",
                json!({"path": "big.txt", "old_string": "a", "new_string": "b".repeat(1000),
                       "replace_all": true}),
            ),
            (
                "read",
                json!({"path": "big.txt", "offset": 1, "limit": 1_000_000_000}),
            ),
        ],
        &["--review", "never"],
    );
    assert_small(peak);
    let results = results(&mock);
    let told = results[1]["content"].as_str().unwrap();
    assert_eq!(results[1]["is_error"], true, "{told}");
    assert!(told.contains("MiB"), "{told}");
    let run = host.run();
    for step in 1..=3 {
        for suffix in ["out", "err"] {
            let file = run.join(format!("steps/step-{step}.{suffix}"));
            assert!(size(&file) <= 16 << 20, "{}", file.display());
        }
    }
}

#[test]
fn apply_patch_on_a_big_file_is_refused_without_reading_it() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let patch = "*** Begin Patch\n*** Update File: big.txt\n@@\n-1\n+one\n 2\n*** End Patch\n";
    let (peak, stderr, _) = run(
        &host,
        vec![
            bash("seq 1 5000000 > big.txt"),
            ("apply_patch", json!({"input": patch})),
        ],
        &["--review", "never"],
    );
    assert_small(peak);
    assert!(
        stderr.contains("/work/big.txt is 37.1 MiB, over the 8.0 MiB that apply_patch works on"),
        "{stderr}"
    );
}

#[test]
fn bash_printing_gigabytes_keeps_head_and_tail_only() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let (peak, _, mock) = run(
        &host,
        vec![bash(
            "echo first; head -c 2G /dev/zero | tr '\\0' y; echo; echo last",
        )],
        &["--review", "never"],
    );
    assert_small(peak);
    let told = results(&mock)[0]["content"].as_str().unwrap().to_string();
    assert!(told.starts_with("first\n"), "{told}");
    assert!(told.contains("last\n"), "{told}");
    let out = host.run().join("steps/step-1.out");
    assert!(size(&out) <= 16 << 20);
}

#[test]
fn a_patch_of_big_binaries_is_streamed_to_disk_and_not_applied() {
    // Three files of 24 MiB (under the 50 MiB a recorded file may have)
    // make a patch over the 64 MiB --review auto applies. (Six of 47 MiB
    // behave the same, slower.)
    let host = Host::git(&[("a.txt", "one\n")]);
    let make = "for i in 1 2 3; do head -c 24M /dev/urandom > bin$i; done";
    // 3: the patch was not applied.
    let (peak, stderr, _) = run_exit(&host, vec![bash(make)], &["--review", "auto"], 3);
    assert_small(peak);
    let run = host.run();
    let patch = size(&run.join("session.patch"));
    assert!(
        patch > (3 * 24) << 20,
        "the whole patch is kept: {patch} bytes"
    );
    let manifest = json_file(&run.join("manifest.json"));
    assert_eq!(manifest["review"]["decision"], "saved", "{manifest}");
    assert!(
        stderr.contains("not applied automatically: patch too big: ")
            && stderr.contains(" > 64.0 MiB"),
        "{stderr}"
    );
    assert!(!host.project.join("bin1").exists(), "nothing was applied");
}

#[test]
fn a_run_past_its_disk_budget_stops_and_its_patch_is_not_applied() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let (_, stderr, mock) = run_exit(
        &host,
        vec![bash("head -c 8M /dev/urandom > blob")],
        &["--review", "auto", "--disk-budget", "5M"],
        // 4: stopped by a limit, the patch saved, not applied.
        4,
    );
    // The model is not asked again: no more tools run.
    assert_eq!(mock.requests().len(), 1);
    let stored = query(
        &host.sessions()[0],
        "SELECT content FROM content_blocks WHERE block_type = 'tool_result'",
    );
    let told = stored[0][0].as_str().unwrap();
    assert!(
        told.contains("[ah: the run is stopped: the run's files take ")
            && told.contains("over its disk budget of 5.0 MiB (raise it with --disk-budget"),
        "{told}"
    );
    // A limit, not a taint. The run's folder already holds more than the
    // budget (the blob in the shadow repo), so the patch, which would take
    // more, is not saved: the run says how to make it from the shadow repo.
    let manifest = json_file(&host.run().join("manifest.json"));
    assert!(manifest["poisoned"].is_null(), "{manifest}");
    assert_eq!(manifest["applied"], serde_json::json!(false), "{manifest}");
    assert!(manifest["patch_not_saved"].is_string(), "{manifest}");
    assert!(
        stderr.contains("passed its disk budget; its patch was not saved (see above)"),
        "{stderr}"
    );
    assert!(!host.run().join("session.patch").exists());
    assert!(!host.project.join("blob").exists());
}
