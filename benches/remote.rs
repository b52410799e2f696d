//! What a run on a remote podman engine (`--engine podman-remote
//! --connection ahremote`) costs against one on local rootless podman
//! (`--engine podman`), in the same bench run, on the real binary against
//! the tests' mock model server answering at once. `ah` runs as the test
//! user `AH_TEST_USER` (through `runuser`, a copy of the binary in a folder
//! it can reach, projects it owns), whose podman has the connection to the
//! "second machine": `AH_TEST_REMOTE_USER`'s rootless podman service behind
//! an sshd on 127.0.0.1:2222 (`scripts/setup` makes it). Measured:
//!
//! - launch → first command: from spawning `runuser … ah` to the moment the
//!   run's first `bash` command runs in the sandbox. That command is
//!   `date +%s%N`; its output, the wall clock inside the container, reaches
//!   the mock in the next request and is compared with the wall clock read
//!   just before the spawn. The engine's "second machine" is this one, so
//!   both read the same clock (on a real second machine they would not
//!   agree to the millisecond). The remote runs here start on a baseline
//!   the engine already has (20 files; sent once, by the warm-up run);
//! - per tool round: a run of 40 `bash` rounds (the first the `date`
//!   above, then `true N`) against a run of one, 7 of each per engine,
//!   alternately: (wall 40 − wall 1) / 39, and the median gap between two
//!   model requests of the long run after its first step (one round as
//!   the model sees it: the answer, the step, its records, the next
//!   request); remote against local: the ratio of the medians of the
//!   first (a difference of whole runs is noisy), the ratios run by run
//!   of the second (target: remote ≤ 2× local);
//! - a project of 70 000 files, committed: `traffic` of the runs'
//!   manifests, whose one step appends a line to one file: the bytes the
//!   step sent and brought back (target ≤ 64 KiB), and those sent at the
//!   start by the first run on a baseline the engine has not seen (the
//!   baseline's tar) against the second run on it (target ≤ 1 MiB); each
//!   time a new commit makes a new baseline. Beside them, launch → first
//!   command of those runs and of a local run on the same commit, and the
//!   median gap between requests of a run of 6 rounds on each engine
//!   (what a round costs that grows with the project).
//!
//! No time is asserted: the numbers are printed, medians with their
//! min/max. Skipped, with the reason, unless run as root with
//! `AH_TEST_USER` and `AH_TEST_REMOTE_USER` set up (`AH_TEST_USER=ahtest
//! AH_TEST_REMOTE_USER=ahremote scripts/setup`), or without podman and its
//! sandbox image. The remote engine's store keeps the baselines the bench
//! sends (it drops the oldest beyond its limit).
//!
//! Run with `AH_TEST_USER=ahtest AH_TEST_REMOTE_USER=ahremote cargo bench
//! --bench remote`; `cargo bench --bench remote -- WORD` runs only the
//! parts whose name holds WORD (`round`, `large`). `AH_BENCH_BIN=/path/to/ah`
//! measures another build.

// The workspace denies unwrap and expect outside tests; a bench is a test
// harness of its own (clippy does not count it as a test), where a failure
// should stop the measurement with the message it panics with.
#![allow(clippy::unwrap_used, clippy::expect_used)]

// The tests' mock model server, test user and remote engine, as modules of
// their own folder so that their submodules are found beside them.
#[path = "../tests/support"]
mod support {
    #[allow(dead_code)]
    pub(crate) mod mock;
    #[allow(dead_code)]
    pub(crate) mod podman;
    #[allow(dead_code)]
    pub(crate) mod remote;
}

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::Project;
use serde_json::json;
use support::mock::{MockServer, Reply, Turn};
use support::podman::TestUser;
use support::remote::{CONNECTION, RemoteEngine};

/// Tool rounds of the long run.
const ROUNDS: usize = 40;
/// Runs of each kind on each engine; the spread shows the noise.
const REPEATS: usize = 7;
/// Files of the large project.
const LARGE: usize = 70_000;
/// Baselines of the large project, each run on by both engines.
const LARGE_REPEATS: usize = 3;
/// Tool rounds of a run timed round by round on the large project.
const LARGE_ROUNDS: usize = 6;
/// The sandbox image, in each user's storage.
const IMAGE: &str = "localhost/ah-sandbox:latest";
/// The longest a run may take before the bench gives up on it.
const RUN_LIMIT: Duration = Duration::from_secs(300);

/// A part of this bench, by the name `cargo bench -- WORD` picks it with.
type Part = common::Part<Bench>;

fn main() {
    let ah = common::ah_binary();
    let bench = match Bench::new(&ah) {
        Ok(bench) => bench,
        Err(why) => {
            println!("remote bench: skipped: {why}");
            return;
        }
    };
    let parts: [Part; 2] = [("per_round", per_round), ("large", large)];
    common::run_parts(&parts, &bench);
}

/// Where a run's container runs.
#[derive(Clone, Copy)]
enum Engine {
    /// The test user's own rootless podman (`vfs` storage: the run stands
    /// on ah's cached copy of the image's root).
    Local,
    /// The remote user's rootless podman (`overlay` storage), through the
    /// test user's podman connection over ssh.
    Remote,
}

impl Engine {
    fn args(self) -> &'static [&'static str] {
        match self {
            Engine::Local => &["--engine", "podman"],
            Engine::Remote => &["--engine", "podman-remote", "--connection", CONNECTION],
        }
    }

    fn name(self) -> &'static str {
        match self {
            Engine::Local => "local",
            Engine::Remote => "remote",
        }
    }
}

/// The test user, a copy of ah it can run, and the remote engine it
/// reaches.
struct Bench {
    engine: RemoteEngine,
    /// Holds the copy of ah.
    _bin: tempfile::TempDir,
    ah: PathBuf,
}

/// What one run showed.
struct Run {
    /// Launch → exit.
    wall: Duration,
    /// Launch → the first command ran in the sandbox.
    first: Duration,
    /// The gaps between one model request and the next, after the first
    /// step's.
    gaps: Vec<Duration>,
    /// The manifest's `traffic` (start, steps), on a remote engine.
    traffic: Option<(u64, u64)>,
}

impl Bench {
    /// The bench, or why it cannot run here.
    fn new(ah: &Path) -> Result<Bench, String> {
        if !rustix::process::geteuid().is_root() {
            return Err("needs root (ah runs as AH_TEST_USER through runuser)".to_string());
        }
        for var in ["AH_TEST_REMOTE_USER", "AH_TEST_USER"] {
            if std::env::var(var).unwrap_or_default().is_empty() {
                return Err(format!(
                    "{var} is not set (AH_TEST_USER=ahtest AH_TEST_REMOTE_USER=ahremote \
                     scripts/setup makes the users and the remote engine)"
                ));
            }
        }
        if let Some(why) = common::podman_missing() {
            return Err(why);
        }
        let engine = set_up_remote()?;
        // Both engines have the image (copied to the remote one, built in
        // the user's storage), once.
        engine.ensure_image(IMAGE);
        engine.local.build_image();
        let (bin, ah) = engine.local.reachable_copy(ah);
        Ok(Bench {
            engine,
            _bin: bin,
            ah,
        })
    }

    fn user(&self) -> &TestUser {
        &self.engine.local
    }

    /// `project`, given to the user.
    fn own(&self, project: Project) -> Project {
        let path = project.path();
        let holder = path.parent().expect("the project's temp dir");
        std::fs::set_permissions(holder, std::fs::Permissions::from_mode(0o755))
            .expect("chmod the project's temp dir");
        let owner = format!("{0}:{0}", self.user().name);
        let chown = Command::new("chown")
            .args(["-R", &owner])
            .arg(&path)
            .status()
            .expect("run chown");
        assert!(chown.success(), "chown -R {owner} {}", path.display());
        // The change of owner changed every file's ctime: the index vouches
        // for them again once refreshed.
        self.git(&path, &["update-index", "-q", "--really-refresh"]);
        project
    }

    /// `git ARGS` in `project` as the user.
    fn git(&self, project: &Path, args: &[&str]) {
        let env = [
            ("GIT_AUTHOR_NAME", "Bench"),
            ("GIT_AUTHOR_EMAIL", "bench@example.com"),
            ("GIT_COMMITTER_NAME", "Bench"),
            ("GIT_COMMITTER_EMAIL", "bench@example.com"),
        ];
        let out = self
            .user()
            .command(Path::new("git"), &env)
            .arg("-C")
            .arg(project)
            .args(args)
            .output()
            .expect("run git");
        assert!(
            out.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A new commit of `project` whose tree no engine has seen: a file
    /// holding the time.
    fn new_baseline(&self, project: &Path) {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        let file = project.join("baseline.txt");
        std::fs::write(&file, format!("{}\n", now.as_nanos())).expect("write baseline.txt");
        let uid = rustix::fs::Uid::from_raw(self.user().uid);
        rustix::fs::chown(&file, Some(uid), None).expect("chown baseline.txt");
        self.git(project, &["add", "baseline.txt"]);
        self.git(project, &["commit", "-q", "-m", "baseline"]);
    }

    /// One whole run of ah as the user in `project` on `engine`, the model
    /// answering with `turns` at once; its first command must be `date
    /// +%s%N`.
    fn run(&self, project: &Path, engine: Engine, turns: Vec<Turn>) -> Run {
        let requests = turns.len();
        let mock = Arc::new(MockServer::start(turns));
        let url = mock.url();
        let env = [
            ("ANTHROPIC_BASE_URL", url.as_str()),
            ("ANTHROPIC_API_KEY", "bench-key"),
            ("NO_COLOR", "1"),
        ];
        let mut command = self.user().command(&self.ah, &env);
        command
            .args(engine.args())
            .arg("-C")
            .arg(project)
            .args(["--review", "never", "--new", "bench"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let launched = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        let started = Instant::now();
        let child = command.spawn().expect("run ah");
        // When each request arrives, from a thread of its own: were the
        // run to fail, the check below stops the bench without waiting.
        let watcher = std::thread::spawn({
            let mock = Arc::clone(&mock);
            move || {
                (1..=requests)
                    .map(|count| {
                        mock.wait_for_requests(count, RUN_LIMIT);
                        Instant::now()
                    })
                    .collect::<Vec<_>>()
            }
        });
        let out = child.wait_with_output().expect("wait for ah");
        let wall = started.elapsed();
        check(&out, engine);
        let arrivals = watcher.join().expect("the request watcher");
        let told = mock.requests()[1].told();
        let ran = told
            .lines()
            .find_map(|line| line.trim().parse::<u64>().ok())
            .unwrap_or_else(|| panic!("the first command printed no time: {told}"));
        let first = Duration::from_nanos(ran).saturating_sub(launched);
        let gaps = arrivals
            .windows(2)
            .skip(1)
            .map(|pair| pair[1] - pair[0])
            .collect();
        let manifest = newest_run(project).join("manifest.json");
        let manifest: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&manifest).expect("read the manifest"))
                .expect("the manifest is JSON");
        let traffic = &manifest["traffic"];
        let traffic = traffic["start"].as_u64().zip(traffic["steps"].as_u64());
        // The container's removal goes on after ah exits: not during the
        // next run.
        common::cleanup_over(project, common::CLEANUP_LIMIT);
        Run {
            wall,
            first,
            gaps,
            traffic,
        }
    }
}

/// The remote engine, up, or why it is not set up. Its checks panic with
/// what is missing and how to make it; that message is the reason.
fn set_up_remote() -> Result<RemoteEngine, String> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let engine = std::panic::catch_unwind(RemoteEngine::from_env);
    std::panic::set_hook(hook);
    match engine {
        Ok(Some(engine)) => Ok(engine),
        Ok(None) => Err("the remote engine is not named".to_string()),
        Err(panic) => Err(panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "the remote engine is not set up".to_string())),
    }
}

/// Stops the bench when a run failed: its times would mean nothing.
fn check(out: &Output, engine: Engine) {
    if !out.status.success() {
        panic!(
            "ah on the {} engine failed ({}):\n{}",
            engine.name(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The newest run's folder in `project`.
fn newest_run(project: &Path) -> PathBuf {
    std::fs::read_dir(project.join(".ah/runs"))
        .expect("the runs folder")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .max()
        .expect("a run")
}

fn bash(id: String, command: &str) -> Turn {
    Turn::reply(Reply::new().tool_use(id, "bash", json!({ "command": command })))
}

/// `rounds` `bash` calls, the first `date +%s%N` then `true N` (each its
/// own, so that loop detection stays out of it), then "done".
fn rounds_script(rounds: usize) -> Vec<Turn> {
    let mut turns = vec![bash("toolu_1".to_string(), "date +%s%N")];
    turns.extend((2..=rounds).map(|i| bash(format!("toolu_{i}"), &format!("true {i}"))));
    turns.push(Turn::reply(Reply::new().text("done")));
    turns
}

/// One `bash` call that says when it ran and appends a line to one file,
/// then "done".
fn one_line_script() -> Vec<Turn> {
    vec![
        bash(
            "toolu_1".to_string(),
            "date +%s%N; echo line >> src/m0/f0.rs",
        ),
        Turn::reply(Reply::new().text("done")),
    ]
}

/// The bytes of the files under `dir`.
fn file_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .expect("read a project folder")
        .map(|entry| {
            let entry = entry.expect("a project entry");
            let kind = entry.file_type().expect("an entry's type");
            if kind.is_dir() {
                file_bytes(&entry.path())
            } else {
                entry.metadata().expect("an entry's metadata").len()
            }
        })
        .sum()
}

fn median(times: &[Duration]) -> Duration {
    let mut times = times.to_vec();
    times.sort();
    times[times.len() / 2]
}

/// Prints `title`, then a row of `min / median / max` for each labelled
/// series of times.
fn print_rows<const N: usize>(title: &str, rows: [(&str, &mut Vec<Duration>); N]) {
    println!("{title}");
    for (label, times) in rows {
        println!("    {label:<26} {}", common::spread(times));
    }
}

/// `min / median / max` of `ratios`, with `target`.
fn ratio_spread(ratios: &mut [f64], target: &str) -> String {
    ratios.sort_by(f64::total_cmp);
    format!(
        "min {:5.2}×     median {:5.2}×     max {:5.2}×   ({target})",
        ratios[0],
        ratios[ratios.len() / 2],
        ratios[ratios.len() - 1]
    )
}

/// `min / median / max` of `bytes`, in bytes and the unit `unit` of
/// `scale` bytes.
fn bytes_spread(bytes: &mut [u64], unit: &str, scale: f64) -> String {
    bytes.sort();
    let show = |b: u64| format!("{b} B ({:.1} {unit})", b as f64 / scale);
    format!(
        "min {}  median {}  max {}",
        show(bytes[0]),
        show(bytes[bytes.len() / 2]),
        show(bytes[bytes.len() - 1])
    )
}

fn per_round(bench: &Bench) {
    let project = bench.own(Project::new());
    let path = project.path();
    // One run of each warms the caches (the remote one sends the tools
    // and the baseline when this build or these files are new there).
    bench.run(&path, Engine::Local, rounds_script(1));
    let warm = bench.run(&path, Engine::Remote, rounds_script(1));
    let (start, _) = warm.traffic.expect("a remote run's traffic");
    println!(
        "warm-up remote run: {start} B sent at the start (tools and baseline the engine lacked)"
    );
    let engines = [Engine::Local, Engine::Remote];
    // Per engine: launch → first command, whole runs of 1 and of ROUNDS,
    // rounds by difference, median gaps.
    let mut firsts: [Vec<Duration>; 2] = Default::default();
    let mut ones: [Vec<Duration>; 2] = Default::default();
    let mut longs: [Vec<Duration>; 2] = Default::default();
    let mut rounds: [Vec<Duration>; 2] = Default::default();
    let mut gaps: [Vec<Duration>; 2] = Default::default();
    let (mut gap_ratio, mut one_ratio) = (Vec::new(), Vec::new());
    // What the remote runs sent at their start: nothing, the engine
    // having the baseline and the tools.
    let mut sent = Vec::new();
    for _ in 0..REPEATS {
        for (e, &engine) in engines.iter().enumerate() {
            let long = bench.run(&path, engine, rounds_script(ROUNDS));
            let one = bench.run(&path, engine, rounds_script(1));
            firsts[e].extend([long.first, one.first]);
            ones[e].push(one.wall);
            longs[e].push(long.wall);
            rounds[e].push(long.wall.saturating_sub(one.wall) / (ROUNDS - 1) as u32);
            gaps[e].push(median(&long.gaps));
            sent.extend(
                [long.traffic, one.traffic]
                    .into_iter()
                    .flatten()
                    .map(|t| t.0),
            );
        }
        let ratio = |times: &[Vec<Duration>; 2]| {
            let (local, remote) = (times[0].last().unwrap(), times[1].last().unwrap());
            remote.as_secs_f64() / local.as_secs_f64()
        };
        gap_ratio.push(ratio(&gaps));
        one_ratio.push(ratio(&ones));
    }
    let both = |what: &str, times: &mut [Vec<Duration>; 2]| {
        println!("  {what}");
        for (e, engine) in engines.iter().enumerate() {
            println!("    {:8}{}", engine.name(), common::spread(&mut times[e]));
        }
    };
    println!(
        "20-file project, local rootless podman (vfs) against podman-remote over ssh (overlay), \
         {REPEATS} runs of each kind, alternately:"
    );
    both(
        &format!("launch → first command (the runs of 1 and of {ROUNDS})"),
        &mut firsts,
    );
    let first_local = median(&firsts[0]).as_secs_f64() * 1000.0;
    let first_remote = median(&firsts[1]).as_secs_f64() * 1000.0;
    println!(
        "    remote − local  {:+.1} ms, remote / local {:.2}× (medians)",
        first_remote - first_local,
        first_remote / first_local
    );
    sent.sort();
    println!(
        "    remote runs' bytes sent at the start: min {} B, max {} B",
        sent[0],
        sent[sent.len() - 1]
    );
    both("whole run of 1 round", &mut ones);
    println!(
        "    remote / local  {}",
        ratio_spread(&mut one_ratio, "paired")
    );
    both(&format!("whole run of {ROUNDS} rounds"), &mut longs);
    both(
        &format!("per round, (run of {ROUNDS} − run of 1) / {}", ROUNDS - 1),
        &mut rounds,
    );
    // A difference of two whole runs is noisier than a round: the ratio
    // of the medians, not run by run.
    println!(
        "    remote / local  {:.2}× (medians; target ≤ 2×)",
        median(&rounds[1]).as_secs_f64() / median(&rounds[0]).as_secs_f64()
    );
    both(
        "per round, median gap between two model requests after the first step",
        &mut gaps,
    );
    println!(
        "    remote / local  {}",
        ratio_spread(&mut gap_ratio, "target ≤ 2×")
    );
}

fn large(bench: &Bench) {
    let made = Instant::now();
    let project = bench.own(Project::with_files(LARGE));
    let path = project.path();
    println!(
        "{LARGE}-file project made in {:.1} s; its files hold {:.1} MiB",
        made.elapsed().as_secs_f64(),
        file_bytes(&path.join("src")) as f64 / (1024.0 * 1024.0)
    );
    // One run of each warms the caches (the remote one sends this
    // baseline).
    bench.run(&path, Engine::Local, one_line_script());
    bench.run(&path, Engine::Remote, one_line_script());
    let (mut local_first, mut remote_first, mut remote_second) =
        (Vec::new(), Vec::new(), Vec::new());
    let (mut local_wall, mut first_wall, mut second_wall) = (Vec::new(), Vec::new(), Vec::new());
    let (mut start_first, mut start_second, mut steps) = (Vec::new(), Vec::new(), Vec::new());
    let (mut local_gaps, mut remote_gaps, mut gap_ratio) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..LARGE_REPEATS {
        bench.new_baseline(&path);
        let local = bench.run(&path, Engine::Local, one_line_script());
        let first = bench.run(&path, Engine::Remote, one_line_script());
        let second = bench.run(&path, Engine::Remote, one_line_script());
        let (first_start, first_steps) = first.traffic.expect("a remote run's traffic");
        let (second_start, second_steps) = second.traffic.expect("a remote run's traffic");
        local_first.push(local.first);
        remote_first.push(first.first);
        remote_second.push(second.first);
        local_wall.push(local.wall);
        first_wall.push(first.wall);
        second_wall.push(second.wall);
        start_first.push(first_start);
        start_second.push(second_start);
        steps.extend([first_steps, second_steps]);
        let local = median(
            &bench
                .run(&path, Engine::Local, rounds_script(LARGE_ROUNDS))
                .gaps,
        );
        let remote = median(
            &bench
                .run(&path, Engine::Remote, rounds_script(LARGE_ROUNDS))
                .gaps,
        );
        local_gaps.push(local);
        remote_gaps.push(remote);
        gap_ratio.push(remote.as_secs_f64() / local.as_secs_f64());
    }
    println!(
        "{LARGE}-file project, one step appending a line to one file ({LARGE_REPEATS} new \
         baselines, each: a local run, then two remote runs):"
    );
    print_rows(
        "  launch → first command",
        [
            ("local", &mut local_first),
            ("remote, baseline not there", &mut remote_first),
            ("remote, baseline there", &mut remote_second),
        ],
    );
    print_rows(
        "  whole run",
        [
            ("local", &mut local_wall),
            ("remote, baseline not there", &mut first_wall),
            ("remote, baseline there", &mut second_wall),
        ],
    );
    print_rows(
        &format!(
            "  per round, median gap between two model requests after the first step (runs \
             of {LARGE_ROUNDS} rounds)"
        ),
        [("local", &mut local_gaps), ("remote", &mut remote_gaps)],
    );
    println!(
        "    remote / local             {}",
        ratio_spread(&mut gap_ratio, "target ≤ 2×")
    );
    const KIB: f64 = 1024.0;
    const MIB: f64 = 1024.0 * 1024.0;
    println!("  bytes, remote (the manifests' traffic)");
    println!(
        "    start, first run on the baseline   {}",
        bytes_spread(&mut start_first, "MiB", MIB)
    );
    println!(
        "    start, second run on the baseline  {}  (target ≤ 1 MiB)",
        bytes_spread(&mut start_second, "MiB", MIB)
    );
    println!(
        "    the step, both ways (every run)    {}  (target ≤ 64 KiB)",
        bytes_spread(&mut steps, "KiB", KIB)
    );
}
