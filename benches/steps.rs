//! Run preparation and per-step overhead, ah versus the seed's recipe, on
//! generated trees of 10k and 70k files, measured in the same run so the
//! ratios mean something on any machine.
//!
//! - prepare: ah = `workspace::copy_project` + shadow init + baseline commit;
//!   seed = `rsync -a` + `git init` + `git add -A && git commit`.
//! - step: one file changed, then ah = `commit_step` + policy check of the
//!   changed paths; seed = `git add -A && git commit` + `git diff --name-only
//!   HEAD~1..HEAD`.
//!
//! Run with `cargo bench --bench steps` (needs `rsync` and `git`).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use ah_record::policy::Policy;
use ah_record::shadow::{MAX_FILE_BYTES, ShadowRepo};
use ah_record::workspace;

const STEPS: usize = 15;

fn main() {
    for tool in ["rsync", "git"] {
        if which::which(tool).is_err() {
            eprintln!("steps bench: `{tool}` is needed (apt-get install {tool})");
            std::process::exit(1);
        }
    }
    println!(
        "{:>7} | {:>12} {:>12} {:>7} | {:>10} {:>10} {:>7}",
        "files", "prepare ah", "prepare seed", "ratio", "step ah", "step seed", "ratio"
    );
    for files in [10_000, 70_000] {
        let tmp = tempfile::tempdir().expect("temp dir");
        let project = tmp.path().join("project");
        generate(&project, files);
        let (ah_prepare, ah_step) = ah_recipe(&project, &tmp.path().join("ah"));
        let (seed_prepare, seed_step) = seed_recipe(&project, &tmp.path().join("seed"));
        println!(
            "{files:>7} | {:>12} {:>12} {:>6.2}x | {:>10} {:>10} {:>6.2}x",
            ms(ah_prepare),
            ms(seed_prepare),
            seed_prepare.as_secs_f64() / ah_prepare.as_secs_f64(),
            ms(ah_step),
            ms(seed_step),
            seed_step.as_secs_f64() / ah_step.as_secs_f64(),
        );
    }
    println!(
        "ratio = seed time / ah time (above 1: ah is faster); step times are medians of {STEPS}"
    );
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// A source-like tree: 100 files per folder, two levels deep, small files.
fn generate(root: &Path, files: usize) {
    for i in 0..files {
        let dir = root.join(format!("d{:03}/e{:02}", i / 1000, (i / 100) % 10));
        if i % 100 == 0 {
            std::fs::create_dir_all(&dir).expect("mkdir");
        }
        let body = format!("// file {i}\nfn f{i}() -> u32 {{ {i} }}\n").repeat(8);
        std::fs::write(dir.join(format!("f{i}.rs")), body).expect("write");
    }
}

fn ah_recipe(project: &Path, run: &Path) -> (Duration, Duration) {
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
        std::fs::write(work.join("d000/e00/f0.rs"), format!("// step {step}\n")).expect("change");
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

fn seed_recipe(project: &Path, run: &Path) -> (Duration, Duration) {
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
        std::fs::write(work.join("d000/e00/f0.rs"), format!("// step {step}\n")).expect("change");
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
