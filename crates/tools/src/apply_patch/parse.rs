//! Parses the V4A patch format that `apply_patch` takes:
//!
//! ```text
//! *** Begin Patch
//! *** Add File: PATH          every following line starts with `+`
//! *** Delete File: PATH
//! *** Update File: PATH
//! *** Move to: NEW_PATH       optional, right after Update File
//! @@ CONTEXT                  optional header(s): a line to find first
//!  context line               ` ` kept, `-` removed, `+` added
//! *** End of File             optional: the hunk ends at the end of the file
//! *** End Patch
//! ```
//!
//! The first hunk of an update may leave out its `@@` line; several `@@`
//! lines in a row narrow the search step by step (`@@ class A`, `@@ def f`).
//! An empty line inside a hunk counts as an empty context line. Errors name
//! the patch line.

/// One file operation of a patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Op {
    Add {
        path: String,
        content: String,
    },
    Delete {
        path: String,
    },
    Update {
        path: String,
        move_to: Option<String>,
        hunks: Vec<Hunk>,
    },
}

/// One `@@` section of an update.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Hunk {
    /// Lines to find, in order, before the hunk's lines (the `@@` texts).
    pub headers: Vec<String>,
    pub lines: Vec<Line>,
    /// The hunk must match at the end of the file.
    pub end_of_file: bool,
}

/// A line of a hunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Line {
    Context(String),
    Remove(String),
    Add(String),
}

/// Why a patch could not be read; `line` is 1-based in the patch text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line} of the patch: {message}")]
pub(super) struct ParseError {
    pub line: usize,
    pub message: String,
}

const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const ADD: &str = "*** Add File: ";
const DELETE: &str = "*** Delete File: ";
const UPDATE: &str = "*** Update File: ";
const MOVE: &str = "*** Move to: ";
const END_OF_FILE: &str = "*** End of File";

/// Reads a whole patch; blank lines around it and `\r` line ends are allowed.
pub(super) fn parse(patch: &str) -> Result<Vec<Op>, ParseError> {
    let lines: Vec<&str> = patch.lines().collect();
    let first = lines.iter().position(|l| !l.trim().is_empty());
    let last = lines.iter().rposition(|l| !l.trim().is_empty());
    let (Some(first), Some(last)) = (first, last) else {
        return Err(error(
            1,
            format!("the patch is empty: it must start with {BEGIN:?}"),
        ));
    };
    if lines[first].trim() != BEGIN {
        return Err(error(
            first + 1,
            format!("the patch must start with {BEGIN:?}"),
        ));
    }
    if last == first || lines[last].trim() != END {
        return Err(error(last + 1, format!("the patch must end with {END:?}")));
    }
    let mut reader = Reader {
        lines: &lines[..last],
        at: first + 1,
    };
    let mut ops = Vec::new();
    while let Some(line) = reader.peek() {
        let number = reader.at + 1;
        reader.at += 1;
        if let Some(path) = line.strip_prefix(ADD) {
            let path = file_path(path, number)?;
            ops.push(Op::Add {
                path,
                content: reader.added_lines()?,
            });
        } else if let Some(path) = line.strip_prefix(DELETE) {
            ops.push(Op::Delete {
                path: file_path(path, number)?,
            });
        } else if let Some(path) = line.strip_prefix(UPDATE) {
            let path = file_path(path, number)?;
            let move_to = match reader.peek().and_then(|l| l.strip_prefix(MOVE)) {
                Some(to) => {
                    reader.at += 1;
                    Some(file_path(to, reader.at)?)
                }
                None => None,
            };
            let hunks = reader.hunks()?;
            if hunks.is_empty() && move_to.is_none() {
                return Err(error(
                    number,
                    format!("\"{UPDATE}{path}\" has no hunk: add @@ hunks or remove the section"),
                ));
            }
            ops.push(Op::Update {
                path,
                move_to,
                hunks,
            });
        } else if line.trim().is_empty() {
            continue;
        } else {
            return Err(error(
                number,
                format!(
                    "expected \"{ADD}\", \"{DELETE}\" or \"{UPDATE}\" followed by a path, \
                     got {line:?}"
                ),
            ));
        }
    }
    if ops.is_empty() {
        return Err(error(first + 1, "the patch changes no file".to_string()));
    }
    Ok(ops)
}

struct Reader<'a> {
    lines: &'a [&'a str],
    /// Index of the next line.
    at: usize,
}

impl<'a> Reader<'a> {
    fn peek(&self) -> Option<&'a str> {
        self.lines
            .get(self.at)
            .map(|l| l.strip_suffix('\r').unwrap_or(l))
    }

    /// Whether the next line starts another file (or nothing is left).
    fn at_file_marker(&self) -> bool {
        self.peek()
            .is_none_or(|l| [ADD, DELETE, UPDATE].iter().any(|m| l.starts_with(m)))
    }

    /// The `+` lines of an added file, as its content.
    fn added_lines(&mut self) -> Result<String, ParseError> {
        let mut content = String::new();
        while !self.at_file_marker() {
            let line = self.peek().unwrap_or_default();
            let Some(text) = line.strip_prefix('+') else {
                return Err(error(
                    self.at + 1,
                    format!("every line of an added file must start with '+', got {line:?}"),
                ));
            };
            content.push_str(text);
            content.push('\n');
            self.at += 1;
        }
        Ok(content)
    }

    /// The hunks of an update, up to the next file.
    fn hunks(&mut self) -> Result<Vec<Hunk>, ParseError> {
        let mut hunks: Vec<Hunk> = Vec::new();
        let mut current: Option<Hunk> = None;
        while !self.at_file_marker() {
            let line = self.peek().unwrap_or_default().to_string();
            let number = self.at + 1;
            self.at += 1;
            if let Some(header) = line.strip_prefix("@@") {
                // `@@ a` right after `@@ b` narrows the same hunk.
                let mut hunk = match current.take() {
                    Some(hunk) if hunk.lines.is_empty() => hunk,
                    Some(done) => {
                        hunks.push(done);
                        Hunk::default()
                    }
                    None => Hunk::default(),
                };
                let header = header.trim();
                if !header.is_empty() {
                    hunk.headers.push(header.to_string());
                }
                current = Some(hunk);
                continue;
            }
            if line.trim() == END_OF_FILE {
                let Some(mut hunk) = current.take().filter(|h| !h.lines.is_empty()) else {
                    return Err(error(number, format!("{END_OF_FILE:?} must end a hunk")));
                };
                hunk.end_of_file = true;
                hunks.push(hunk);
                continue;
            }
            let parsed = match line.chars().next() {
                None => Line::Context(String::new()),
                Some(' ') => Line::Context(line[1..].to_string()),
                Some('-') => Line::Remove(line[1..].to_string()),
                Some('+') => Line::Add(line[1..].to_string()),
                Some(_) => {
                    return Err(error(
                        number,
                        format!(
                            "a hunk line must start with ' ', '-' or '+' (or be an @@ line), \
                             got {line:?}"
                        ),
                    ));
                }
            };
            current.get_or_insert_with(Hunk::default).lines.push(parsed);
        }
        if let Some(hunk) = current {
            if hunk.lines.is_empty() {
                return Err(error(
                    self.at,
                    "a hunk has an @@ line but no lines".to_string(),
                ));
            }
            hunks.push(hunk);
        }
        Ok(hunks)
    }
}

fn file_path(path: &str, line: usize) -> Result<String, ParseError> {
    let path = path.trim();
    if path.is_empty() {
        return Err(error(line, "a file line names no path".to_string()));
    }
    Ok(path.to_string())
}

fn error(line: usize, message: String) -> ParseError {
    ParseError { line, message }
}
