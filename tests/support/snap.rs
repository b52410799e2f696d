//! The one place that makes ah's output stable enough to snapshot: insta
//! settings whose filters replace what varies from run to run (the test's
//! temporary folders, ids, commit ids, durations, process ids) with named
//! placeholders, and the text of a finished command laid out for a
//! snapshot.
//!
//! ```ignore
//! let _filters = snap::settings(&host).bind_to_scope();
//! insta::assert_snapshot!(snap::output(&out));
//! ```

use std::path::Path;
use std::process::Output;

use super::host::Host;

/// Insta settings with every filter below, for output of ah run on `host`.
pub(crate) fn settings(host: &Host) -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    // The project first: it sits in the test's root folder.
    settings.add_filter(&literal(&host.project), "[project]");
    settings.add_filter(&literal(host.root.path()), "[tmp]");
    for (pattern, placeholder) in FILTERS {
        settings.add_filter(pattern, *placeholder);
    }
    settings
}

/// [`settings`] for `ah doctor`, which checks the machine it runs on:
/// where tools are installed and podman's version become placeholders, and
/// the checks whose findings describe the host (its cgroup layout, its
/// limits) keep only their mark and name, and the resource limits check,
/// a warning that holds on one host and not on another, only its name.
/// What is checked, in what order, with what verdict and fix, stays.
pub(crate) fn doctor_settings(host: &Host) -> insta::Settings {
    let mut settings = settings(host);
    settings.add_filter(
        r"(?m)^(ok  |warn|FAIL) (cgroups|rlimits): .*$",
        "$1 $2: [this host's]",
    );
    // Only a warning, whose verdict is the host's cgroup controllers': its
    // mark and fix go too.
    settings.add_filter(
        r"(?m)^(ok  |warn|FAIL) resource limits: .*(\n     fix: .*)?$",
        "[ok or warn] resource limits: [this host's]",
    );
    settings.add_filter(r"(?m)^(ok   podman: )\S+ \S+$", "$1[path] [version]");
    settings.add_filter(r"(?m)(^|\s)/[^\s:']+", "$1[path]");
    settings
}

/// What varies between two runs of the same script, and what stands for it.
/// Token counts stay: the mock's usage is fixed.
const FILTERS: &[(&str, &str)] = &[
    // Run and session ids (ULIDs).
    (r"\b[0-9A-HJKMNP-TV-Z]{26}\b", "[ulid]"),
    // Commits made on the host: their ids hold the time.
    (r"\bcommitted [0-9a-f]{7,40}\b", "committed [commit]"),
    // Times taken: `0.3s`, `12.0s`.
    (r"\b\d+\.\ds\b", "[secs]"),
    // Another ah process named by its pid.
    (r"\bah process \d+", "ah process [pid]"),
];

/// A regex matching exactly `path`.
fn literal(path: &Path) -> String {
    let text = path.to_string_lossy();
    let mut pattern = String::with_capacity(text.len());
    for ch in text.chars() {
        if !ch.is_alphanumeric() && ch != '/' && ch != '_' && ch != '-' {
            pattern.push('\\');
        }
        pattern.push(ch);
    }
    pattern
}

/// A finished command as a snapshot shows it: its exit code, then what it
/// wrote to stdout and to stderr, each under a heading.
pub(crate) fn output(out: &Output) -> String {
    format!(
        "exit: {}\n--- stdout\n{}--- stderr\n{}",
        out.status
            .code()
            .map_or_else(|| "killed".to_string(), |code| code.to_string()),
        ended(&String::from_utf8_lossy(&out.stdout)),
        ended(&String::from_utf8_lossy(&out.stderr)),
    )
}

/// `text` with a final newline when it has any text at all, so that the
/// next heading starts a line and a missing newline stays visible as
/// `⏎` (the only mark added).
fn ended(text: &str) -> String {
    match text {
        "" => String::new(),
        t if t.ends_with('\n') => t.to_string(),
        t => format!("{t}⏎\n"),
    }
}
