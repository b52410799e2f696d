//! What "choose hunks" costs on a large patch: 5,000 hunks over 500 files,
//! each hunk splittable in two, as `git diff --binary --full-index`
//! writes them.
//!
//! - parse: reading the patch into its units and building what the picker
//!   shows of each (its header line, or a whole unit's description);
//! - write: `chosen.patch` and `rest.patch` for every other unit chosen
//!   (split pieces included);
//! - memory: the peak resident size of a process that does both, from its
//!   own `VmHWM` at the end (each measurement runs in a fresh child of this
//!   bench, so the patch's generation does not count).
//!
//! Run with `cargo bench --bench hunks`. Targets: the parse well under
//! 200 ms, the peak at most 64 MiB.

// The workspace denies unwrap and expect outside tests; a bench is a test
// harness of its own, where a failure should stop the measurement with
// the message it panics with.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use ah_record::patch::{FileStat, PatchInfo};
use ah_review::hunks::{PatchHunks, Selection};

const FILES: usize = 500;
const HUNKS_PER_FILE: usize = 10;
/// Children measured; the spread shows the noise.
const REPEATS: usize = 7;
/// Set in a child: the folder holding the patch it measures.
const CHILD: &str = "AH_BENCH_HUNKS_DIR";

fn main() {
    if let Some(dir) = std::env::var_os(CHILD) {
        child(Path::new(&dir));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bytes = generate(&dir.path().join("session.patch"));
    println!(
        "patch: {FILES} files, {} hunks, {:.1} MiB",
        FILES * HUNKS_PER_FILE,
        bytes as f64 / 1048576.0
    );
    let mut parse = Vec::new();
    let mut write = Vec::new();
    let mut peak = Vec::new();
    for _ in 0..REPEATS {
        let out = Command::new(std::env::current_exe().unwrap())
            .env(CHILD, dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        let numbers: Vec<u64> = text
            .split_whitespace()
            .map(|n| n.parse().unwrap())
            .collect();
        parse.push(Duration::from_micros(numbers[0]));
        write.push(Duration::from_micros(numbers[1]));
        peak.push(numbers[2]);
    }
    let (median, min, max) = stats(parse);
    println!(
        "parse and build the picker's units  median {median:>7.1} ms  (min {min:.1}, max {max:.1})"
    );
    let (median, min, max) = stats(write);
    println!(
        "write chosen and rest, half/half    median {median:>7.1} ms  (min {min:.1}, max {max:.1})"
    );
    peak.sort_unstable();
    println!(
        "peak resident size                  median {:>7.1} MiB (min {:.1}, max {:.1})",
        mib(peak[peak.len() / 2]),
        mib(peak[0]),
        mib(peak[peak.len() - 1])
    );
}

/// Measures one parse and one write of the patch in `dir`; prints the two
/// times in µs and the process's peak resident size in bytes.
fn child(dir: &Path) {
    let patch = dir.join("session.patch");
    let started = Instant::now();
    let hunks = PatchHunks::read(&patch).unwrap();
    let units = hunks.units();
    let shown: usize = units
        .iter()
        .map(|&unit| hunks.header(unit).unwrap().len())
        .sum();
    let parsed = started.elapsed();
    assert!(shown > 0 && units.len() == FILES * HUNKS_PER_FILE);

    let started = Instant::now();
    let mut selection = Selection::none(&hunks);
    let pieces = units
        .iter()
        .flat_map(|&unit| hunks.split(unit).unwrap_or_else(|| vec![unit]));
    for unit in pieces.step_by(2) {
        selection.choose(&hunks, unit).unwrap();
    }
    let split = ah_review::hunks::write(
        &patch,
        &info(),
        &hunks,
        &selection,
        &dir.join("chosen.patch"),
        &dir.join("rest.patch"),
    )
    .unwrap();
    let written = started.elapsed();
    assert_eq!(split.chosen.added_lines, split.rest.added_lines);
    println!(
        "{} {} {}",
        parsed.as_micros(),
        written.as_micros(),
        peak_rss()
    );
}

/// Writes the patch: each file of 200 lines, a hunk every 20 lines that
/// changes two lines with one line of context between them. Its size.
fn generate(path: &Path) -> u64 {
    let mut text = String::new();
    for f in 0..FILES {
        let name = format!("src/m{}/f{f}.rs", f / 100);
        let (old, new) = (format!("{:040x}", f + 1), format!("{:040x}", f + 100_000));
        write!(
            text,
            "diff --git a/{name} b/{name}\nindex {old}..{new} 100644\n--- a/{name}\n+++ b/{name}\n"
        )
        .unwrap();
        for h in 0..HUNKS_PER_FILE {
            let at = h * 20 + 5;
            writeln!(text, "@@ -{at},9 +{at},9 @@ fn f{f}_{h}() -> u32 {{").unwrap();
            for line in 0..3 {
                writeln!(text, "     let x{line} = {line}; // context").unwrap();
            }
            writeln!(text, "-    let a = {h};\n+    let a = {h} + 1;").unwrap();
            writeln!(text, "     let between = 0;").unwrap();
            writeln!(text, "-    let b = {h};\n+    let b = {h} * 2;").unwrap();
            for line in 0..3 {
                writeln!(text, "     let y{line} = {line}; // context").unwrap();
            }
        }
    }
    std::fs::write(path, &text).unwrap();
    text.len() as u64
}

/// The patch's summary, as the patch builder would have counted it.
fn info() -> PatchInfo {
    let mut info = PatchInfo::empty();
    info.files = (0..FILES)
        .map(|f| FileStat {
            path: format!("src/m{}/f{f}.rs", f / 100),
            added: 2 * HUNKS_PER_FILE as u64,
            removed: 2 * HUNKS_PER_FILE as u64,
            binary: false,
            old_mode: 0o100644,
            new_mode: 0o100644,
            bytes: 0,
        })
        .collect();
    info
}

/// This process's peak resident size (`VmHWM`), in bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kib * 1024
}

/// Median, min and max in milliseconds.
fn stats(mut samples: Vec<Duration>) -> (f64, f64, f64) {
    samples.sort_unstable();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    (
        ms(samples[samples.len() / 2]),
        ms(samples[0]),
        ms(samples[samples.len() - 1]),
    )
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / 1048576.0
}
