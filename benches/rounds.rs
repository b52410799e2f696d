//! What ah itself costs around the model, measured on the real binary
//! against the tests' mock model server:
//!
//! - per tool round: a run of K `bash true` rounds against a run of one,
//!   `--backend none`; (wall time of K − wall time of 1) / (K − 1) is one
//!   round (a model request and its answer, the step, its records), and
//!   the same less the step's own `duration_ms` is ah's overhead;
//! - start → first model request: from spawning `ah` to the mock receiving
//!   the first request, `--backend none` against podman (skipped, with a
//!   message, where podman or its image is missing);
//! - a whole run with one write step on podman, on a project of 70 000
//!   files against one of 20: what ah adds that grows with the project
//!   (prepare, steps, patch, cleanup). Skipped like the podman start;
//! - a whole `--backend none` run with one write step, and a whole
//!   `ah work` run (plan, one write, check, verdict) with each backend, on
//!   70 000 files against 20: the copy (the old way, still taken where no
//!   overlay can be mounted: here a project path with ':') against the
//!   overlay (in a namespace of its own with none; podman skipped as
//!   above);
//! - a whole run whose model calls no tool, `--backend none` against
//!   podman the old way (`-c sandbox.cleanup=wait`: the run waits for the
//!   container it never used, then removes it) and the new (the start is
//!   abandoned, the removal detached);
//! - the end of a podman run with one `bash true` step: from the mock
//!   receiving the last request to ah's exit, none against podman the old
//!   way and the new. Between two runs the bench waits for the detached
//!   cleanup to end, so that runs do not slow each other.
//!
//! Run with `cargo bench --bench rounds`; `cargo bench --bench rounds --
//! WORD` runs only the parts whose name holds WORD (`round`, `start`,
//! `large`, `copy`, `tool`, `end`). `AH_BENCH_BIN=/path/to/ah` measures another build (an
//! older commit, say) with the same harness.

// The workspace denies unwrap and expect outside tests; a bench is a test
// harness of its own (clippy does not count it as a test), where a failure
// should stop the measurement with the message it panics with.
#![allow(clippy::unwrap_used, clippy::expect_used)]

// The tests' mock model server, as a module of its own folder so that its
// submodules are found beside it.
#[path = "../tests/support"]
mod support {
    #[allow(dead_code)]
    pub(crate) mod mock;
}

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::Project;
use serde_json::json;
use support::mock::{MockServer, Reply, Turn};

/// Tool rounds of the long run.
const ROUNDS: usize = 20;
/// Runs of each kind; the spread shows the noise.
const REPEATS: usize = 7;

/// A part of this bench, by the name `cargo bench -- WORD` picks it with.
type Part = common::Part<Path>;

fn main() {
    let ah = common::ah_binary();
    let parts: [Part; 6] = [
        ("per_round", per_round),
        ("start_to_first_request", start_to_first_request),
        ("large_against_tiny", large_against_tiny),
        ("copy_against_overlay", copy_against_overlay),
        ("no_tool_call", no_tool_call),
        ("end_after_last_answer", end_after_last_answer),
    ];
    common::run_parts(&parts, &ah);
}

/// What this bench does with a project.
trait Runs {
    fn command_with(&self, ah: &Path, mock: &MockServer, backend: &str) -> Command;
    fn run(&self, ah: &Path, mock: &MockServer, backend: &str);
    fn step_time(&self) -> Duration;
}

impl Runs for Project {
    /// `ah` with `backend` and the model at `mock`, output captured.
    fn command_with(&self, ah: &Path, mock: &MockServer, backend: &str) -> Command {
        let mut command = self.command(ah, &mock.url());
        command.args(["--backend", backend, "--review", "never", "--new", "bench"]);
        command
    }

    /// One run of `ah` with `backend`, the model at `mock`, to the end.
    fn run(&self, ah: &Path, mock: &MockServer, backend: &str) {
        let out = self
            .command_with(ah, mock, backend)
            .output()
            .expect("run ah");
        check(&out, backend);
    }

    /// The sum of the steps' own `duration_ms` in the newest run.
    fn step_time(&self) -> Duration {
        let runs = self.path().join(".ah/runs");
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(&runs)
            .expect("runs dir")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        dirs.sort();
        let steps = dirs.last().expect("a run").join("steps");
        let mut total = 0;
        for entry in std::fs::read_dir(steps).expect("steps dir").flatten() {
            let path = entry.path();
            if path.to_string_lossy().ends_with(".meta.json") {
                let meta: serde_json::Value =
                    serde_json::from_slice(&std::fs::read(&path).expect("read meta"))
                        .expect("meta is JSON");
                total += meta["duration_ms"].as_u64().unwrap_or_default();
            }
        }
        Duration::from_millis(total)
    }
}

/// Stops the bench when a run failed: its times would mean nothing.
fn check(out: &Output, backend: &str) {
    if !out.status.success() {
        panic!(
            "ah --backend {backend} failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// `rounds` calls of `bash true N` (each its own, so that loop detection
/// stays out of it), then "done".
fn script(rounds: usize) -> Vec<Turn> {
    let mut turns: Vec<Turn> = (1..=rounds)
        .map(|i| {
            Turn::reply(Reply::new().tool_use(
                format!("toolu_{i}"),
                "bash",
                json!({"command": format!("true {i}")}),
            ))
        })
        .collect();
    turns.push(Turn::reply(Reply::new().text("done")));
    turns
}

/// Wall time of one run of `rounds` rounds, and its steps' own time.
fn timed_run(ah: &Path, rounds: usize) -> (Duration, Duration) {
    let project = Project::new();
    let mock = MockServer::start(script(rounds));
    let started = Instant::now();
    project.run(ah, &mock, "none");
    (started.elapsed(), project.step_time())
}

fn per_round(ah: &Path) {
    let mut round = Vec::new();
    let mut overhead = Vec::new();
    // One run of each to warm the page cache.
    timed_run(ah, 1);
    for _ in 0..REPEATS {
        let (long, long_steps) = timed_run(ah, ROUNDS);
        let (short, short_steps) = timed_run(ah, 1);
        let extra = (ROUNDS - 1) as u32;
        let per = long.saturating_sub(short) / extra;
        let steps = long_steps.saturating_sub(short_steps) / extra;
        round.push(per);
        overhead.push(per.saturating_sub(steps));
    }
    println!("per tool round, --backend none ({ROUNDS} rounds vs 1, {REPEATS} times):");
    println!(
        "  round (request, step, records)  {}",
        common::spread(&mut round)
    );
    println!(
        "  ah's overhead (round − step)    {}",
        common::spread(&mut overhead)
    );
}

/// From spawning `ah` to the mock's first request, for a run whose model
/// answers at once without a tool call.
fn first_request(ah: &Path, backend: &str) -> Duration {
    let project = Project::new();
    let mock = MockServer::start(vec![Turn::reply(Reply::new().text("done"))]);
    let started = Instant::now();
    let child = project
        .command_with(ah, &mock, backend)
        .spawn()
        .expect("spawn ah");
    mock.wait_for_requests(1, Duration::from_secs(120));
    let first = started.elapsed();
    check(&child.wait_with_output().expect("wait for ah"), backend);
    first
}

fn start_to_first_request(ah: &Path) {
    println!("start → first model request ({REPEATS} runs each):");
    let mut none: Vec<Duration> = (0..REPEATS).map(|_| first_request(ah, "none")).collect();
    println!("  --backend none    {}", common::spread(&mut none));
    if let Some(why) = common::podman_missing() {
        println!("  --backend podman  skipped: {why}");
        return;
    }
    // The first podman run of a while pays for a cold podman.
    first_request(ah, "podman");
    let mut podman: Vec<Duration> = (0..REPEATS).map(|_| first_request(ah, "podman")).collect();
    println!("  --backend podman  {}", common::spread(&mut podman));
}

/// Files of the large project.
const LARGE: usize = 70_000;

/// Wall time of a podman run of `project` with one step that writes a file.
fn one_write_step(ah: &Path, project: &Project) -> Duration {
    write_step_run(ah, project, "podman")
}

/// Wall time of a run of `project` on `backend` whose one step writes a
/// file and changes another.
fn write_step_run(ah: &Path, project: &Project, backend: &str) -> Duration {
    let mock = MockServer::start(vec![
        Turn::reply(Reply::new().tool_use(
            "toolu_1",
            "bash",
            json!({"command": "echo new > src/new.rs && echo x >> src/m0/f0.rs"}),
        )),
        Turn::reply(Reply::new().text("done")),
    ]);
    let started = Instant::now();
    project.run(ah, &mock, backend);
    started.elapsed()
}

fn large_against_tiny(ah: &Path) {
    if let Some(why) = common::podman_missing() {
        println!("whole run, one write step, --backend podman: skipped: {why}");
        return;
    }
    let (tiny, large) = (Project::new(), Project::with_files(LARGE));
    // One run of each warms podman and the page cache.
    one_write_step(ah, &tiny);
    one_write_step(ah, &large);
    let (mut small, mut big, mut extra) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..REPEATS {
        let (t, l) = (one_write_step(ah, &tiny), one_write_step(ah, &large));
        small.push(t);
        big.push(l);
        extra.push(l.saturating_sub(t));
    }
    println!("whole run, one write step, --backend podman ({REPEATS} runs each):");
    println!("  20 files          {}", common::spread(&mut small));
    println!("  {LARGE} files       {}", common::spread(&mut big));
    println!("  {LARGE} − 20        {}", common::spread(&mut extra));
}

/// How a run is set up: its backend, and for podman whether the run waits
/// for its sandbox's removal (the old way).
#[derive(Clone, Copy)]
enum Way {
    None,
    PodmanWaiting,
    Podman,
}

impl Way {
    /// `ah` the way `self` says, output captured.
    fn command(self, ah: &Path, project: &Project, mock: &MockServer) -> Command {
        let backend = match self {
            Way::None => "none",
            Way::PodmanWaiting | Way::Podman => "podman",
        };
        let mut command = project.command_with(ah, mock, backend);
        if let Way::PodmanWaiting = self {
            command.args(["-c", "sandbox.cleanup=wait"]);
        }
        command
    }

    fn label(self) -> &'static str {
        match self {
            Way::None => "--backend none                    ",
            Way::PodmanWaiting => "podman, old: waits for its sandbox",
            Way::Podman => "podman, new: cleanup detached    ",
        }
    }
}

/// Wall time of a run whose model answers at once without a tool call.
fn no_tool_run(ah: &Path, way: Way) -> Duration {
    let project = Project::new();
    let mock = MockServer::start(vec![Turn::reply(Reply::new().text("done"))]);
    let started = Instant::now();
    let out = way.command(ah, &project, &mock).output().expect("run ah");
    let took = started.elapsed();
    check(&out, way.label());
    common::cleanup_over(&project.path(), common::CLEANUP_LIMIT);
    took
}

/// The three ways, `REPEATS` runs each, interleaved; their spreads.
fn each_way(ah: &Path, run: fn(&Path, Way) -> Duration) -> Vec<(Way, Vec<Duration>)> {
    let ways = [Way::None, Way::PodmanWaiting, Way::Podman];
    // One run of each warms podman and the page cache.
    for way in ways {
        run(ah, way);
    }
    let mut times: Vec<(Way, Vec<Duration>)> = ways.iter().map(|&w| (w, Vec::new())).collect();
    for _ in 0..REPEATS {
        for (way, took) in &mut times {
            took.push(run(ah, *way));
        }
    }
    times
}

/// Prints the ways' spreads and each podman way's median less none's.
fn print_ways(times: &mut [(Way, Vec<Duration>)]) {
    let median = |times: &mut Vec<Duration>| {
        times.sort();
        times[times.len() / 2]
    };
    let none = median(&mut times[0].1);
    for (way, took) in times.iter_mut() {
        let extra = median(took).as_secs_f64() * 1000.0 - none.as_secs_f64() * 1000.0;
        match way {
            Way::None => println!("  {}  {}", way.label(), common::spread(took)),
            _ => println!(
                "  {}  {}  (none {extra:+.1} ms)",
                way.label(),
                common::spread(took)
            ),
        }
    }
}

fn no_tool_call(ah: &Path) {
    if let Some(why) = common::podman_missing() {
        println!("whole run without a tool call: skipped: {why}");
        return;
    }
    let mut times = each_way(ah, no_tool_run);
    println!("whole run without a tool call ({REPEATS} runs each):");
    print_ways(&mut times);
}

/// From the mock receiving the last request of a run with one `bash true`
/// step to ah's exit.
fn after_last_answer(ah: &Path, way: Way) -> Duration {
    let project = Project::new();
    let mock = MockServer::start(script(1));
    let child = way.command(ah, &project, &mock).spawn().expect("spawn ah");
    mock.wait_for_requests(2, Duration::from_secs(120));
    let answered = Instant::now();
    let out = child.wait_with_output().expect("wait for ah");
    let took = answered.elapsed();
    check(&out, way.label());
    common::cleanup_over(&project.path(), common::CLEANUP_LIMIT);
    took
}

fn end_after_last_answer(ah: &Path) {
    if let Some(why) = common::podman_missing() {
        println!("end of a run after the last answer: skipped: {why}");
        return;
    }
    let mut times = each_way(ah, after_last_answer);
    println!("end of a run with one step, last answer → exit ({REPEATS} runs each):");
    print_ways(&mut times);
}

/// Runs of each kind on the large projects without podman (a copy of
/// 70 000 files takes seconds).
const LARGE_REPEATS: usize = 3;

/// The model's turns of an `ah work` run: plan, one write, check, verdict.
fn work_script() -> Vec<Turn> {
    let call = |id: &str, tool: &str, input: serde_json::Value| {
        Turn::reply(Reply::new().tool_use(id, tool, input))
    };
    let text = |text: &str| Turn::reply(Reply::new().text(text));
    vec![
        call("t1", "report", json!({"content": "## Approach\nWrite.\n"})),
        text("planned"),
        call("t2", "bash", json!({"command": "echo new > src/new.rs"})),
        call("t3", "report", json!({"content": "written"})),
        text("done"),
        call("t4", "report", json!({"content": "overall: pass\n"})),
        text("checked"),
        call(
            "t5",
            "verdict",
            json!({"decision": "done", "summary": "ok"}),
        ),
        text("verdict given"),
    ]
}

/// Wall time of a whole `ah work --backend none` run of `project`.
fn work_none(ah: &Path, project: &Project) -> Duration {
    work_run(ah, project, "none")
}

/// Wall time of a whole `ah work --backend podman` run of `project`.
fn work_podman(ah: &Path, project: &Project) -> Duration {
    work_run(ah, project, "podman")
}

/// Wall time of a whole `ah work` run of `project` on `backend`.
fn work_run(ah: &Path, project: &Project, backend: &str) -> Duration {
    let mock = MockServer::start(work_script());
    let issue = project.path().join("../ISSUE.md");
    std::fs::write(&issue, "Add a file\n\nsrc/new.rs must exist.\n").expect("issue");
    let started = Instant::now();
    let out = project
        .command(ah, &mock.url())
        .args(["work", "--backend", backend, "--review", "never"])
        .arg(&issue)
        .output()
        .expect("run ah work");
    check(&out, &format!("{backend} (ah work)"));
    started.elapsed()
}

/// Wall time of a whole `--backend none` run of `project` with one write.
fn none_run(ah: &Path, project: &Project) -> Duration {
    write_step_run(ah, project, "none")
}

/// A timed run of a project.
type Timed = fn(&Path, &Project) -> Duration;

fn copy_against_overlay(ah: &Path) {
    let tiny = Project::new();
    let overlay = Project::with_files(LARGE);
    // No overlay can be mounted from a path with ':': a run without podman
    // copies. Podman cannot mount such a path at all, so its old way (the
    // copy) is not measured here.
    let copy = Project::named(LARGE, "project:copy");
    let mut kinds: Vec<(&str, Timed, Option<&Project>)> = vec![
        ("--backend none, one write step", none_run, Some(&copy)),
        ("ah work --backend none", work_none, Some(&copy)),
    ];
    match common::podman_missing() {
        None => kinds.push(("ah work --backend podman", work_podman, None)),
        Some(why) => println!("whole run, ah work --backend podman: skipped: {why}"),
    }
    for (what, run, copy) in kinds {
        // One run of each warms the page cache.
        for project in [Some(&tiny), Some(&overlay), copy].into_iter().flatten() {
            run(ah, project);
        }
        let (mut small, mut over, mut copied) = (Vec::new(), Vec::new(), Vec::new());
        let (mut over_extra, mut copy_extra) = (Vec::new(), Vec::new());
        for _ in 0..LARGE_REPEATS {
            let t = run(ah, &tiny);
            let o = run(ah, &overlay);
            small.push(t);
            over.push(o);
            over_extra.push(o.saturating_sub(t));
            if let Some(copy) = copy {
                let c = run(ah, copy);
                copied.push(c);
                copy_extra.push(c.saturating_sub(t));
            }
        }
        println!("whole run, {what} ({LARGE_REPEATS} runs each):");
        println!("  20 files              {}", common::spread(&mut small));
        if copy.is_some() {
            println!("  {LARGE} files, copy     {}", common::spread(&mut copied));
        }
        println!("  {LARGE} files, overlay  {}", common::spread(&mut over));
        if copy.is_some() {
            println!(
                "  copy − 20             {}",
                common::spread(&mut copy_extra)
            );
        }
        println!(
            "  overlay − 20          {}",
            common::spread(&mut over_extra)
        );
    }
}
