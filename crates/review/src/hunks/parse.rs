//! Reading a patch into [`PatchHunks`]: one pass over its lines, keeping
//! offsets, line numbers and counts. Of any line only its first
//! [`HEAD_BYTES`] are looked at, so a line of any length costs that much.

use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

use ah_record::patch::{MODE_SUBMODULE, MODE_SYMLINK};

mod header;

use self::header::header_line;
use super::{Form, Hunk, HunkError, Lines, MAX_UNITS, PatchHunks, Section, Span, Whole};

/// Bytes of a line kept to read it: a header line names a path, which
/// git quotes (at most four bytes for one) and the system caps at 4 KiB.
const HEAD_BYTES: usize = 16 * 1024 + 64;
/// The highest line number a hunk header may give: more than any file
/// has, and small enough that no sum of them overflows.
const MAX_LINE: u64 = 1 << 40;

pub(super) fn parse(reader: impl Read, path: &Path) -> Result<PatchHunks, HunkError> {
    let mut lines = LineReader {
        inner: BufReader::with_capacity(64 * 1024, reader),
        at: 0,
        number: 0,
        head: Vec::new(),
        cut: false,
    };
    let mut parser = Parser {
        path,
        sections: Vec::new(),
        atoms: 0,
        open: None,
    };
    loop {
        let next = lines.next().map_err(|source| HunkError::Io {
            action: "read",
            path: path.to_path_buf(),
            source,
        })?;
        let Some((start, end)) = next else { break };
        parser.line(&lines, start, end)?;
    }
    parser.finish(lines.at, lines.number)?;
    Ok(PatchHunks {
        sections: parser.sections,
        atoms: parser.atoms,
    })
}

/// Lines of a reader, one at a time.
struct LineReader<R> {
    inner: BufReader<R>,
    /// Offset of the next line.
    at: u64,
    /// Number of the line last read, from 1.
    number: u64,
    /// The line's first [`HEAD_BYTES`], without its newline.
    head: Vec<u8>,
    /// The line was longer than `head`.
    cut: bool,
}

impl<R: Read> LineReader<R> {
    /// The next line's start and end offsets (its newline included).
    fn next(&mut self) -> io::Result<Option<(u64, u64)>> {
        self.head.clear();
        self.cut = false;
        let start = self.at;
        loop {
            let buf = self.inner.fill_buf()?;
            if buf.is_empty() {
                if self.at == start {
                    return Ok(None);
                }
                self.number += 1;
                return Ok(Some((start, self.at)));
            }
            let newline = buf.iter().position(|&b| b == b'\n');
            let content = newline.unwrap_or(buf.len());
            let room = HEAD_BYTES - self.head.len();
            self.cut |= content > room;
            self.head.extend_from_slice(&buf[..content.min(room)]);
            let taken = newline.map_or(buf.len(), |n| n + 1);
            self.inner.consume(taken);
            self.at += taken as u64;
            if newline.is_some() {
                self.number += 1;
                return Ok(Some((start, self.at)));
            }
        }
    }
}

struct Parser<'a> {
    path: &'a Path,
    sections: Vec<Section>,
    atoms: usize,
    open: Option<Open>,
}

/// The section being read.
struct Open {
    start: u64,
    body: Option<u64>,
    whole: Whole,
    hunks: Vec<Hunk>,
    state: State,
    /// The first atom of its units.
    atom: usize,
}

enum State {
    Header,
    /// Inside a `GIT binary patch`: its lines are not looked at.
    Binary,
    Hunk(Building),
}

/// A hunk being read.
struct Building {
    at: u64,
    span: Span,
    /// Lines of each side still to come.
    old_left: u64,
    new_left: u64,
    /// Lines of each side seen.
    old_seen: u64,
    new_seen: u64,
    groups: Vec<Group>,
    in_group: bool,
}

/// A run of changed lines within a hunk (a `\` line goes with the line
/// before it).
struct Group {
    start: u64,
    end: u64,
    /// Lines of each side before it, and up to its end.
    old_from: u64,
    new_from: u64,
    old_to: u64,
    new_to: u64,
}

impl Parser<'_> {
    fn error(&self, line: u64, what: impl Into<String>) -> HunkError {
        HunkError::Malformed {
            path: self.path.to_path_buf(),
            line,
            what: what.into(),
        }
    }

    fn line<R>(&mut self, lines: &LineReader<R>, start: u64, end: u64) -> Result<(), HunkError> {
        let (head, number) = (lines.head.as_slice(), lines.number);
        if let Some(Open {
            state: State::Hunk(hunk),
            ..
        }) = &mut self.open
        {
            let done = hunk.old_left == 0 && hunk.new_left == 0;
            match head.first() {
                Some(b'\\') if hunk.old_seen + hunk.new_seen > 0 => {
                    if hunk.in_group
                        && let Some(group) = hunk.groups.last_mut()
                    {
                        group.end = end;
                    }
                    hunk.span.end = end;
                    return Ok(());
                }
                Some(&kind @ (b' ' | b'-' | b'+')) if !done => {
                    return hunk_line(hunk, kind, start, end)
                        .map_err(|what| self.error(number, what));
                }
                _ if !done => {
                    return Err(self.error(
                        number,
                        "the hunk ends before the lines its header counts (a hunk line starts with ' ', '+', '-' or '\\')",
                    ));
                }
                _ => self.end_hunk(number)?,
            }
        }
        if head.starts_with(b"diff --git ") {
            self.end_section(start, number)?;
            self.open = Some(Open {
                start,
                body: None,
                whole: Whole::default(),
                hunks: Vec::new(),
                state: State::Header,
                atom: self.atoms,
            });
            return Ok(());
        }
        let Some(open) = &mut self.open else {
            return Err(self.error(number, "a patch starts with a `diff --git` line"));
        };
        match open.state {
            State::Binary => Ok(()),
            State::Header if head.starts_with(b"@@ ") => {
                let Some((old, new)) = hunk_header(head) else {
                    return Err(
                        self.error(number, "not a hunk header of the form `@@ -A,B +C,D @@`")
                    );
                };
                open.body.get_or_insert(start);
                open.state = State::Hunk(Building {
                    at: start,
                    span: Span {
                        start: end,
                        end,
                        old,
                        new,
                        added: 0,
                        removed: 0,
                    },
                    old_left: old.len,
                    new_left: new.len,
                    old_seen: 0,
                    new_seen: 0,
                    groups: Vec::new(),
                    in_group: false,
                });
                Ok(())
            }
            State::Header if open.hunks.is_empty() => {
                if lines.cut {
                    return Err(self.error(number, "a header line is too long"));
                }
                if head.starts_with(b"GIT binary patch") {
                    open.state = State::Binary;
                }
                let read = header_line(&mut open.whole, head);
                read.map_err(|what| self.error(number, what))
            }
            _ => Err(self.error(number, "unexpected line after a hunk")),
        }
    }

    /// Closes the hunk being read: its pieces, its atoms.
    fn end_hunk(&mut self, number: u64) -> Result<(), HunkError> {
        let Some(open) = &mut self.open else {
            return Ok(());
        };
        let State::Hunk(building) = std::mem::replace(&mut open.state, State::Header) else {
            return Ok(());
        };
        if building.old_left + building.new_left > 0 {
            return Err(self.error(number, "the patch ends inside a hunk"));
        }
        if let Some(last) = open.hunks.last()
            && building.span.old.before < last.span.old.before + last.span.old.len
        {
            return Err(self.error(number, "hunks overlap or are out of order"));
        }
        let pieces = pieces(&building);
        let atom = self.atoms;
        self.atoms += pieces.len().max(1);
        open.hunks.push(Hunk {
            at: building.at,
            span: building.span,
            pieces,
            atom,
        });
        self.bounded()
    }

    /// Refuses a patch of more than [`MAX_UNITS`] units.
    fn bounded(&self) -> Result<(), HunkError> {
        if self.atoms > MAX_UNITS {
            return Err(HunkError::TooMany {
                path: self.path.to_path_buf(),
            });
        }
        Ok(())
    }

    /// Closes the section being read at `end`.
    fn end_section(&mut self, end: u64, number: u64) -> Result<(), HunkError> {
        self.end_hunk(number)?;
        let Some(mut open) = self.open.take() else {
            return Ok(());
        };
        let whole = &mut open.whole;
        whole.added = open.hunks.iter().map(|h| h.span.added).sum();
        whole.removed = open.hunks.iter().map(|h| h.span.removed).sum();
        let taken_whole = whole.renamed.is_some()
            || whole.copied.is_some()
            || whole.mode_change
            || whole.created
            || whole.deleted
            || whole.binary
            || whole.has_mode(MODE_SYMLINK)
            || whole.has_mode(MODE_SUBMODULE)
            || open.hunks.is_empty();
        let atom = open.atom;
        let form = if taken_whole {
            // Its hunks count as one unit.
            self.atoms = atom + 1;
            Form::Whole(open.whole)
        } else {
            Form::Hunks(open.hunks)
        };
        self.sections.push(Section {
            start: open.start,
            body: open.body.unwrap_or(end),
            end,
            form,
            atom,
        });
        self.bounded()
    }

    fn finish(&mut self, end: u64, number: u64) -> Result<(), HunkError> {
        self.end_section(end, number)
    }
}

/// Counts one ` `, `-` or `+` line into the hunk.
fn hunk_line(hunk: &mut Building, kind: u8, start: u64, end: u64) -> Result<(), &'static str> {
    let (old, new) = match kind {
        b' ' => (1, 1),
        b'-' => (1, 0),
        _ => (0, 1),
    };
    if hunk.old_left < old || hunk.new_left < new {
        return Err("the hunk has more lines than its header counts");
    }
    hunk.old_left -= old;
    hunk.new_left -= new;
    if kind == b' ' {
        hunk.in_group = false;
    } else {
        if !hunk.in_group {
            hunk.groups.push(Group {
                start,
                end,
                old_from: hunk.old_seen,
                new_from: hunk.new_seen,
                old_to: 0,
                new_to: 0,
            });
            hunk.in_group = true;
        }
        if kind == b'-' {
            hunk.span.removed += 1;
        } else {
            hunk.span.added += 1;
        }
    }
    hunk.old_seen += old;
    hunk.new_seen += new;
    if hunk.in_group
        && let Some(group) = hunk.groups.last_mut()
    {
        group.end = end;
        group.old_to = hunk.old_seen;
        group.new_to = hunk.new_seen;
    }
    hunk.span.end = end;
    Ok(())
}

/// A hunk's pieces, `git add -p` style: one per change group, each from
/// the end of the group before (or the hunk's start) to the start of the
/// group after (or the hunk's end), so that neighbours share the context
/// between them. None when the hunk has one group.
fn pieces(hunk: &Building) -> Vec<Span> {
    let groups = &hunk.groups;
    if groups.len() < 2 {
        return Vec::new();
    }
    let span = &hunk.span;
    (0..groups.len())
        .map(|i| {
            let group = &groups[i];
            let (start, old_from, new_from) = match i.checked_sub(1).map(|p| &groups[p]) {
                Some(prev) => (prev.end, prev.old_to, prev.new_to),
                None => (span.start, 0, 0),
            };
            let (end, old_to, new_to) = match groups.get(i + 1) {
                Some(next) => (next.start, next.old_from, next.new_from),
                None => (span.end, span.old.len, span.new.len),
            };
            Span {
                start,
                end,
                old: Lines {
                    before: span.old.before + old_from,
                    len: old_to - old_from,
                },
                new: Lines {
                    before: span.new.before + new_from,
                    len: new_to - new_from,
                },
                added: group.new_to - group.new_from,
                removed: group.old_to - group.old_from,
            }
        })
        .collect()
}

/// `@@ -A,B +C,D @@…` as the two sides' lines; `None` when malformed.
fn hunk_header(head: &[u8]) -> Option<(Lines, Lines)> {
    let text = std::str::from_utf8(head.get(3..)?).ok()?;
    let (ranges, _) = text.split_once(" @@")?;
    let (old, new) = ranges.strip_prefix('-')?.split_once(" +")?;
    let side = |range: &str| -> Option<Lines> {
        let (start, len) = match range.split_once(',') {
            Some((start, len)) => (start, len),
            None => (range, "1"),
        };
        let number = |s: &str| {
            (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                .then(|| s.parse::<u64>().ok())
                .flatten()
                .filter(|&n| n <= MAX_LINE)
        };
        let (start, len) = (number(start)?, number(len)?);
        match (start, len) {
            (0, 0) => Some(Lines { before: 0, len: 0 }),
            (0, _) => None,
            (start, 0) => Some(Lines { before: start, len }),
            (start, len) => Some(Lines {
                before: start - 1,
                len,
            }),
        }
    };
    let (old, new) = (side(old)?, side(new)?);
    (old.len + new.len > 0).then_some((old, new))
}
