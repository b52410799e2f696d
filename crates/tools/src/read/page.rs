//! One page of a file for `read`, streamed: lines before the page are
//! skipped as they go by, the page's lines keep only what is shown of them,
//! and reading stops once the page is full, so a file of any size (a sparse
//! terabyte, a gigabyte on one line) costs a page of memory. The lines
//! after the page are counted only in a file small enough to count cheaply.

use std::fmt::Write as _;
use std::io::{self, BufRead, BufReader, Read};

/// Longer lines are cut to this many characters.
pub(super) const MAX_LINE_CHARS: usize = 2000;
/// Bytes kept of a line: enough for [`MAX_LINE_CHARS`] characters of any width.
const KEEP_BYTES: usize = 4 * MAX_LINE_CHARS;
/// A NUL byte in this many leading bytes marks a file as binary.
pub(super) const BINARY_SNIFF: usize = 8192;
/// Lines after the page are counted (to say how many the file has) only in
/// files up to this size; in larger ones the total stays unknown.
const COUNT_UP_TO: u64 = 16 * 1024 * 1024;
/// Bytes read from the file at a time.
const BUFFER: usize = 64 * 1024;

/// The numbered lines `first..=last` (1-based) of a file.
#[derive(Debug)]
pub(super) struct Page {
    pub text: String,
    pub first: usize,
    pub last: usize,
    /// Lines in the file, when they were counted.
    pub total: Option<usize>,
    /// Whether lines follow `last`.
    pub more: bool,
}

/// Why no page could be shown.
#[derive(Debug)]
pub(super) enum PageError {
    /// A NUL byte among the first [`BINARY_SNIFF`] bytes.
    Binary,
    /// The offset lies past the last line of a non-empty file of this many lines.
    PastEnd(usize),
    Io(io::Error),
}

impl From<io::Error> for PageError {
    fn from(e: io::Error) -> PageError {
        PageError::Io(e)
    }
}

impl Page {
    /// Reads the page of at most `limit` lines from line `offset` (1-based)
    /// of `file`, a file of `size` bytes, stopping before the line that
    /// would take the page over `max_chars` characters (the first line is
    /// always shown).
    pub(super) fn read(
        mut file: impl Read,
        size: u64,
        offset: u64,
        limit: u64,
        max_chars: usize,
    ) -> Result<Page, PageError> {
        let mut head = Vec::with_capacity(BINARY_SNIFF);
        (&mut file)
            .take(BINARY_SNIFF as u64)
            .read_to_end(&mut head)?;
        if head.contains(&0) {
            return Err(PageError::Binary);
        }
        let mut lines = Lines {
            reader: BufReader::with_capacity(BUFFER, io::Cursor::new(head).chain(file)),
        };
        let first = usize::try_from(offset).unwrap_or(usize::MAX).max(1);
        let count = usize::try_from(limit).unwrap_or(usize::MAX).max(1);
        for skipped in 1..first {
            if lines.next(0)?.is_none() {
                return match skipped - 1 {
                    0 => Ok(Page::empty()),
                    total => Err(PageError::PastEnd(total)),
                };
            }
        }
        let mut text = String::new();
        let mut chars = 0;
        let mut last = first - 1;
        // Set when a line was read but not shown, or the limit was reached.
        let mut pending = None;
        while let Some(line) = lines.next(KEEP_BYTES)? {
            if last + 1 - first == count {
                pending = Some(line);
                break;
            }
            let shown = line.render(last + 1);
            let width = shown.chars().count();
            if last >= first && chars + width > max_chars {
                pending = Some(line);
                break;
            }
            text.push_str(&shown);
            chars += width;
            last += 1;
        }
        if last < first {
            // Nothing at or after the offset.
            return match first - 1 {
                0 => Ok(Page::empty()),
                total => Err(PageError::PastEnd(total)),
            };
        }
        let more = pending.is_some();
        let total = match (more, size <= COUNT_UP_TO) {
            (false, _) => Some(last),
            (true, true) => Some(last + 1 + lines.count_rest()?),
            (true, false) => None,
        };
        Ok(Page {
            text,
            first,
            last,
            total,
            more,
        })
    }

    fn empty() -> Page {
        Page {
            text: String::new(),
            first: 0,
            last: 0,
            total: Some(0),
            more: false,
        }
    }
}

/// One line as read: its first bytes and how many characters followed them.
#[derive(Debug, Default)]
struct Line {
    kept: Vec<u8>,
    /// Characters (UTF-8 lead bytes) past `kept`.
    extra_chars: u64,
}

impl Line {
    /// `number<TAB>text<NEWLINE>`, the text cut at [`MAX_LINE_CHARS`].
    fn render(&self, number: usize) -> String {
        let mut out = String::new();
        push_line(
            &mut out,
            number,
            &String::from_utf8_lossy(&self.kept),
            self.extra_chars,
        );
        out
    }
}

/// Appends `number<TAB>line<NEWLINE>` to `out` as `cat -n` would, cutting
/// the line at [`MAX_LINE_CHARS`] characters with a marker saying how many
/// more it has (`extra` of them were never read into `line`).
pub(crate) fn push_line(out: &mut String, number: usize, line: &str, extra: u64) {
    let _ = write!(out, "{number:>6}\t");
    let cut = line
        .char_indices()
        .nth(MAX_LINE_CHARS)
        .map_or(line.len(), |(at, _)| at);
    let rest = line[cut..].chars().count() as u64 + extra;
    if rest == 0 {
        let _ = writeln!(out, "{line}");
    } else {
        let _ = writeln!(out, "{}… [line cut: {rest} more chars]", &line[..cut]);
    }
}

/// Lines of a stream, split like [`str::lines`] (at `\n`, a `\r` before it
/// dropped), each read without holding more than it keeps.
struct Lines<R> {
    reader: BufReader<R>,
}

impl<R: Read> Lines<R> {
    /// The next line with its first `keep` bytes kept; `None` at the end.
    fn next(&mut self, keep: usize) -> io::Result<Option<Line>> {
        let mut line = Line::default();
        let mut started = false;
        let mut last_byte = None;
        loop {
            let buf = self.reader.fill_buf()?;
            if buf.is_empty() {
                return Ok(started.then_some(line));
            }
            started = true;
            let newline = buf.iter().position(|&b| b == b'\n');
            let chunk = &buf[..newline.unwrap_or(buf.len())];
            let room = keep.saturating_sub(line.kept.len()).min(chunk.len());
            let (kept, over) = chunk.split_at(room);
            line.kept.extend_from_slice(kept);
            line.extra_chars += over.iter().filter(|&&b| b & 0xC0 != 0x80).count() as u64;
            if let Some(&byte) = chunk.last() {
                last_byte = Some(byte);
            }
            let used = chunk.len() + usize::from(newline.is_some());
            self.reader.consume(used);
            if newline.is_some() {
                break;
            }
        }
        if last_byte == Some(b'\r') {
            if line.extra_chars > 0 {
                line.extra_chars -= 1;
            } else {
                line.kept.pop();
            }
        }
        Ok(Some(line))
    }

    /// How many lines remain.
    fn count_rest(&mut self) -> io::Result<usize> {
        let mut count = 0;
        let mut open = false;
        loop {
            let buf = self.reader.fill_buf()?;
            let Some(&last) = buf.last() else {
                return Ok(count + usize::from(open));
            };
            count += buf.iter().filter(|&&b| b == b'\n').count();
            open = last != b'\n';
            let used = buf.len();
            self.reader.consume(used);
        }
    }
}
