//! What `--review auto` does with a session patch: apply it only when it is
//! small, text-only, leaves restricted paths alone and applies cleanly to the
//! host; otherwise save it for a human, with every reason listed. Also renders
//! the `git diff --stat`-like summary the review screen shows.

use serde::{Deserialize, Serialize};

use super::policy::Policy;

/// One file of a patch, as the patch builder counts it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileStat {
    /// Path relative to the project root (the new path of a rename).
    pub path: String,
    /// Lines added (0 for a binary file).
    pub added: u64,
    /// Lines removed (0 for a binary file).
    pub removed: u64,
    pub binary: bool,
}

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

/// Decides `--review auto` for a patch. `applies_cleanly` is whether
/// `git apply --check` passed on the host.
pub fn decide(stats: &[FileStat], policy: &Policy, applies_cleanly: bool) -> AutoDecision {
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
    let files = stats.len() as u64;
    if files > rules.max_files {
        reasons.push(format!("too many files: {files} > {}", rules.max_files));
    }
    for stat in stats.iter().filter(|stat| stat.binary) {
        reasons.push(format!("binary file: {}", stat.path));
    }
    for stat in stats {
        if let Some(rule) = policy.restricted_rule(&stat.path) {
            reasons.push(format!(
                "touches restricted path {} (rule {rule})",
                stat.path
            ));
        }
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

/// Widest line of the stat, as `git diff --stat` uses without a terminal.
const STAT_WIDTH: usize = 80;
/// Longest path shown; longer ones keep their end, after `...`.
const MAX_NAME: usize = 50;
/// Widest `+++---` graph.
const MAX_GRAPH: usize = 40;

/// Renders per-file stats like `git diff --stat`: ` path | N +++--` lines and
/// a summary line (` 2 files changed, 3 insertions(+), 1 deletion(-)`).
pub fn diffstat(stats: &[FileStat]) -> String {
    let names: Vec<String> = stats.iter().map(|stat| shorten(&stat.path)).collect();
    let counts: Vec<String> = stats
        .iter()
        .map(|stat| {
            if stat.binary {
                "Bin".to_string()
            } else {
                (stat.added + stat.removed).to_string()
            }
        })
        .collect();
    let name_width = names
        .iter()
        .map(|name| name.chars().count())
        .max()
        .unwrap_or(0);
    let count_width = counts.iter().map(String::len).max().unwrap_or(0);
    let max_change = stats
        .iter()
        .filter(|stat| !stat.binary)
        .map(|stat| stat.added + stat.removed)
        .max()
        .unwrap_or(0);
    let graph_width = STAT_WIDTH
        .saturating_sub(name_width + count_width + 5)
        .clamp(6, MAX_GRAPH) as u64;

    let mut out = String::new();
    for ((stat, name), count) in stats.iter().zip(&names).zip(&counts) {
        let pad = name_width - name.chars().count();
        let mut line = format!(" {name}{} | {count:>count_width$}", " ".repeat(pad));
        if !stat.binary {
            let (plus, minus) = bar(stat.added, stat.removed, graph_width, max_change);
            line.push(' ');
            line.push_str(&"+".repeat(plus as usize));
            line.push_str(&"-".repeat(minus as usize));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out.push_str(&summary(stats));
    out
}

/// How many `+` and `-` a file gets; scaled down as git does when the largest
/// change does not fit, keeping at least one of each kind that is present.
fn bar(added: u64, removed: u64, width: u64, max_change: u64) -> (u64, u64) {
    if max_change <= width {
        return (added, removed);
    }
    let scale = |n: u64| {
        if n == 0 {
            0
        } else {
            1 + n * (width - 1) / max_change
        }
    };
    let mut total = scale(added + removed);
    if total < 2 && added > 0 && removed > 0 {
        total = 2;
    }
    if added < removed {
        let plus = scale(added);
        (plus, total - plus)
    } else {
        let minus = scale(removed);
        (total - minus, minus)
    }
}

fn shorten(path: &str) -> String {
    let chars = path.chars().count();
    if chars <= MAX_NAME {
        return path.to_string();
    }
    let tail: String = path.chars().skip(chars - (MAX_NAME - 3)).collect();
    format!("...{tail}")
}

fn summary(stats: &[FileStat]) -> String {
    let plural = |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let added: u64 = stats.iter().map(|stat| stat.added).sum();
    let removed: u64 = stats.iter().map(|stat| stat.removed).sum();
    let mut line = format!(" {} changed", plural(stats.len() as u64, "file", "files"));
    if stats.is_empty() {
        line.push('\n');
        return line;
    }
    if added > 0 || removed == 0 {
        line.push_str(&format!(
            ", {}(+)",
            plural(added, "insertion", "insertions")
        ));
    }
    if removed > 0 || added == 0 {
        line.push_str(&format!(
            ", {}(-)",
            plural(removed, "deletion", "deletions")
        ));
    }
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(path: &str, added: u64, removed: u64) -> FileStat {
        FileStat {
            path: path.to_string(),
            added,
            removed,
            binary: false,
        }
    }

    fn binary(path: &str) -> FileStat {
        FileStat {
            path: path.to_string(),
            added: 0,
            removed: 0,
            binary: true,
        }
    }

    fn policy() -> Policy {
        let project = tempfile::tempdir().unwrap();
        Policy::load(project.path(), None, &[], &[]).unwrap()
    }

    fn reasons(decision: AutoDecision) -> Vec<String> {
        match decision {
            AutoDecision::Save { reasons } => reasons,
            other => panic!("expected Save, got {other:?}"),
        }
    }

    #[test]
    fn a_small_clean_text_patch_is_applied() {
        let stats = [stat("src/a.rs", 10, 2), stat("README.md", 1, 0)];
        assert_eq!(decide(&stats, &policy(), true), AutoDecision::Apply);
    }

    #[test]
    fn an_empty_patch_has_nothing_to_apply() {
        assert_eq!(decide(&[], &policy(), true), AutoDecision::NothingToApply);
        assert_eq!(decide(&[], &policy(), false), AutoDecision::NothingToApply);
    }

    #[test]
    fn each_reason_alone() {
        let policy = policy();
        let at_limit = [stat("a", 300, 100)];
        assert_eq!(decide(&at_limit, &policy, true), AutoDecision::Apply);
        assert_eq!(
            reasons(decide(&[stat("a", 400, 123)], &policy, true)),
            vec!["patch too large: 523 changed lines > 400"]
        );
        let many: Vec<FileStat> = (0..25).map(|i| stat(&format!("f{i}"), 1, 0)).collect();
        assert_eq!(
            reasons(decide(&many, &policy, true)),
            vec!["too many files: 25 > 20"]
        );
        assert_eq!(
            reasons(decide(&[binary("logo.png")], &policy, true)),
            vec!["binary file: logo.png"]
        );
        assert_eq!(
            reasons(decide(
                &[stat(".github/workflows/ci.yml", 1, 1)],
                &policy,
                true
            )),
            vec!["touches restricted path .github/workflows/ci.yml (rule .github/**)"]
        );
        assert_eq!(
            reasons(decide(&[stat("docker/Dockerfile", 1, 1)], &policy, true)),
            vec!["touches restricted path docker/Dockerfile (rule **/Dockerfile)"]
        );
        assert_eq!(
            reasons(decide(&[stat("a", 1, 1)], &policy, false)),
            vec!["does not apply cleanly to the host"]
        );
    }

    #[test]
    fn every_reason_is_listed_together() {
        let mut stats: Vec<FileStat> = (0..21).map(|i| stat(&format!("f{i}"), 20, 0)).collect();
        stats.push(binary("img/a.png"));
        stats.push(binary("img/b.png"));
        stats.push(stat("policy/default.toml", 1, 1));
        assert_eq!(
            reasons(decide(&stats, &policy(), false)),
            vec![
                "patch too large: 422 changed lines > 400",
                "too many files: 24 > 20",
                "binary file: img/a.png",
                "binary file: img/b.png",
                "touches restricted path policy/default.toml (rule policy/**)",
                "does not apply cleanly to the host",
            ]
        );
    }

    #[test]
    fn limits_come_from_the_policy() {
        let project = tempfile::tempdir().unwrap();
        let file = project.path().join("p.toml");
        std::fs::write(&file, "[review]\nmax_lines = 5\nrestricted = []\n").unwrap();
        let policy = Policy::load(project.path(), Some(&file), &[], &[]).unwrap();
        assert_eq!(
            reasons(decide(&[stat("a", 6, 0)], &policy, true)),
            vec!["patch too large: 6 changed lines > 5"]
        );
        assert_eq!(
            decide(&[stat(".github/x.yml", 1, 0)], &policy, true),
            AutoDecision::Apply
        );
    }

    #[test]
    fn diffstat_looks_like_git() {
        let stats = [
            stat("src/main.rs", 3, 2),
            stat("README.md", 1, 0),
            binary("logo.png"),
        ];
        assert_eq!(
            diffstat(&stats),
            concat!(
                " src/main.rs |   5 +++--\n",
                " README.md   |   1 +\n",
                " logo.png    | Bin\n",
                " 3 files changed, 4 insertions(+), 2 deletions(-)\n",
            )
        );
    }

    #[test]
    fn diffstat_summary_uses_singular_and_omits_zero_sides() {
        assert_eq!(
            diffstat(&[stat("a", 0, 1)]),
            " a | 1 -\n 1 file changed, 1 deletion(-)\n"
        );
        assert_eq!(
            diffstat(&[binary("b.bin")]),
            " b.bin | Bin\n 1 file changed, 0 insertions(+), 0 deletions(-)\n"
        );
        assert_eq!(diffstat(&[]), " 0 files changed\n");
    }

    #[test]
    fn diffstat_scales_large_changes_to_the_graph_width() {
        let text = diffstat(&[stat("big.rs", 900, 100), stat("small.rs", 1, 1)]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            format!(" big.rs   | 1000 {}{}", "+".repeat(36), "-".repeat(4))
        );
        assert_eq!(lines[1], " small.rs |    2 +-");
        assert_eq!(
            lines[2],
            " 2 files changed, 901 insertions(+), 101 deletions(-)"
        );
    }

    #[test]
    fn diffstat_shortens_long_paths_and_stays_within_80_columns() {
        let long = format!("{}/end.rs", "d".repeat(60));
        let text = diffstat(&[stat(&long, 900, 100), stat("a", 1, 0)]);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with(" ...ddd"), "{text}");
        assert!(lines[0].contains("/end.rs | 1000 +"), "{text}");
        assert_eq!(lines[0].chars().count(), STAT_WIDTH, "{text}");
        assert_eq!(lines[1], format!(" a{} |    1 +", " ".repeat(MAX_NAME - 1)));
    }
}
