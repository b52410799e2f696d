//! What `ah org` costs around the model, on the real binary against the
//! tests' mock model server answering at once (`--backend none`):
//!
//! - per tick: an org of two agents passing a message back and forth for
//!   K ticks against one of 2 ticks; (wall time of K − wall time of 2) /
//!   (K − 2) is one tick (deliver the mail, a model request and its
//!   answer, route it, record the state), printed also as ticks per
//!   second. Beside it, in the same run, the single agent's cost of one
//!   model turn (a run of K follow-up turns against one of 1 is not
//!   possible without tools, so a `bash true` round, the `rounds` bench's
//!   measure) as the baseline;
//! - memory: the peak resident size of `ah` (from `wait4`) for a single
//!   agent's run, and for orgs of 2 and 8 agents of 3 ticks each.
//!
//! Run with `cargo bench --bench org`. `AH_BENCH_BIN=/path/to/ah`
//! measures another build with the same harness.

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

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::Project;
use serde_json::json;
use support::mock::{MockServer, Reply, Turn};

/// Ticks of the long org.
const TICKS: usize = 40;
/// Runs of each kind; the spread shows the noise.
const REPEATS: usize = 7;

fn main() {
    let ah = common::ah_binary();
    per_tick(&ah);
    memory(&ah);
}

/// Runs `ah ARGS` in `project` to its end; its wall time and peak
/// resident size.
#[expect(
    clippy::zombie_processes,
    reason = "the child is reaped by wait4, which also gives its resource usage"
)]
fn measure(project: &Project, ah: &Path, mock: &MockServer, args: &[&str]) -> (Duration, u64) {
    let started = Instant::now();
    let child = project
        .command(ah, &mock.url())
        .args(["--backend", "none", "--review", "never"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run ah");
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value to be filled in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: the child's pid, and pointers to the two out values.
    let waited = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    let elapsed = started.elapsed();
    assert!(
        waited > 0,
        "wait4 failed: {}",
        std::io::Error::last_os_error()
    );
    let status = std::process::ExitStatus::from_raw(status);
    assert!(status.success(), "ah {args:?} failed: {status}");
    // Linux reports kilobytes.
    (elapsed, usage.ru_maxrss as u64 * 1024)
}

fn say(text: &str) -> Turn {
    Turn::reply(Reply::new().text(text))
}

/// Two agents passing a message for `ticks` ticks; the last says nothing
/// to anyone.
fn ping_pong(ticks: usize) -> Vec<(&'static str, Vec<Turn>)> {
    let mut a = Vec::new();
    let mut b = Vec::new();
    for tick in 0..ticks {
        let last = tick + 1 == ticks;
        let (turns, other) = match tick % 2 {
            0 => (&mut a, "b"),
            _ => (&mut b, "a"),
        };
        turns.push(match last {
            true => say("That is all."),
            false => say(&format!("@@{other} over to you ({tick})")),
        });
    }
    vec![("a", a), ("b", b)]
}

fn org_run(ah: &Path, ticks: usize) -> Duration {
    let project = Project::new();
    let mock = MockServer::start_agents(ping_pong(ticks));
    let args = [
        "org",
        "--agents",
        "a:opus,b:opus",
        "--idle-ticks",
        "1000",
        "ping",
    ];
    measure(&project, ah, &mock, &args).0
}

fn single_run(ah: &Path, rounds: usize) -> Duration {
    let project = Project::new();
    let mut turns: Vec<Turn> = (1..=rounds)
        .map(|i| {
            Turn::reply(Reply::new().tool_use(
                format!("toolu_{i}"),
                "bash",
                json!({"command": format!("true {i}")}),
            ))
        })
        .collect();
    turns.push(say("done"));
    let mock = MockServer::start(turns);
    measure(&project, ah, &mock, &["--new", "go"]).0
}

fn per_tick(ah: &Path) {
    org_run(ah, 2);
    single_run(ah, 1);
    let mut tick = Vec::new();
    let mut round = Vec::new();
    for _ in 0..REPEATS {
        let long = org_run(ah, TICKS);
        let short = org_run(ah, 2);
        tick.push(long.saturating_sub(short) / (TICKS as u32 - 2));
        let long = single_run(ah, TICKS);
        let short = single_run(ah, 1);
        round.push(long.saturating_sub(short) / (TICKS as u32 - 1));
    }
    let tick = stats(tick);
    let round = stats(round);
    println!(
        "per tick, org of 2 (mail, request, routing, state):   median {:>7.2} ms  \
         (min {:.2}, max {:.2}) = {:.0} ticks/s",
        ms(tick.1),
        ms(tick.0),
        ms(tick.2),
        1.0 / tick.1.as_secs_f64()
    );
    println!(
        "per tool round, single agent (baseline):            median {:>7.2} ms  \
         (min {:.2}, max {:.2})",
        ms(round.1),
        ms(round.0),
        ms(round.2)
    );
}

fn memory(ah: &Path) {
    let single = |_: usize| {
        let project = Project::new();
        let mock = MockServer::start(vec![say("done")]);
        measure(&project, ah, &mock, &["--new", "go"]).1
    };
    let org = |agents: usize| {
        let project = Project::new();
        let names: Vec<String> = (0..agents).map(|i| format!("agent{i}")).collect();
        // Three ticks each: every agent addresses the next, the last
        // round ends untagged.
        let scripts: Vec<(&str, Vec<Turn>)> = names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let next = &names[(i + 1) % agents];
                let turns = (0..3)
                    .map(|round| match round {
                        2 => say("done"),
                        _ => say(&format!(
                            "@@{next} your turn, with {} words",
                            "many ".repeat(200)
                        )),
                    })
                    .collect();
                (name.as_str(), turns)
            })
            .collect();
        let mock = MockServer::start_agents(scripts);
        let list: Vec<String> = names.iter().map(|n| format!("{n}:opus")).collect();
        let list = list.join(",");
        let args = ["org", "--agents", &list, "--idle-ticks", "1000", "go"];
        measure(&project, ah, &mock, &args).1
    };
    type Measure<'a> = &'a dyn Fn(usize) -> u64;
    let kinds: [(&str, Measure, usize); 3] = [
        ("single agent, one turn", &single, 1),
        ("org of 2 agents, 3 ticks each", &org, 2),
        ("org of 8 agents, 3 ticks each", &org, 8),
    ];
    for (name, measure, agents) in kinds {
        let mut peaks: Vec<u64> = (0..REPEATS.min(5)).map(|_| measure(agents)).collect();
        peaks.sort_unstable();
        println!(
            "peak resident size, {name:<30} median {:>6.1} MiB  (min {:.1}, max {:.1})",
            mib(peaks[peaks.len() / 2]),
            mib(peaks[0]),
            mib(peaks[peaks.len() - 1])
        );
    }
}

/// Min, median and max.
fn stats(mut samples: Vec<Duration>) -> (Duration, Duration, Duration) {
    samples.sort_unstable();
    (
        samples[0],
        samples[samples.len() / 2],
        samples[samples.len() - 1],
    )
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}
