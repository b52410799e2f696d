//! One hunk as it is shown: the `@@` line cyan (the function name after it
//! plain), context plain, removed lines red and added lines green, each run
//! of removed lines held until the run of added lines after it is known, so
//! that the lines can be paired in order and their changed words
//! highlighted. A run holds at most [`MAX_RUN`] lines a side; a longer one
//! goes out as it comes, without highlights.

use std::io::{self, Write};

use super::line::{Line, RESET, cut_marker, shown};
use super::{MAX_RUN, Paint, words};

const CYAN: &str = "\x1b[36m";
const RED: &str = "\x1b[31m";
const GREEN: &str = "\x1b[32m";
const REVERSE: &str = "\x1b[7m";
const NO_REVERSE: &str = "\x1b[27m";

/// A removed or added line waiting for its pair.
struct Changed {
    line: Line,
    /// The `\ No newline at end of file` that came after it.
    no_newline: Option<Line>,
}

/// Which kind of line came last, for a `\` line to follow.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Last {
    Other,
    Removed,
    Added,
}

/// A hunk being shown.
pub(super) struct Hunk {
    paint: Paint,
    removed: Vec<Changed>,
    added: Vec<Changed>,
    last: Last,
    /// The run being held passed [`MAX_RUN`] lines: it is shown without
    /// pairs until it ends.
    long_run: bool,
}

impl Hunk {
    pub(super) fn new(paint: Paint) -> Hunk {
        Hunk {
            paint,
            removed: Vec::new(),
            added: Vec::new(),
            last: Last::Other,
            long_run: false,
        }
    }

    /// Shows `line` or holds it with its run.
    pub(super) fn push(&mut self, line: Line, out: &mut dyn Write) -> io::Result<()> {
        match line.bytes.first() {
            Some(b'-') => {
                if !self.added.is_empty() {
                    self.flush(out)?;
                } else if self.removed.len() >= MAX_RUN {
                    self.flush_long(out)?;
                }
                self.removed.push(Changed {
                    line,
                    no_newline: None,
                });
                self.last = Last::Removed;
            }
            Some(b'+') => {
                if self.added.len() >= MAX_RUN {
                    self.flush_long(out)?;
                }
                self.added.push(Changed {
                    line,
                    no_newline: None,
                });
                self.last = Last::Added;
            }
            Some(b'\\') => {
                let held = match self.last {
                    Last::Removed => self.removed.last_mut(),
                    Last::Added => self.added.last_mut(),
                    Last::Other => None,
                };
                match held {
                    Some(changed) => changed.no_newline = Some(line),
                    None => self.plain(&line, out)?,
                }
            }
            Some(b'@') if line.bytes.starts_with(b"@@") => {
                self.flush(out)?;
                self.hunk_line(&line, out)?;
                self.last = Last::Other;
            }
            _ => {
                self.flush(out)?;
                self.plain(&line, out)?;
                self.last = Last::Other;
            }
        }
        Ok(())
    }

    /// Shows what is held.
    pub(super) fn finish(&mut self, out: &mut dyn Write) -> io::Result<()> {
        self.flush(out)
    }

    /// Shows the held run, which has ended.
    fn flush(&mut self, out: &mut dyn Write) -> io::Result<()> {
        let pairs = !self.long_run;
        self.long_run = false;
        self.show_run(pairs, out)
    }

    /// Shows what is held of a run too long to hold, without pairs, as
    /// the rest of the run will be.
    fn flush_long(&mut self, out: &mut dyn Write) -> io::Result<()> {
        self.long_run = true;
        self.show_run(false, out)
    }

    /// Shows the held lines: removed ones first, then added ones; with
    /// `pairs`, the lines of each pair with their changed words highlighted.
    fn show_run(&mut self, pairs: bool, out: &mut dyn Write) -> io::Result<()> {
        let removed = std::mem::take(&mut self.removed);
        let added = std::mem::take(&mut self.added);
        let old: Vec<String> = removed.iter().map(|c| content(&c.line)).collect();
        let new: Vec<String> = added.iter().map(|c| content(&c.line)).collect();
        let mut old_spans = vec![None; old.len()];
        let mut new_spans = vec![None; new.len()];
        if pairs && self.paint == Paint::Colour {
            for (at, (o, n)) in old.iter().zip(&new).enumerate() {
                if let Some((a, b)) = words::changed(o, n) {
                    old_spans[at] = Some(a);
                    new_spans[at] = Some(b);
                }
            }
        }
        for (changed, (text, spans)) in removed.iter().zip(old.iter().zip(old_spans)) {
            self.changed('-', RED, text, spans, changed, out)?;
        }
        for (changed, (text, spans)) in added.iter().zip(new.iter().zip(new_spans)) {
            self.changed('+', GREEN, text, spans, changed, out)?;
        }
        Ok(())
    }

    fn changed(
        &self,
        mark: char,
        colour: &str,
        text: &str,
        spans: Option<words::Spans>,
        changed: &Changed,
        out: &mut dyn Write,
    ) -> io::Result<()> {
        let marker = cut_marker(changed.line.cut, self.paint);
        match self.paint {
            Paint::Plain => writeln!(out, "{mark}{text}{marker}")?,
            Paint::Colour => {
                let mut painted = String::with_capacity(text.len() + 32);
                let mut at = 0;
                for span in spans.unwrap_or_default() {
                    painted.push_str(&text[at..span.start]);
                    painted.push_str(REVERSE);
                    painted.push_str(&text[span.clone()]);
                    painted.push_str(NO_REVERSE);
                    at = span.end;
                }
                painted.push_str(&text[at..]);
                writeln!(out, "{colour}{mark}{painted}{RESET}{marker}")?;
            }
        }
        if let Some(line) = &changed.no_newline {
            self.plain(line, out)?;
        }
        Ok(())
    }

    /// A context line or a `\` line: as it is, escaped.
    fn plain(&self, line: &Line, out: &mut dyn Write) -> io::Result<()> {
        let (mark, rest) = split_mark(&line.bytes);
        writeln!(
            out,
            "{mark}{}{}",
            shown(rest),
            cut_marker(line.cut, self.paint)
        )
    }

    /// The `@@ … @@` part cyan, the function name after it plain.
    fn hunk_line(&self, line: &Line, out: &mut dyn Write) -> io::Result<()> {
        let text = shown(&line.bytes);
        let marker = cut_marker(line.cut, self.paint);
        let end = text[2..].find("@@").map_or(text.len(), |at| at + 4);
        let (head, tail) = text.split_at(end);
        match self.paint {
            Paint::Plain => writeln!(out, "{text}{marker}"),
            Paint::Colour => writeln!(out, "{CYAN}{head}{RESET}{tail}{marker}"),
        }
    }
}

/// The text of a changed line after its `-` or `+`, as shown.
fn content(line: &Line) -> String {
    shown(line.bytes.get(1..).unwrap_or_default())
}

/// A context or `\` line's first character and the rest (tabs in the rest
/// are expanded from its start); a line with neither (a blank context line)
/// is all rest.
fn split_mark(bytes: &[u8]) -> (&str, &[u8]) {
    match bytes.first() {
        Some(b' ') => (" ", &bytes[1..]),
        Some(b'\\') => ("\\", &bytes[1..]),
        _ => ("", bytes),
    }
}
