//! What `--review auto` does with a session patch: apply it only when it is
//! small (in lines, files and bytes), text-only, adds no symlink, submodule
//! or executable bit, leaves restricted paths and files that act outside
//! the diff ([`elsewhere`]) alone and applies cleanly to the host;
//! otherwise save it for a human, with every reason listed. Also renders
//! the `git diff --stat --summary`-like summary the review screen shows,
//! and finds the invisible characters a patch adds.

mod diffstat;
mod elsewhere;
mod hidden;
#[cfg(test)]
mod snapshot_tests;
#[cfg(test)]
mod tests;

use serde::Serialize;

use ah_record::patch::{FileStat, MAX_PATCH_BYTES, PatchInfo};
use ah_record::policy::Policy;
use ah_record::safe_text::name_safe;
use ah_tools::bounds::size;

pub use diffstat::{bar, diffstat};
pub use elsewhere::{Elsewhere, elsewhere};
pub use hidden::{Hidden, describe_hidden, hidden_chars};

/// The outcome of `--review auto`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum AutoDecision {
    /// The patch is empty: the run changed nothing.
    NothingToApply,
    /// Safe to apply without asking.
    Apply,
    /// Keep the patch for a human; each reason is one line.
    Save { reasons: Vec<String> },
}

/// Decides `--review auto` for the session patch: [`decide`] on its files,
/// and a patch over [`MAX_PATCH_BYTES`] is never applied without a person,
/// whatever is in it.
pub fn decide_patch(
    patch: &PatchInfo,
    policy: &Policy,
    applies_cleanly: bool,
    hidden: &[Hidden],
) -> AutoDecision {
    let decision = decide(&patch.files, policy, applies_cleanly, hidden);
    if !patch.over_cap() {
        return decision;
    }
    let reason = format!(
        "patch too big: {} > {} (the most --review auto applies)",
        size(patch.bytes),
        size(MAX_PATCH_BYTES)
    );
    match decision {
        AutoDecision::NothingToApply => AutoDecision::NothingToApply,
        AutoDecision::Apply => AutoDecision::Save {
            reasons: vec![reason],
        },
        AutoDecision::Save { mut reasons } => {
            reasons.insert(0, reason);
            AutoDecision::Save { reasons }
        }
    }
}

/// Decides `--review auto` for a patch's files. `applies_cleanly` is whether
/// `git apply --check` passed on the host; `hidden` is what [`hidden_chars`]
/// found in it.
///
/// Size is lines, files and bytes: a few one-line files of megabytes each
/// are not a small patch. Besides size, restricted paths and files that run
/// code or steer an agent outside the diff ([`elsewhere`]: agents'
/// instructions, other tools' configuration, dotfiles not known to be
/// inert; both sides of a rename), anything that can run code on the host
/// without reading like a source edit needs a human: binary files, symlinks
/// (either side), submodule entries, mode changes and new executable files,
/// and anything that reads differently from what it is: file names with
/// control characters, and invisible or bidi characters in added lines or
/// names. Paths in the reasons are escaped for the terminal.
pub fn decide(
    stats: &[FileStat],
    policy: &Policy,
    applies_cleanly: bool,
    hidden: &[Hidden],
) -> AutoDecision {
    if stats.is_empty() {
        return AutoDecision::NothingToApply;
    }
    let rules = policy.review();
    let mut reasons = Vec::new();
    let lines: u64 = stats.iter().map(|stat| stat.added + stat.removed).sum();
    if lines > rules.max_lines {
        reasons.push(format!(
            "patch too large: {lines} changed lines > {}",
            rules.max_lines
        ));
    }
    let bytes: u64 = stats.iter().map(|stat| stat.bytes).sum();
    if bytes > rules.max_bytes {
        reasons.push(format!(
            "patch too large: {bytes} bytes > {}",
            rules.max_bytes
        ));
    }
    for stat in stats.iter().filter(|stat| stat.bytes > rules.max_bytes) {
        reasons.push(format!(
            "file too large: {} ({} bytes of patch > {})",
            name_safe(&stat.path),
            stat.bytes,
            rules.max_bytes
        ));
    }
    let files = stats.len() as u64;
    if files > rules.max_files {
        reasons.push(format!("too many files: {files} > {}", rules.max_files));
    }
    for stat in stats.iter().filter(|stat| stat.binary) {
        reasons.push(format!("binary file: {}", name_safe(&stat.path)));
    }
    for stat in stats.iter().filter(|stat| stat.is_symlink()) {
        reasons.push(format!("symlink: {}", name_safe(&stat.path)));
    }
    for stat in stats.iter().filter(|stat| stat.is_submodule()) {
        reasons.push(format!("submodule: {}", name_safe(&stat.path)));
    }
    for stat in stats {
        if let Some((old, new)) = stat.mode_change() {
            reasons.push(format!(
                "mode change: {} ({old:o} → {new:o})",
                name_safe(&stat.path)
            ));
        }
    }
    for stat in stats.iter().filter(|stat| stat.is_new_executable()) {
        reasons.push(format!("new executable file: {}", name_safe(&stat.path)));
    }
    // One reason per file: the policy's rule when it restricts the path,
    // else what the file does outside the diff. A rename is a deletion and
    // an addition, so both of its sides are here.
    for stat in stats {
        if let Some(rule) = policy.restricted_rule(&stat.path) {
            reasons.push(format!(
                "touches restricted path {} (rule {rule})",
                name_safe(&stat.path)
            ));
        } else if let Some(kind) = elsewhere(&stat.path) {
            reasons.push(format!(
                "needs a human: {} {}",
                name_safe(&stat.path),
                kind.reason()
            ));
        }
    }
    for stat in stats
        .iter()
        .filter(|stat| stat.path.chars().any(char::is_control))
    {
        reasons.push(format!(
            "file name with control characters: {}",
            name_safe(&stat.path)
        ));
    }
    if !hidden.is_empty() {
        reasons.push(format!(
            "invisible or bidi characters: {}",
            describe_hidden(hidden)
        ));
    }
    if !applies_cleanly {
        reasons.push("does not apply cleanly to the host".to_string());
    }
    if reasons.is_empty() {
        AutoDecision::Apply
    } else {
        AutoDecision::Save { reasons }
    }
}
