//! The patch as the review shows it: coloured like git (file headers bold,
//! `@@` lines cyan, removed lines red, added lines green), the words that
//! changed inside a changed line highlighted in reverse video, tabs
//! expanded to 8 columns, a line longer than [`MAX_LINE`] bytes cut with a
//! marker saying how much was left out, and a `GIT binary patch` section
//! summed up in one line. Every piece of the patch's text goes through the
//! terminal escaping (`ah_core::present::terminal_safe_bytes`, what
//! `copy_terminal_safe` applies to each line) before any colour is added,
//! so the model's text can carry no escape sequence of its own.
//!
//! Two entries: [`render_hunk`] shows one hunk (for a view that shows a
//! patch hunk by hunk), [`render_patch`] streams a whole patch of any size,
//! holding one line and at most one run of changed lines ([`MAX_RUN`]
//! lines a side) at a time. Nothing here knows of a terminal: the caller
//! says whether to colour ([`Paint`]).

mod hunk;
mod line;
mod stream;
mod words;

#[cfg(test)]
mod tests;

use std::io::{self, BufReader, Read, Write};

use hunk::Hunk;
pub(crate) use line::Line;
use stream::HunkLines;

/// The longest part of one patch line that is shown, in bytes; the rest is
/// cut, and the marker says how much.
pub(crate) const MAX_LINE: usize = 4096;
/// The most lines of one side of a run of changed lines that are held to
/// pair removed with added lines; a longer run is shown without word
/// highlights.
pub(crate) const MAX_RUN: usize = 256;
/// Columns between tab stops.
pub(crate) const TAB_WIDTH: usize = 8;

/// Whether the text gets colours (escape sequences of ah's own) or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Paint {
    Plain,
    Colour,
}

/// Renders one hunk: its `@@` line and the lines under it (context, `-`,
/// `+` and `\ No newline at end of file`), each without its newline (a
/// line of text or bytes, `&str`, `&[u8]`, `&String`, or a [`Line`]), to
/// `out`. Each run of removed lines is paired in order with the run of
/// added lines right after it, and the changed words of each pair are
/// highlighted; a line past [`MAX_LINE`] bytes is cut.
pub(crate) fn render_hunk<L: Into<Line>>(
    lines: impl IntoIterator<Item = L>,
    paint: Paint,
    out: &mut dyn Write,
) -> io::Result<()> {
    let mut hunk = Hunk::new(paint);
    for line in lines {
        hunk.push(line.into(), out)?;
    }
    hunk.finish(out)
}

/// Renders a whole patch read from `input` to `out`, a line at a time:
/// headers bold, each hunk through [`render_hunk`], a binary section in one
/// line.
pub(crate) fn render_patch(input: impl Read, paint: Paint, out: &mut dyn Write) -> io::Result<()> {
    let mut input = BufReader::with_capacity(64 * 1024, input);
    let mut next = None;
    loop {
        let line = match next.take() {
            Some(line) => line,
            None => match Line::read(&mut input)? {
                Some(line) => line,
                None => return Ok(()),
            },
        };
        if line.bytes.starts_with(b"@@") {
            let mut lines = HunkLines::new(line, &mut input);
            render_hunk(&mut lines, paint, out)?;
            next = lines.end()?;
        } else {
            line::header(&line, paint, out)?;
            if line.bytes == b"GIT binary patch" {
                next = stream::binary_section(&mut input, paint, out)?;
            }
        }
    }
}
