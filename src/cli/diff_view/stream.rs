//! The parts of a whole patch read as a stream: the lines of one hunk, as
//! many as its `@@` line announces (so that a removed line reading `--- x`
//! is not taken for a file's header), and a `GIT binary patch` section,
//! counted and summed up in one line instead of shown.

use std::io::{self, BufRead, Write};

use super::Paint;
use super::line::{self, Line};
use ah_core::present::size;

/// The lines of one hunk, read from the patch as they are asked for; the
/// first line after the hunk is kept for the caller ([`HunkLines::end`]).
pub(super) struct HunkLines<'a, R> {
    input: &'a mut R,
    first: Option<Line>,
    /// Old and new lines the `@@` line announced and not yet read; `None`
    /// when it could not be read.
    left: Option<(u64, u64)>,
    after: Option<Line>,
    error: Option<io::Error>,
    done: bool,
}

impl<'a, R: BufRead> HunkLines<'a, R> {
    /// The hunk that `header` (its `@@` line) opens.
    pub(super) fn new(header: Line, input: &'a mut R) -> HunkLines<'a, R> {
        HunkLines {
            left: counts(&header.bytes),
            first: Some(header),
            input,
            after: None,
            error: None,
            done: false,
        }
    }

    /// The line after the hunk, if one was read, or the error that ended it.
    pub(super) fn end(self) -> io::Result<Option<Line>> {
        match self.error {
            Some(error) => Err(error),
            None => Ok(self.after),
        }
    }

    /// Whether `line` belongs to the hunk: the lines its `@@` line
    /// announced, and a `\` line after them; without readable counts, any
    /// line that is not a file's `diff` line or a new `@@` line.
    fn takes(&self, line: &Line) -> bool {
        let bytes = &line.bytes;
        match self.left {
            Some((0, 0)) => bytes.starts_with(b"\\"),
            Some(_) => true,
            None => !(bytes.starts_with(b"diff ") || bytes.starts_with(b"@@")),
        }
    }

    fn count(&mut self, line: &Line) {
        let (old, new) = match line.bytes.first() {
            Some(b'-') => (1, 0),
            Some(b'+') => (0, 1),
            Some(b'\\') => (0, 0),
            _ => (1, 1),
        };
        if let Some((o, n)) = &mut self.left {
            *o = o.saturating_sub(old);
            *n = n.saturating_sub(new);
        }
    }
}

impl<R: BufRead> Iterator for HunkLines<'_, R> {
    type Item = Line;

    fn next(&mut self) -> Option<Line> {
        if let Some(first) = self.first.take() {
            return Some(first);
        }
        if self.done {
            return None;
        }
        let line = match Line::read(self.input) {
            Ok(Some(line)) => line,
            Ok(None) => None?,
            Err(error) => {
                self.error = Some(error);
                None?
            }
        };
        if !self.takes(&line) {
            self.after = Some(line);
            self.done = true;
            return None;
        }
        self.count(&line);
        Some(line)
    }
}

/// The old and new line counts of a `@@ -a,b +c,d @@` line (a count left
/// out is 1).
fn counts(line: &[u8]) -> Option<(u64, u64)> {
    let text = std::str::from_utf8(line).ok()?;
    let mut parts = text.strip_prefix("@@ ")?.split(' ');
    let count = |part: Option<&str>, sign: char| -> Option<u64> {
        let range = part?.strip_prefix(sign)?;
        match range.split_once(',') {
            Some((_, count)) => count.parse().ok(),
            None => range.parse::<u64>().ok().map(|_| 1),
        }
    };
    Some((count(parts.next(), '-')?, count(parts.next(), '+')?))
}

/// The lines of a `GIT binary patch` section up to the next file's `diff`
/// line, counted and summed up in one line (what the first `literal` or
/// `delta` block says, and the section's size), never shown. Returns the
/// next file's line.
pub(super) fn binary_section(
    input: &mut impl BufRead,
    paint: Paint,
    out: &mut dyn Write,
) -> io::Result<Option<Line>> {
    let mut bytes = 0u64;
    let mut block = None;
    let mut next = None;
    while let Some(line) = Line::read(input)? {
        if line.bytes.starts_with(b"diff ") {
            next = Some(line);
            break;
        }
        let starts = |word: &[u8]| line.bytes.starts_with(word);
        if block.is_none() && (starts(b"literal ") || starts(b"delta ")) {
            block = Some(String::from_utf8_lossy(&line.bytes).into_owned());
        }
        bytes += line.bytes.len() as u64 + line.cut + 1;
    }
    let what = match block.as_deref().and_then(|b| b.split_once(' ')) {
        Some((kind, size)) if size.bytes().all(|b| b.is_ascii_digit()) => {
            format!("{kind}, {size} bytes")
        }
        _ => "no block".to_string(),
    };
    let text = format!(
        "(binary content not shown: {what}; {} of patch text)",
        size(bytes)
    );
    line::note(&text, paint, out)?;
    Ok(next)
}
