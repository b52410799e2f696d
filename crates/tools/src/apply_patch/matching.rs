//! Applies the hunks of one `*** Update File` to the file's text, in memory.
//!
//! Hunks are found in order, each after the previous one: first its `@@`
//! header lines, one after the other, then its old lines (context and
//! removed lines). A hunk marked `*** End of File` is looked for at the end
//! first. Matching is exact first; only if that fails, lines that differ in
//! trailing whitespace (spaces, tabs, a `\r`) also match. Leading whitespace
//! always counts: indentation is meaning in many languages, and a patch
//! that guesses it wrong must not land. Context lines keep the file's own
//! text; only removed and added lines change the file. The first match
//! after the previous hunk wins, as in every V4A implementation: a header
//! line picks the place when the same lines occur twice.
//!
//! A hunk without old lines (only `+` lines) goes right after its last
//! header line, or at the end of the file when it has none. The file's line
//! ending (`\n` or `\r\n`) and whether it ends with one are kept.

use super::parse::{Hunk, Line};

/// Why a hunk did not apply: which hunk (1-based) and what was not found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Miss {
    pub hunk: usize,
    /// The lines looked for: a header line, or the hunk's old lines.
    pub looked_for: Vec<String>,
    /// Whether a header line (rather than the hunk's lines) was missing.
    pub header: bool,
}

/// The new text of a file after `hunks`.
pub(super) fn apply(text: &str, hunks: &[Hunk]) -> Result<String, Miss> {
    let eol = if text.contains("\r\n") { "\r\n" } else { "\n" };
    let ends_with_eol = text.is_empty() || text.ends_with(eol);
    let mut lines: Vec<&str> = text.split(eol).collect();
    if ends_with_eol {
        lines.pop();
    }

    // (start, old length, replacement) per hunk, in file order.
    let mut edits: Vec<(usize, usize, Vec<String>)> = Vec::new();
    let mut cursor = 0;
    for (number, hunk) in hunks.iter().enumerate() {
        let number = number + 1;
        for header in &hunk.headers {
            let found =
                seek(&lines, std::slice::from_ref(header), cursor, false).ok_or_else(|| Miss {
                    hunk: number,
                    looked_for: vec![header.clone()],
                    header: true,
                })?;
            cursor = found + 1;
        }
        let mut body: &[Line] = &hunk.lines;
        let old = |body: &[Line]| -> Vec<String> {
            body.iter()
                .filter_map(|l| match l {
                    Line::Context(t) | Line::Remove(t) => Some(t.clone()),
                    Line::Add(_) => None,
                })
                .collect()
        };
        let mut wanted = old(body);
        if wanted.is_empty() {
            let at = if hunk.headers.is_empty() {
                lines.len()
            } else {
                cursor
            };
            edits.push((at, 0, replacement(body, &[])));
            continue;
        }
        let mut found = seek(&lines, &wanted, cursor, hunk.end_of_file);
        // A blank context line at the end of a hunk often stands for the
        // end of the file rather than an empty line in it.
        if found.is_none()
            && let Some((Line::Context(last), rest)) = body.split_last()
            && last.trim().is_empty()
        {
            body = rest;
            wanted = old(body);
            found = seek(&lines, &wanted, cursor, true);
        }
        let Some(start) = found else {
            return Err(Miss {
                hunk: number,
                looked_for: old(&hunk.lines),
                header: false,
            });
        };
        let end = start + wanted.len();
        edits.push((start, wanted.len(), replacement(body, &lines[start..end])));
        cursor = end;
    }

    let mut out: Vec<String> = lines.iter().map(|l| (*l).to_string()).collect();
    for (start, len, new) in edits.into_iter().rev() {
        out.splice(start..start + len, new);
    }
    let mut text = out.join(eol);
    if ends_with_eol && !out.is_empty() {
        text.push_str(eol);
    }
    Ok(text)
}

/// The lines that replace `matched` (the file's lines the hunk's old lines
/// matched): context lines as the file has them, added lines from the patch.
fn replacement(body: &[Line], matched: &[&str]) -> Vec<String> {
    let mut file = matched.iter();
    let mut out = Vec::new();
    for line in body {
        match line {
            Line::Context(text) => out.push(
                file.next()
                    .map_or_else(|| text.clone(), |l| (*l).to_string()),
            ),
            Line::Remove(_) => {
                file.next();
            }
            Line::Add(text) => out.push(text.clone()),
        }
    }
    out
}

/// Where `pattern` starts in `lines` at or after `from`: exact matches
/// first, then matches up to trailing whitespace. With `at_end`, a match
/// that ends the file is preferred.
fn seek(lines: &[&str], pattern: &[String], from: usize, at_end: bool) -> Option<usize> {
    if pattern.len() > lines.len() {
        return None;
    }
    let last_start = lines.len() - pattern.len();
    let exact = |a: &str, b: &str| a == b;
    let loose = |a: &str, b: &str| a.trim_end() == b.trim_end();
    for same in [&exact as &dyn Fn(&str, &str) -> bool, &loose] {
        let matches = |start: usize| {
            lines[start..start + pattern.len()]
                .iter()
                .zip(pattern)
                .all(|(line, want)| same(line, want))
        };
        if at_end && last_start >= from && matches(last_start) {
            return Some(last_start);
        }
        if let Some(start) = (from..=last_start).find(|&start| matches(start)) {
            return Some(start);
        }
    }
    None
}
