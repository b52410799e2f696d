//! Finds what a patch adds that reads differently from what it is: bidi
//! controls, zero-width and other invisible characters in added lines or in
//! file names ("Trojan Source"). The pager shows them escaped, but a reader
//! skimming a long patch needs to be told where they are, and `--review
//! auto` must not apply such a patch unseen.

use std::io::{self, BufRead};

use ah_record::patch::PatchInfo;
use ah_record::safe_text::{describe, invisible_chars, is_invisible, name_safe};

/// How many places a warning or a reason lists before `and N more`.
const LISTED: usize = 5;

/// One invisible character the patch adds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hidden {
    /// The file (as the patch names it; escape it before showing it).
    pub path: String,
    /// The line of the new file; `None` when the character is in the name.
    pub line: Option<u64>,
    pub ch: char,
}

/// Every invisible character in the patch's added lines and file names,
/// each kind once per line, in patch order. `text` is the patch `patch`
/// describes, read line by line (a patch is never held whole).
pub fn hidden_chars(patch: &PatchInfo, mut text: impl BufRead) -> io::Result<Vec<Hidden>> {
    let mut found = Vec::new();
    for file in &patch.files {
        for ch in file.path.chars().filter(|&c| is_invisible(c)) {
            push(&mut found, &file.path, None, ch);
        }
    }
    // The file whose section is being read (sections follow `patch.files`,
    // one `diff --git` line each), and the new file's number of its next
    // line (`None` before the first hunk).
    let mut file: Option<usize> = None;
    let mut next: Option<u64> = None;
    let mut line = Vec::new();
    loop {
        line.clear();
        if text.read_until(b'\n', &mut line)? == 0 {
            return Ok(found);
        }
        if line.starts_with(b"diff --git ") {
            file = Some(file.map_or(0, |at| at + 1));
            next = None;
            continue;
        }
        // Sections that do not match the file list (never seen) name the
        // patch itself.
        let path = file
            .and_then(|at| patch.files.get(at))
            .map_or("session.patch", |f| f.path.as_str());
        let line = String::from_utf8_lossy(&line);
        let line = line.strip_suffix('\n').unwrap_or(&line);
        next = scan_line(line, next, path, &mut found);
    }
}

/// `src/lib.rs:12 (U+202E RIGHT-TO-LEFT OVERRIDE), …`: the places, names
/// escaped, the first few of them and how many more.
pub fn describe_hidden(found: &[Hidden]) -> String {
    let mut places: Vec<String> = found
        .iter()
        .take(LISTED)
        .map(|hidden| {
            let path = name_safe(&hidden.path);
            match hidden.line {
                Some(line) => format!("{path}:{line} ({})", describe(hidden.ch)),
                None => format!("{path} (its name: {})", describe(hidden.ch)),
            }
        })
        .collect();
    if found.len() > LISTED {
        places.push(format!("and {} more", found.len() - LISTED));
    }
    places.join(", ")
}

/// One line of a file's section: its invisible characters when it is an
/// added line, numbered as in the new file. Returns the next line's number.
fn scan_line(line: &str, next: Option<u64>, path: &str, found: &mut Vec<Hidden>) -> Option<u64> {
    if line.starts_with("@@") {
        return new_start(line);
    }
    let number = next?;
    match line.chars().next() {
        Some('+') => {
            // A byte-order mark opening a file is how some editors save
            // it, not a hidden character.
            let added = match number {
                1 => line[1..].strip_prefix('\u{FEFF}').unwrap_or(&line[1..]),
                _ => &line[1..],
            };
            for (_, ch) in invisible_chars(added) {
                push(found, path, Some(number), ch);
            }
            Some(number + 1)
        }
        Some(' ') => Some(number + 1),
        _ => next,
    }
}

/// `c` of a hunk header `@@ -a,b +c,d @@`.
fn new_start(header: &str) -> Option<u64> {
    let after = header.split(" +").nth(1)?;
    let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

fn push(found: &mut Vec<Hidden>, path: &str, line: Option<u64>, ch: char) {
    // Findings come line by line: a repeat can only be on the current line.
    let mut same_line = found
        .iter()
        .rev()
        .take_while(|hidden| hidden.path == path && hidden.line == line);
    if !same_line.any(|hidden| hidden.ch == ch) {
        found.push(Hidden {
            path: path.to_string(),
            line,
            ch,
        });
    }
}
