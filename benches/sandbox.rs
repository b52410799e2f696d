//! The sandbox's own costs, measured on the host, each part comparing ways
//! in the same run:
//!
//! - `round_trip`: the round trip of one tool command, `true` through the
//!   command channel (one long-lived agent in the container) versus through
//!   one `podman exec` per command (the path without the channel), on one
//!   real container;
//! - `image_against_copy`: a container's start to its first command's
//!   answer, started from the image in podman's storage (the old way) and
//!   from the cached copy of its root file system (`podman::rootfs`; the same
//!   as the image where storage is overlay or podman rootful), alternately,
//!   as the user running the bench;
//! - `rootful_against_rootless`: the real `ah` against the tests' mock
//!   model, a run with one `bash true` step, by root (rootful podman), by
//!   `AH_TEST_USER` (rootless, its podman on `vfs` storage: the run stands on
//!   the cached copy of the image's root) and by `AH_TEST_OVERLAY_USER`
//!   (rootless on `overlay` storage: the image's own layers, nothing copied;
//!   `scripts/setup` makes both users), interleaved: spawn → the first
//!   command's answer reaching the model, the last answer → ah's exit, and
//!   ah's exit → the sandbox removed by the detached cleanup (off the
//!   user's path). Needs root to switch users; a user that is not set is
//!   skipped with a line saying so.
//!
//! Run with `cargo bench --bench sandbox`; `cargo bench --bench sandbox --
//! WORD` runs only the parts whose name holds WORD (`round`, `copy`,
//! `rootless`). Skipped when podman or the sandbox image is missing.

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

// The rootful and rootless runs, in a folder of this bench's own (a file
// directly in benches/ would be a bench of its own).
#[path = "sandbox/users.rs"]
mod users;

#[allow(
    dead_code,
    reason = "this bench makes its projects itself; it shares only git"
)]
mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ah_sandbox::podman::{DEFAULT_IMAGE, PodmanBackend, PodmanOptions, find_podman};

const ROUNDS: usize = 50;
/// Starts per way of making the container's root.
const STARTS: usize = 5;
const TIMEOUT: Duration = Duration::from_secs(30);

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(bench());
}

async fn bench() {
    if find_podman().is_err() {
        println!("sandbox bench skipped: podman is not installed");
        return;
    }
    if !ah_sandbox::image::image_exists(DEFAULT_IMAGE)
        .await
        .unwrap_or(false)
    {
        println!("sandbox bench skipped: the image {DEFAULT_IMAGE} is missing (ah image build)");
        return;
    }
    // cargo bench passes `--bench` first; any other word picks parts.
    let words: Vec<String> = std::env::args()
        .skip(1)
        .filter(|word| !word.starts_with("--"))
        .collect();
    let picked = |name: &str| words.is_empty() || words.iter().any(|word| name.contains(word));
    let dir = tempfile::tempdir().expect("temp dir");
    let work = dir.path().join("work");
    std::fs::create_dir(&work).expect("work dir");
    if picked("round_trip") {
        round_trips(&work).await;
    }
    if picked("image_against_copy") {
        first_commands(&work).await;
    }
    if picked("rootful_against_rootless") {
        tokio::task::spawn_blocking(users::rootful_against_rootless)
            .await
            .expect("the rootful and rootless runs");
    }
}

/// The options of a bench container on `work`.
fn options(work: &Path) -> PodmanOptions {
    let id = format!("bench{}", ulid::Ulid::generate()).to_lowercase();
    let mut options = PodmanOptions::new(&id, work);
    options.ah_executable = Some(PathBuf::from(env!("CARGO_BIN_EXE_ah")));
    options
}

/// Start to the first command's answer, from the image and from the
/// cached copy of its root, taking turns (the copy made before, once).
async fn first_commands(work: &Path) {
    let mut from_image = Vec::new();
    let mut from_copy = Vec::new();
    let warm = PodmanBackend::start(&options(work)).await.expect("start");
    warm.shutdown().await.expect("shutdown");
    for _ in 0..STARTS {
        for (old, times) in [(true, &mut from_image), (false, &mut from_copy)] {
            let mut options = options(work);
            options.from_image = old;
            let started = Instant::now();
            let backend = PodmanBackend::start(&options).await.expect("start");
            backend.exec("true", TIMEOUT).await.expect("first command");
            times.push(started.elapsed());
            backend.shutdown().await.expect("shutdown");
        }
    }
    from_image.sort();
    from_copy.sort();
    let rootless = if ah_sandbox::podman::rootless() {
        "rootless"
    } else {
        "rootful"
    };
    println!("start to the first command's answer, {rootless}, {STARTS} starts each:");
    println!("{:>12} | {:>9} {:>9} {:>9}", "root", "min", "median", "max");
    for (name, times) in [("image", &from_image), ("cached copy", &from_copy)] {
        println!(
            "{name:>12} | {:>9} {:>9} {:>9}",
            ms(times[0]),
            ms(times[STARTS / 2]),
            ms(times[STARTS - 1])
        );
    }
}

/// `true` through the channel and through one `podman exec` per command.
async fn round_trips(work: &Path) {
    let backend = PodmanBackend::start(&options(work))
        .await
        .unwrap_or_else(|err| panic!("could not start the sandbox: {err}"));
    for note in backend.notes() {
        println!("note: {note}");
    }

    let (_, per_call) = rounds(|| backend.exec_without_channel("true", TIMEOUT)).await;
    // The per-call execs closed the channel: the first exec opens it again.
    let (opening, channel) = rounds(|| backend.exec("true", TIMEOUT)).await;
    backend.shutdown().await.expect("shutdown");

    println!("round trip of `true`, {ROUNDS} rounds each, one container:");
    println!("{:>12} | {:>9} {:>9} {:>9}", "path", "min", "median", "max");
    for (name, times) in [("podman exec", &per_call), ("channel", &channel)] {
        println!(
            "{name:>12} | {:>9} {:>9} {:>9}",
            ms(times[0]),
            ms(times[ROUNDS / 2]),
            ms(times[ROUNDS - 1])
        );
    }
    println!(
        "opening the channel (agent started with podman exec -i), then `true`: {}",
        ms(opening)
    );
    println!(
        "the channel is {:.1}x faster (median podman exec / median channel)",
        per_call[ROUNDS / 2].as_secs_f64() / channel[ROUNDS / 2].as_secs_f64()
    );
}

/// Times one first run of `exec` (which may open the channel), then
/// `ROUNDS` more, sorted.
async fn rounds<F, Fut>(exec: F) -> (Duration, Vec<Duration>)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = std::io::Result<ah_tools::ExecOutput>>,
{
    let check = |out: std::io::Result<ah_tools::ExecOutput>| {
        let out = out.unwrap_or_else(|err| panic!("exec: {err}"));
        assert_eq!(out.exit_code, Some(0), "{out:?}");
    };
    let started = Instant::now();
    let out = exec().await;
    let first = started.elapsed();
    check(out);
    let mut times = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let started = Instant::now();
        let out = exec().await;
        times.push(started.elapsed());
        check(out);
    }
    times.sort();
    (first, times)
}

pub(crate) fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}
