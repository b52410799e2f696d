//! The `git diff --stat --summary`-like text the review screen shows: one
//! ` path | N +++--` line per file, the totals, then a `--summary` line for
//! each file that needs a closer look (a symlink, a submodule, a mode change
//! or a new executable file), and a mark for each file that acts outside
//! the diff ([`elsewhere`]). File names are escaped here, once, so that a
//! name with a newline cannot forge a line of the stat.

use super::{FileStat, elsewhere};
use ah_base::count;
use ah_record::safe_text::name_safe;

/// Widest line of the stat, as `git diff --stat` uses without a terminal.
pub(super) const STAT_WIDTH: usize = 80;
/// Longest path shown; longer ones keep their end, after `...`.
pub(super) const MAX_NAME: usize = 50;
/// Widest `+++---` graph.
const MAX_GRAPH: usize = 40;

/// Renders per-file stats like `git diff --stat --summary`: ` path | N +++--`
/// lines, a totals line (` 2 files changed, 3 insertions(+), 1 deletion(-)`),
/// then git's summary line for each symlink, submodule, mode change and new
/// executable file (` mode change 100644 => 100755 run.sh`), then a mark for
/// each file that acts outside the diff (` instructions for agents:
/// AGENTS.md`).
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
    for stat in stats {
        if let Some(line) = mode_line(stat) {
            out.push_str(&line);
            out.push('\n');
        }
    }
    for stat in stats {
        if let Some(kind) = elsewhere(&stat.path) {
            out.push_str(&format!(" {}: {}\n", kind.label(), name_safe(&stat.path)));
        }
    }
    out
}

/// Git's `--summary` line for a file whose mode deserves a look; `None` for
/// plain files and for a symlink or submodule changed in place (git prints
/// no line for those, and the patch shows the new target).
fn mode_line(stat: &FileStat) -> Option<String> {
    let path = name_safe(&stat.path);
    if let Some((old, new)) = stat.mode_change() {
        return Some(format!(" mode change {old:o} => {new:o} {path}"));
    }
    if !(stat.is_symlink() || stat.is_submodule() || stat.is_new_executable()) {
        return None;
    }
    match (stat.old_mode, stat.new_mode) {
        (0, new) => Some(format!(" create mode {new:o} {path}")),
        (old, 0) => Some(format!(" delete mode {old:o} {path}")),
        _ => None,
    }
}

/// How many `+` and `-` a file of `added` and `removed` lines gets in a
/// graph `width` wide, when the largest change among the files shown is
/// `max_change` lines; scaled down as git's `--stat` does when the largest
/// change does not fit, keeping at least one of each kind that is present.
pub fn bar(added: u64, removed: u64, width: u64, max_change: u64) -> (u64, u64) {
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

/// The escaped name, its end kept when it is too long.
fn shorten(path: &str) -> String {
    let path = name_safe(path);
    let chars = path.chars().count();
    if chars <= MAX_NAME {
        return path.to_string();
    }
    let tail: String = path.chars().skip(chars - (MAX_NAME - 3)).collect();
    format!("...{tail}")
}

fn summary(stats: &[FileStat]) -> String {
    let added: u64 = stats.iter().map(|stat| stat.added).sum();
    let removed: u64 = stats.iter().map(|stat| stat.removed).sum();
    let mut line = format!(" {} changed", count(stats.len(), "file", "files"));
    if stats.is_empty() {
        line.push('\n');
        return line;
    }
    if added > 0 || removed == 0 {
        line.push_str(&format!(", {}(+)", count(added, "insertion", "insertions")));
    }
    if removed > 0 || added == 0 {
        line.push_str(&format!(", {}(-)", count(removed, "deletion", "deletions")));
    }
    line.push('\n');
    line
}
