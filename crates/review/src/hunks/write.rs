//! Writing a [`Selection`] of a patch's units as two patches: the chosen
//! units against the original files, the others against the files once
//! the chosen ones are in (see the module above for the arithmetic and the
//! `index` lines). The patch is read back piece by piece, never whole.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::{Form, HunkError, Lines, PatchHunks, Section, Selection, Span};
use crate::subpatch::{Side, Split};
use ah_record::patch::{FileStat, PatchInfo};

/// Bytes copied from the patch at a time.
const CHUNK: usize = 64 * 1024;
/// The longest `@@` line whose section heading (the text after the second
/// `@@`) is carried over to a rewritten hunk.
const MAX_HEADING_LINE: u64 = 1024;

/// Writes the units `selection` chooses of the patch at `patch_path` (read
/// as `hunks`, summed up as `info`) to `chosen_path`, and the others to
/// `rest_path`; a side with nothing on it is not written. Each side's
/// files carry their own line counts.
pub fn write(
    patch_path: &Path,
    info: &PatchInfo,
    hunks: &PatchHunks,
    selection: &Selection,
    chosen_path: &Path,
    rest_path: &Path,
) -> Result<Split, HunkError> {
    if hunks.sections.len() != info.files.len() {
        return Err(HunkError::Mismatch {
            sections: hunks.sections.len(),
            files: info.files.len(),
        });
    }
    let input = File::open(patch_path).map_err(|source| HunkError::Io {
        action: "read",
        path: patch_path.to_path_buf(),
        source,
    })?;
    let mut writer = Writer {
        input,
        patch_path,
        sides: [Side::new(chosen_path), Side::new(rest_path)],
        buf: vec![0; CHUNK],
    };
    for (section, file) in hunks.sections.iter().zip(&info.files) {
        writer.section(section, file, selection)?;
    }
    let [chosen, rest] = writer.sides;
    Ok(Split {
        chosen: done(chosen)?,
        rest: done(rest)?,
    })
}

/// A hunk, or a run of neighbouring pieces of one, going to one side.
struct Group {
    span: Span,
    chosen: bool,
    /// The `@@` line whose heading it keeps, when it starts where its hunk does.
    heading_of: Option<u64>,
}

struct Writer<'a> {
    input: File,
    patch_path: &'a Path,
    /// Chosen, then the rest.
    sides: [Side<'a>; 2],
    /// What is being copied, a piece at a time.
    buf: Vec<u8>,
}

impl Writer<'_> {
    fn section(
        &mut self,
        section: &Section,
        file: &FileStat,
        selection: &Selection,
    ) -> Result<(), HunkError> {
        let hunks = match &section.form {
            Form::Whole(_) => {
                let side = side_of(selection.has(section.atom));
                self.sides[side].begin(file, file.added, file.removed);
                return self.copy(side, section.start, section.end);
            }
            Form::Hunks(hunks) => hunks,
        };
        let mut groups: Vec<Group> = Vec::new();
        for hunk in hunks {
            if hunk.pieces.is_empty() {
                groups.push(Group {
                    span: hunk.span,
                    chosen: selection.has(hunk.atom),
                    heading_of: Some(hunk.at),
                });
                continue;
            }
            let mut last_of_hunk: Option<usize> = None;
            for (i, piece) in hunk.pieces.iter().enumerate() {
                let chosen = selection.has(hunk.atom + i);
                match last_of_hunk.map(|g| &mut groups[g]) {
                    Some(group) if group.chosen == chosen => {
                        group.span = joined(&group.span, piece)
                    }
                    _ => {
                        last_of_hunk = Some(groups.len());
                        groups.push(Group {
                            span: *piece,
                            chosen,
                            heading_of: (i == 0).then_some(hunk.at),
                        });
                    }
                }
            }
        }
        for (side, chosen) in [(0, true), (1, false)] {
            let (added, removed) = groups
                .iter()
                .filter(|g| g.chosen == chosen)
                .fold((0, 0), |(a, r), g| (a + g.span.added, r + g.span.removed));
            if groups.iter().all(|g| g.chosen == chosen) {
                self.sides[side].begin(file, added, removed);
                return self.copy(side, section.start, section.end);
            }
            if groups.iter().any(|g| g.chosen == chosen) {
                self.sides[side].begin(file, added, removed);
                self.copy(side, section.start, section.body)?;
            }
        }
        // Lines each side's earlier hunks of this file added (less removed).
        let (mut chosen_shift, mut rest_shift) = (0i64, 0i64);
        for group in &groups {
            let span = &group.span;
            let delta = span.new.len as i64 - span.old.len as i64;
            let (side, old, new) = if group.chosen {
                let new = moved(span.old.before, chosen_shift, span.new.len);
                chosen_shift += delta;
                (0, span.old, new)
            } else {
                let old = moved(span.old.before, chosen_shift, span.old.len);
                let new = moved(old.before, rest_shift, span.new.len);
                rest_shift += delta;
                (1, old, new)
            };
            let heading = match group.heading_of {
                Some(at) => self.heading(at, span.start)?,
                None => Vec::new(),
            };
            let mut line = format!("@@ -{} +{} @@", old.header(), new.header()).into_bytes();
            line.extend(heading);
            line.push(b'\n');
            put(&mut self.sides[side], &line)?;
            self.copy(side, span.start, span.end)?;
        }
        Ok(())
    }

    /// The section heading of the `@@` line at `at` (ending at `end`),
    /// with its leading space; nothing when it has none or is long.
    fn heading(&self, at: u64, end: u64) -> Result<Vec<u8>, HunkError> {
        if end - at > MAX_HEADING_LINE {
            return Ok(Vec::new());
        }
        let mut line = vec![0; (end - at) as usize];
        self.read(&mut line, at)?;
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        // `@@ -A,B +C,D @@ heading`: what follows the second `@@`.
        let after = text
            .get(2..)
            .and_then(|rest| rest.windows(2).position(|w| w == b"@@").map(|i| i + 4))
            .and_then(|i| text.get(i..))
            .unwrap_or_default();
        Ok(after.to_vec())
    }

    fn read(&self, buf: &mut [u8], at: u64) -> Result<(), HunkError> {
        self.input
            .read_exact_at(buf, at)
            .map_err(|source| HunkError::Io {
                action: "read",
                path: self.patch_path.to_path_buf(),
                source,
            })
    }

    /// Copies the patch's bytes `start..end` to a side, ending them with a
    /// newline when the patch's last line has none.
    fn copy(&mut self, side: usize, start: u64, end: u64) -> Result<(), HunkError> {
        let mut buf = std::mem::take(&mut self.buf);
        buf.resize(CHUNK, 0);
        let mut at = start;
        let mut last = b'\n';
        while at < end {
            let len = (end - at).min(CHUNK as u64) as usize;
            self.read(&mut buf[..len], at)?;
            put(&mut self.sides[side], &buf[..len])?;
            last = buf[len - 1];
            at += len as u64;
        }
        self.buf = buf;
        if last != b'\n' {
            put(&mut self.sides[side], b"\n")?;
        }
        Ok(())
    }
}

/// 0 for the chosen side, 1 for the rest.
fn side_of(chosen: bool) -> usize {
    usize::from(!chosen)
}

/// Two neighbouring pieces of a hunk as one: they share the context
/// between them.
fn joined(first: &Span, next: &Span) -> Span {
    let side = |a: Lines, b: Lines| Lines {
        before: a.before,
        len: b.before + b.len - a.before,
    };
    Span {
        start: first.start,
        end: next.end,
        old: side(first.old, next.old),
        new: side(first.new, next.new),
        added: first.added + next.added,
        removed: first.removed + next.removed,
    }
}

/// `len` lines after line `before`, moved by `shift`. The parser keeps hunks
/// in order and apart, so a shift never takes a hunk before the file's
/// start; should it, the hunk starts there.
fn moved(before: u64, shift: i64, len: u64) -> Lines {
    Lines {
        before: before.saturating_add_signed(shift),
        len,
    }
}

/// Writes `bytes` to `side`; a failure names its file.
fn put(side: &mut Side<'_>, bytes: &[u8]) -> Result<(), HunkError> {
    side.write(bytes).map_err(|source| side_error(side, source))
}

/// Closes `side`; its totals.
fn done(side: Side<'_>) -> Result<PatchInfo, HunkError> {
    let path = side.path().to_path_buf();
    side.finish().map_err(|source| HunkError::Io {
        action: "write",
        path,
        source,
    })
}

fn side_error(side: &Side<'_>, source: io::Error) -> HunkError {
    HunkError::Io {
        action: "write",
        path: side.path().to_path_buf(),
        source,
    }
}
