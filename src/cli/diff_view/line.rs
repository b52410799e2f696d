//! One line of the patch: read with a bound (at most [`MAX_LINE`] bytes
//! kept, the rest counted), escaped for the terminal, its tabs expanded,
//! and the lines that are not hunk lines written (file headers, notes).

use std::io::{self, BufRead, Write};

use super::{MAX_LINE, Paint, TAB_WIDTH};
use ah_core::present::{size, terminal_safe_bytes};

pub(super) const BOLD: &str = "\x1b[1m";
pub(super) const DIM: &str = "\x1b[2m";
pub(super) const RESET: &str = "\x1b[m";

/// A line of the patch, without its newline: its first bytes, up to
/// [`MAX_LINE`] and ending at a character's end, and how many bytes of it
/// are cut.
#[derive(Debug)]
pub(crate) struct Line {
    pub(super) bytes: Vec<u8>,
    pub(super) cut: u64,
}

impl<T: AsRef<[u8]> + ?Sized> From<&T> for Line {
    fn from(text: &T) -> Line {
        Line::whole(text.as_ref())
    }
}

impl Line {
    /// The next line of `input`, or `None` at its end. Never holds more
    /// than [`MAX_LINE`] bytes of it, however long it is.
    pub(super) fn read(input: &mut impl BufRead) -> io::Result<Option<Line>> {
        let mut bytes = Vec::new();
        let mut cut = 0u64;
        let mut any = false;
        loop {
            let available = input.fill_buf()?;
            if available.is_empty() {
                break;
            }
            any = true;
            let newline = available.iter().position(|&b| b == b'\n');
            let part = &available[..newline.unwrap_or(available.len())];
            let room = MAX_LINE - bytes.len();
            let kept = room.min(part.len());
            bytes.extend_from_slice(&part[..kept]);
            cut += (part.len() - kept) as u64;
            let used = newline.map_or(part.len(), |at| at + 1);
            input.consume(used);
            if newline.is_some() {
                break;
            }
        }
        Ok(any.then(|| Line::cut_at_char(bytes, cut)))
    }

    /// A whole line given at once, cut as [`Line::read`] cuts it.
    fn whole(text: &[u8]) -> Line {
        let text = text.strip_suffix(b"\n").unwrap_or(text);
        let kept = text.len().min(MAX_LINE);
        Line::cut_at_char(text[..kept].to_vec(), (text.len() - kept) as u64)
    }

    /// A cut line ends at the end of a character, not inside one.
    fn cut_at_char(mut bytes: Vec<u8>, mut cut: u64) -> Line {
        if cut > 0 {
            let end = char_end(&bytes);
            cut += (bytes.len() - end) as u64;
            bytes.truncate(end);
        }
        Line { bytes, cut }
    }
}

/// Where the last whole character of `bytes` ends.
fn char_end(bytes: &[u8]) -> usize {
    let tail = bytes.len().saturating_sub(4);
    for at in (tail..bytes.len()).rev() {
        let width = match bytes[at] {
            b if b & 0xC0 == 0x80 => continue,
            b if b >= 0xF0 => 4,
            b if b >= 0xE0 => 3,
            b if b >= 0xC0 => 2,
            _ => 1,
        };
        return if at + width > bytes.len() {
            at
        } else {
            bytes.len()
        };
    }
    bytes.len()
}

/// `bytes` as the terminal may show them (control, bidi and invisible
/// characters made visible, secrets redacted), tabs expanded to the next
/// multiple of [`TAB_WIDTH`] columns, counted from the text's start.
pub(super) fn shown(bytes: &[u8]) -> String {
    let escaped = terminal_safe_bytes(bytes);
    if !escaped.contains('\t') {
        return escaped;
    }
    let mut out = String::with_capacity(escaped.len() + 16);
    let mut column = 0;
    for c in escaped.chars() {
        if c == '\t' {
            let spaces = TAB_WIDTH - column % TAB_WIDTH;
            out.extend(std::iter::repeat_n(' ', spaces));
            column += spaces;
        } else {
            out.push(c);
            column += 1;
        }
    }
    out
}

/// The marker after a cut line, or nothing.
pub(super) fn cut_marker(cut: u64, paint: Paint) -> String {
    if cut == 0 {
        return String::new();
    }
    let text = format!(" … [line cut: {} more not shown]", size(cut));
    match paint {
        Paint::Plain => text,
        Paint::Colour => format!("{DIM}{text}{RESET}"),
    }
}

/// A line outside the hunks (`diff --git`, `index`, `---`, `+++`, modes,
/// renames), bold like git's.
pub(super) fn header(line: &Line, paint: Paint, out: &mut dyn Write) -> io::Result<()> {
    let text = shown(&line.bytes);
    let marker = cut_marker(line.cut, paint);
    match paint {
        Paint::Plain => writeln!(out, "{text}{marker}"),
        Paint::Colour => writeln!(out, "{BOLD}{text}{RESET}{marker}"),
    }
}

/// A line of ah's own about the patch (`text` is not the model's), dim.
pub(super) fn note(text: &str, paint: Paint, out: &mut dyn Write) -> io::Result<()> {
    match paint {
        Paint::Plain => writeln!(out, "{text}"),
        Paint::Colour => writeln!(out, "{DIM}{text}{RESET}"),
    }
}
