//! Run preparation and per-step overhead on generated git projects of 10k
//! and 70k files, three recipes measured in the same run so the ratios mean
//! something on any machine:
//!
//! - plain: `rsync -a` + `git init` + `git add -A && git commit`; a step is
//!   `git add -A && git commit` + `git diff --name-only HEAD~1..HEAD`;
//! - copy (a work copy, as `ah work`, restores and `--backend none` run):
//!   `workspace::copy_project` + shadow init + baseline commit; a step is
//!   `commit_step` (a walk of the whole tree) + the policy check;
//! - overlay (podman runs): the survey and the upper folder's whiteouts
//!   (printed apart: a run's container and first model request wait for
//!   these alone), + the baseline read from the project, seeded by its git
//!   index (a run reads it while the container starts), + an overlay
//!   mount; a step is `commit_layered_step` (the folders the upper folder
//!   holds) + the policy check. Mounting needs root; without it the row is
//!   skipped.
//!
//! Then a run that goes on from the overlay run's last step (a session
//! whose previous run was not applied), both ways: a copy (the step's
//! files checked out, the project's unrecorded files copied) against an
//! overlay (the project's baseline, the differences written into the
//! upper folder).
//!
//! And the watch an overlay run keeps on the project (files that appear
//! during the run are hidden): the survey without it and with it, and what
//! one step's check costs when nothing appeared.
//!
//! Each step changes one file. Run with `cargo bench --bench steps` (needs
//! `rsync` and `git`).

// The workspace denies unwrap and expect outside tests; a bench is a test
// harness of its own (clippy does not count it as a test), where a failure
// should stop the measurement with the message it panics with.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use ah_record::overlay;
use ah_record::policy::Policy;
use ah_record::shadow::{Layers, MAX_FILE_BYTES, ShadowRepo, StatCache};
use ah_record::{restore, workspace};
use ah_sandbox::podman::OverlayDirs;
use ah_tools::fs_beneath::dir::DirHandle;

const STEPS: usize = 15;

/// The file each step changes.
const CHANGED: &str = "d000/e00/f0.rs";

fn main() {
    for tool in ["rsync", "git"] {
        if which::which(tool).is_err() {
            eprintln!("steps bench: `{tool}` is needed (apt-get install {tool})");
            std::process::exit(1);
        }
    }
    println!(
        "{:>7} | {:>8} | {:>11} | {:>20}",
        "files",
        "recipe",
        "prepare",
        format!("step (median of {STEPS})")
    );
    for files in [10_000, 70_000] {
        let tmp = tempfile::tempdir().expect("temp dir");
        let project = tmp.path().join("project");
        generate(&project, files);
        // Each recipe starts with what the one before wrote on disk: its
        // writeback would otherwise slow the next one's steps.
        sh(&project, "sync");
        let plain = plain_recipe(&project, &tmp.path().join("plain"));
        sh(&project, "sync");
        let copy = copy_recipe(&project, &tmp.path().join("copy"));
        sh(&project, "sync");
        let overlay = overlay_recipe(&project, &tmp.path().join("overlay"));
        let laid = overlay.map(|(prepare, step, _)| (prepare, step));
        for (name, times) in [
            ("plain", Some(plain)),
            ("copy", Some(copy)),
            ("overlay", laid),
        ] {
            match times {
                Some((prepare, step)) => println!(
                    "{files:>7} | {name:>8} | {:>11} | {:>20}",
                    ms(prepare),
                    ms(step)
                ),
                None => {
                    println!("{files:>7} | {name:>8} | skipped: mounting an overlay needs root")
                }
            }
        }
        let (unwatched, watched, check) = watch_costs(&project, &tmp.path().join("watch"));
        println!(
            "{files:>7} | survey: unwatched {}, watched {} (+{}); a step's check when \
             nothing appeared: {:.1} µs",
            ms(unwatched),
            ms(watched),
            ms(watched.saturating_sub(unwatched)),
            check.as_secs_f64() * 1e6
        );
        if let Some((prepare, step, before_start)) = overlay {
            println!(
                "{files:>7} | overlay: {} of its prepare before the container may start \
                 (survey, whiteouts; the baseline is read beside the start)",
                ms(before_start)
            );
            println!(
                "{files:>7} | copy / overlay: prepare {:.1}x, step {:.1}x",
                copy.0.as_secs_f64() / prepare.as_secs_f64(),
                copy.1.as_secs_f64() / step.as_secs_f64()
            );
            sh(&project, "sync");
            let (copied, laid) = restores(&project, tmp.path());
            println!(
                "{files:>7} | go on from the last step: copy {}, overlay {} ({:.1}x)",
                ms(copied),
                ms(laid),
                copied.as_secs_f64() / laid.as_secs_f64()
            );
        }
    }
}

/// The survey of `project` without and with its folders watched (medians
/// of 5, taken in turns), and the median check of a watch when nothing
/// appeared.
fn watch_costs(project: &Path, scratch: &Path) -> (Duration, Duration, Duration) {
    let policy = Policy::load(project, None, &[], &[]).expect("default policy");
    let withhold = |rel: &Path| policy.withheld_by(rel).is_some();
    let shadow = ShadowRepo::init(&scratch.join("shadow.git"), project).expect("init");
    let (mut unwatched, mut watched, mut checks) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..5 {
        let mut names = shadow.name_check().expect("names");
        let started = Instant::now();
        overlay::survey(project, &withhold, &mut names, None).expect("survey");
        unwatched.push(started.elapsed());
        let mut watch = overlay::Watch::new();
        let started = Instant::now();
        let found =
            overlay::survey(project, &withhold, &mut names, Some(&mut watch)).expect("survey");
        watched.push(started.elapsed());
        assert!(watch.blind().is_none(), "{:?}", watch.blind());
        let mut late = overlay::LateFiles::new(project, watch, &found.hidden);
        for _ in 0..STEPS {
            let started = Instant::now();
            let appeared = late
                .check(&withhold, || shadow.name_check().map_err(|e| e.to_string()))
                .expect("check");
            checks.push(started.elapsed());
            assert!(appeared.is_empty());
        }
    }
    (median(unwatched), median(watched), median(checks))
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// A source-like git project: 100 files per folder, two levels deep,
/// small files, all committed.
fn generate(root: &Path, files: usize) {
    for i in 0..files {
        let dir = root.join(format!("d{:03}/e{:02}", i / 1000, (i / 100) % 10));
        if i % 100 == 0 {
            std::fs::create_dir_all(&dir).expect("mkdir");
        }
        let body = format!("// file {i}\nfn f{i}() -> u32 {{ {i} }}\n").repeat(8);
        std::fs::write(dir.join(format!("f{i}.rs")), body).expect("write");
    }
    sh(
        root,
        "git init -q && git add -A && git -c user.name=b -c user.email=b@b commit -qm base",
    );
    // Past the index's second, so no entry is racily clean.
    std::thread::sleep(Duration::from_millis(1100));
    sh(root, "git update-index --really-refresh >/dev/null");
}

fn copy_recipe(project: &Path, run: &Path) -> (Duration, Duration) {
    let work = run.join("work");
    let policy = Policy::load(project, None, &[], &[]).expect("default policy");
    let started = Instant::now();
    let withhold = |rel: &Path| policy.withheld_by(rel).is_some();
    workspace::copy_project(project, &work, &withhold).expect("copy");
    let shadow = ShadowRepo::init(&run.join("shadow.git"), &work).expect("init");
    let mut head = shadow.baseline().expect("baseline");
    let prepare = started.elapsed();

    let mut times = Vec::new();
    for step in 0..STEPS {
        std::fs::write(work.join(CHANGED), format!("// step {step}\n")).expect("change");
        let started = Instant::now();
        let message = format!("step {step}");
        let commit = shadow
            .commit_step(head, &message, MAX_FILE_BYTES)
            .expect("commit");
        let id = commit.commit.expect("a commit");
        let links = shadow.committed_links(id).expect("links");
        let violations = policy.check_changes(&work, &commit.changes, &|p| links.target(p));
        head = id;
        times.push(started.elapsed());
        assert_eq!(commit.changes.len(), 1);
        assert!(violations.is_empty());
    }
    (prepare, median(times))
}

/// The overlay's prepare (and the part of it before the container may
/// start) and its median step.
fn overlay_recipe(project: &Path, run: &Path) -> Option<(Duration, Duration, Duration)> {
    if !rustix::process::geteuid().is_root() {
        return None;
    }
    std::fs::create_dir_all(run).expect("mkdir");
    let policy = Policy::load(project, None, &[], &[]).expect("default policy");
    let dirs = OverlayDirs {
        upper: run.join("upper"),
        work: run.join("scratch"),
    };
    let merged = run.join("merged");
    let started = Instant::now();
    let withhold = |rel: &Path| policy.withheld_by(rel).is_some();
    let shadow = ShadowRepo::init(&run.join("shadow.git"), project).expect("init");
    let laying = overlay::begin(shadow, project, &dirs, &withhold).expect("overlay");
    // What a run's container and first model request wait for; the
    // baseline is read meanwhile.
    let before_start = started.elapsed();
    let taken = laying.taking.take().expect("baseline");
    let prepare = started.elapsed();
    let shadow = taken.shadow;

    std::fs::create_dir(&merged).expect("mkdir");
    sh(
        run,
        &format!(
            "mount -t overlay overlay -o lowerdir={},upperdir={},workdir={} {}",
            project.display(),
            dirs.upper.display(),
            dirs.work.display(),
            merged.display()
        ),
    );
    let mut head = taken.baseline;
    let mut cache = StatCache::default();
    let mut times = Vec::new();
    for step in 0..STEPS {
        std::fs::write(merged.join(CHANGED), format!("// step {step}\n")).expect("change");
        let started = Instant::now();
        let message = format!("step {step}");
        let root = DirHandle::open_root(&merged).expect("merged");
        let upper = DirHandle::open_root(&dirs.upper).expect("upper");
        let layers = Layers {
            merged: &root,
            upper: &upper,
        };
        let commit = shadow
            .commit_layered_step(head, &message, &layers, &mut cache, MAX_FILE_BYTES)
            .expect("commit");
        let id = commit.commit.expect("a commit");
        let links = shadow.committed_links(id).expect("links");
        let violations = policy.check_changes(&merged, &commit.changes, &|p| links.target(p));
        head = id;
        times.push(started.elapsed());
        assert_eq!(commit.changes.len(), 1);
        assert!(violations.is_empty());
    }
    sh(run, &format!("umount {}", merged.display()));
    Some((prepare, median(times), before_start))
}

/// A run that goes on from the head of the overlay run in `tmp`: as a
/// copy, and as an overlay.
fn restores(project: &Path, tmp: &Path) -> (Duration, Duration) {
    let old = tmp.join("overlay/shadow.git");
    let head = git2::Repository::open_bare(&old)
        .and_then(|repo| repo.refname_to_id("refs/heads/main"))
        .expect("the overlay run's head");
    let policy = Policy::load(project, None, &[], &[]).expect("default policy");
    let withhold = |rel: &Path| policy.withheld_by(rel).is_some();

    let run = tmp.join("restored-copy");
    let work = run.join("work");
    std::fs::create_dir_all(&work).expect("mkdir");
    let started = Instant::now();
    let shadow = ShadowRepo::init(&run.join("shadow.git"), &work).expect("init");
    shadow.take_objects(&old).expect("objects");
    shadow.start_at(head).expect("check out");
    restore::copy_unrecorded(project, &work, &shadow, &withhold).expect("unrecorded");
    let copied = started.elapsed();

    let run = tmp.join("restored-overlay");
    std::fs::create_dir_all(&run).expect("mkdir");
    let dirs = OverlayDirs {
        upper: run.join("upper"),
        work: run.join("scratch"),
    };
    let started = Instant::now();
    let shadow = ShadowRepo::init(&run.join("shadow.git"), project).expect("init");
    shadow.take_objects(&old).expect("objects");
    let laid = overlay::lay(shadow, project, &dirs, &withhold).expect("overlay");
    overlay::restore_layer(&laid.shadow, project, &dirs, laid.baseline, head).expect("layer");
    laid.shadow.adopt(head).expect("adopt");
    (copied, started.elapsed())
}

fn plain_recipe(project: &Path, run: &Path) -> (Duration, Duration) {
    let work = run.join("work");
    std::fs::create_dir_all(&work).expect("mkdir");
    let started = Instant::now();
    sh(
        run,
        &format!(
            "rsync -a --exclude=.git --exclude=.ah {}/ {}/",
            project.display(),
            work.display()
        ),
    );
    sh(
        &work,
        "git init -q && git add -A && git -c user.name=b -c user.email=b@b commit -qm base",
    );
    let prepare = started.elapsed();

    let mut times = Vec::new();
    for step in 0..STEPS {
        std::fs::write(work.join(CHANGED), format!("// step {step}\n")).expect("change");
        let started = Instant::now();
        sh(
            &work,
            &format!(
                "git add -A && git -c user.name=b -c user.email=b@b commit -qm s{step} && git diff --name-only HEAD~1..HEAD >/dev/null"
            ),
        );
        times.push(started.elapsed());
    }
    (prepare, median(times))
}

fn sh(dir: &Path, script: &str) {
    let status = Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .status()
        .expect("sh");
    assert!(status.success(), "`{script}` failed");
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}
