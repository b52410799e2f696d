//! What attempts side by side (`ah -N`) cost over one run, on the real
//! binary with podman, against the tests' mock model server taking 1 s per
//! answer, 5 answers per attempt (4 `bash` calls, then the end):
//!
//! - wall time of `-N 4 -j 4` against a single run of the same task, in the
//!   same bench run, alternately (target: 4 attempts ≤ 1.3× one);
//! - with `-N 8 -j 8`: ah's own peak resident size (`VmHWM`, read while it
//!   runs; podman's processes are not ah's) and when the last of the 8
//!   attempts ran its first command, after ah was started (targets:
//!   ≤ 150 MiB, ≤ 1.5 s).
//!
//! Each run starts once the detached cleanups of the one before have
//! ended (they would otherwise take CPU from its start).
//!
//! Run with `cargo bench --bench attempts`, or one part:
//! `cargo bench --bench attempts -- eight`. `AH_BENCH_BIN=/path/to/ah`
//! measures another build.

// The workspace denies unwrap and expect outside tests; a bench is a test
// harness of its own (clippy does not count it as a test), where a failure
// should stop the measurement with the message it panics with.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/support"]
mod support {
    #[allow(dead_code)]
    pub(crate) mod mock;
}

mod common;

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::Project;
use serde_json::json;
use support::mock::{MockServer, Reply, Turn};

/// Runs of each kind; the spread shows the noise.
const REPEATS: usize = 3;
/// What one answer of the model takes.
const ANSWER: Duration = Duration::from_secs(1);
/// `bash` calls of an attempt before its last answer.
const CALLS: usize = 4;

fn main() {
    let ah = common::ah_binary();
    if let Some(why) = common::podman_missing() {
        println!("attempts bench: skipped: {why}");
        return;
    }
    let parts: [common::Part<Path>; 2] = [("side_by_side", side_by_side), ("eight", eight)];
    common::run_parts(&parts, &ah);
}

/// What one run of ah gave: its wall time, ah's peak resident size, when
/// ah was started, and the project it ran in.
struct Ran {
    wall: Duration,
    peak: u64,
    launched: Duration,
    project: Project,
}

/// An answer after `ANSWER`: its first event at once, the rest then.
fn slow(reply: Reply) -> Turn {
    Turn::stall(reply, 1, ANSWER)
}

fn call(id: String, command: &str) -> Turn {
    slow(Reply::new().tool_use(id, "bash", json!({ "command": command })))
}

/// The answers for `attempts` attempts going on in step: every attempt's
/// first request gets one of the first `attempts` answers, and so on;
/// `first` is the first command of each.
fn script(attempts: usize, first: &str) -> Vec<Turn> {
    let mut turns = Vec::new();
    for round in 0..CALLS {
        for attempt in 0..attempts {
            let command = match round {
                0 => first,
                _ => "true",
            };
            turns.push(call(format!("toolu_{round}_{attempt}"), command));
        }
    }
    turns.extend((0..attempts).map(|_| slow(Reply::new().text("done"))));
    turns
}

/// A whole run of `ah ARGS` with `attempts` attempts' answers, once its
/// detached cleanups have ended.
fn run(ah: &Path, attempts: usize, first: &str, args: &[&str]) -> Ran {
    let project = Project::new();
    let mock = MockServer::start(script(attempts, first));
    let launched = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is past 1970");
    let started = Instant::now();
    let mut child = project
        .command(ah, &mock.url())
        .args(["--backend", "podman", "--review", "never"])
        .args(args)
        .arg("change the project")
        .spawn()
        .expect("run ah");
    let status = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    let status = loop {
        if let Some(hwm) = std::fs::read_to_string(&status)
            .ok()
            .and_then(|text| vm_hwm(&text))
        {
            peak = peak.max(hwm);
        }
        if let Some(status) = child.try_wait().expect("wait for ah") {
            break status;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let elapsed = started.elapsed();
    let output = child.wait_with_output().expect("ah's output");
    assert!(
        status.success(),
        "ah {args:?} failed ({status}):\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        common::cleanup_over(&project.path(), common::CLEANUP_LIMIT),
        "the runs' cleanups did not end within {:?}",
        common::CLEANUP_LIMIT
    );
    Ran {
        wall: elapsed,
        peak,
        launched,
        project,
    }
}

/// `VmHWM` of a `/proc/PID/status`, in bytes.
fn vm_hwm(status: &str) -> Option<u64> {
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

fn side_by_side(ah: &Path) {
    // One of each warms the caches.
    run(ah, 1, "true", &[]);
    run(ah, 4, "true", &["-N", "4", "-j", "4"]);
    let (mut one, mut four, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..REPEATS {
        let single = run(ah, 1, "true", &[]).wall;
        let attempts = run(ah, 4, "true", &["-N", "4", "-j", "4"]).wall;
        one.push(single);
        four.push(attempts);
        ratio.push(attempts.as_secs_f64() / single.as_secs_f64());
    }
    ratio.sort_by(f64::total_cmp);
    println!("whole run, 5 answers of 1 s, podman ({REPEATS} runs each, alternately):");
    println!("  one run                 {}", common::spread(&mut one));
    println!("  -N 4 -j 4               {}", common::spread(&mut four));
    println!(
        "  -N 4 / one              min {:.2}×  median {:.2}×  max {:.2}×  (target ≤ 1.3×)",
        ratio[0],
        ratio[ratio.len() / 2],
        ratio[ratio.len() - 1]
    );
}

fn eight(ah: &Path) {
    // One warms the caches.
    run(ah, 8, "true", &["-N", "8", "-j", "8"]);
    let (mut peaks, mut lasts, mut walls) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..REPEATS {
        // Each attempt's first command writes when it ran into its patch.
        let ran = run(ah, 8, "date +%s%N > first", &["-N", "8", "-j", "8"]);
        let firsts = first_commands(&ran.project);
        assert_eq!(firsts.len(), 8, "every attempt ran its first command");
        let last = firsts.into_iter().max().expect("eight times");
        lasts.push(last.saturating_sub(ran.launched));
        peaks.push(ran.peak);
        walls.push(ran.wall);
    }
    peaks.sort();
    println!("-N 8 -j 8, podman ({REPEATS} runs):");
    println!("  whole run               {}", common::spread(&mut walls));
    println!(
        "  launch → 8th attempt's first command  {}  (target ≤ 1500 ms)",
        common::spread(&mut lasts)
    );
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    println!(
        "  ah's peak RSS           min {:.1} MiB  median {:.1} MiB  max {:.1} MiB  (target ≤ 150 MiB)",
        mib(peaks[0]),
        mib(peaks[peaks.len() / 2]),
        mib(peaks[peaks.len() - 1])
    );
}

/// When each attempt's first command ran, from the `first` file its patch
/// adds (nanoseconds since the epoch).
fn first_commands(project: &Project) -> Vec<Duration> {
    let runs = project.path().join(".ah/runs");
    std::fs::read_dir(&runs)
        .expect("runs")
        .filter_map(|run| {
            let patch = std::fs::read_to_string(run.ok()?.path().join("session.patch")).ok()?;
            let at = patch.lines().find_map(|line| {
                line.strip_prefix('+')
                    .filter(|rest| rest.chars().all(|c| c.is_ascii_digit()) && !rest.is_empty())
            })?;
            Some(Duration::from_nanos(at.parse().ok()?))
        })
        .collect()
}
