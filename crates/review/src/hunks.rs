//! Cutting a session patch into the units a person decides one at a time
//! ("choose hunks" in an `ask` review), and writing what was chosen and
//! what was not as two patches.
//!
//! A file section (it starts at `diff --git `, see [`crate::subpatch`]) is
//! either one unit taken whole — a rename or copy, a mode change, a binary
//! file, a symlink or a submodule on either side, a file's creation or
//! deletion — or a list of text hunks. A hunk whose change groups have
//! context between them can be split as `git add -p` splits: at each run of
//! context between two groups, each piece keeping that run as its context.
//!
//! The patch is read once, streamed, and only byte offsets and line numbers
//! are kept; a hunk's text is read back from the file when it is shown or
//! written. Everything in it is the model's: a malformed line is an error
//! naming it, never a panic, and the number of units is bounded
//! ([`MAX_UNITS`]).
//!
//! [`write()`] puts the chosen units in `chosen.patch`, against the original
//! files (a hunk's new-side start moves by what the earlier unchosen hunks
//! of its file would have added or removed), and the others in
//! `rest.patch`, against the files once the chosen ones are applied (a
//! hunk's old-side start moves by the earlier chosen hunks).
//!
//! Both keep each file's `index <old>..<new>` line as it was. A 3-way
//! apply (`git apply --3way`) reads only the preimage id: it takes that
//! blob, applies the hunks to it to make the postimage itself, and merges;
//! a text patch's postimage id is never read (git's own `add -p` applies its
//! partial patches with the original index line too). For `chosen.patch`
//! the preimage is the original file: exactly right. For `rest.patch` the
//! true preimage (the original with the chosen hunks in) is a blob nobody
//! has, so the original's id stands in for it. That holds because every
//! line a rest hunk expects is a line of the original too — its `-` lines
//! are the original's, and its context is lines no hunk changes (hunks and
//! split pieces share only unchanged context) — so git finds each rest
//! hunk in the original blob, at an offset, and merges "original + rest"
//! into the project (original + chosen + whatever changed since) with the
//! original as the base: the 3-way merge the rest needs. Units taken whole
//! (a binary patch's postimage id is checked) are copied unchanged.

mod parse;
mod whole;
mod write;

#[cfg(test)]
mod tests;

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

pub use whole::Whole;
pub use write::write;

/// The most units (hunks, split pieces, and sections taken whole) a patch
/// may hold to be chosen hunk by hunk: far more than anyone decides one at
/// a time, and a few MiB of offsets at most.
pub const MAX_UNITS: usize = 100_000;

/// The most bytes of one hunk [`PatchHunks::lines`] returns.
pub const MAX_SHOWN_BYTES: usize = 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum HunkError {
    #[error(
        "line {line} of {}: {what}; the patch cannot be chosen hunk by hunk (apply all of it, choose files, or save it)",
        path.display()
    )]
    Malformed {
        path: PathBuf,
        line: u64,
        what: String,
    },
    #[error(
        "{} holds more than {MAX_UNITS} hunks, too many to choose one at a time: choose files instead, or save the patch",
        path.display()
    )]
    TooMany { path: PathBuf },
    #[error(
        "the patch has {sections} file sections but its summary lists {files} files; it cannot be split (apply all of it, or save it)"
    )]
    Mismatch { sections: usize, files: usize },
    #[error("{0:?} is not a unit of this patch")]
    NoSuchUnit(Unit),
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        source: io::Error,
    },
}

/// One unit of a patch as the person choosing sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Unit {
    /// The file section's index, in patch order (as `PatchInfo::files`).
    pub file: usize,
    pub part: Part,
}

/// Which part of a file section a [`Unit`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Part {
    /// The whole section, taken as one ([`Whole`]).
    Whole,
    /// A text hunk, by its index in the section.
    Hunk(usize),
    /// A piece of a split hunk ([`PatchHunks::split`]).
    Piece { hunk: usize, piece: usize },
}

/// A session patch cut into units: offsets into its file and line
/// numbers, no text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatchHunks {
    sections: Vec<Section>,
    /// Decidable atoms: one per whole section, per unsplittable hunk, and
    /// per piece of a splittable one.
    atoms: usize,
}

/// One file section.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Section {
    /// Offset of its `diff --git ` line.
    start: u64,
    /// Offset of its first `@@` line (its end when it has none).
    body: u64,
    end: u64,
    form: Form,
    /// Its first atom.
    atom: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Form {
    Whole(Whole),
    Hunks(Vec<Hunk>),
}

/// A text hunk.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Hunk {
    /// Offset of its `@@` line.
    at: u64,
    span: Span,
    /// Its pieces when it splits (two or more), else none.
    pieces: Vec<Span>,
    /// Its first atom.
    atom: usize,
}

/// Lines of a hunk or piece: where they are in the patch and what they
/// cover on each side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    /// Offset of its first line (after the `@@` line).
    start: u64,
    end: u64,
    old: Lines,
    new: Lines,
    added: u64,
    removed: u64,
}

/// Lines of one side of a hunk: the line before the first (0 at the start
/// of the file), and how many.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Lines {
    before: u64,
    len: u64,
}

impl Lines {
    /// As a hunk header writes it: `3,4`, `3` for one line, `2,0` for none
    /// after line 2.
    fn header(self) -> String {
        let start = if self.len == 0 {
            self.before
        } else {
            self.before + 1
        };
        match self.len {
            1 => start.to_string(),
            len => format!("{start},{len}"),
        }
    }
}

impl Span {
    fn header(&self) -> String {
        format!("@@ -{} +{} @@", self.old.header(), self.new.header())
    }
}

impl PatchHunks {
    /// Reads the patch file at `path`.
    pub fn read(path: &Path) -> Result<PatchHunks, HunkError> {
        let file = File::open(path).map_err(|source| HunkError::Io {
            action: "read",
            path: path.to_path_buf(),
            source,
        })?;
        parse::parse(file, path)
    }

    /// Reads a patch from `reader`; `path` names it in errors.
    pub fn parse(reader: impl io::Read, path: &Path) -> Result<PatchHunks, HunkError> {
        parse::parse(reader, path)
    }

    /// How many file sections the patch has.
    pub fn files(&self) -> usize {
        self.sections.len()
    }

    /// Every unit in patch order: each section taken whole, or its hunks.
    pub fn units(&self) -> Vec<Unit> {
        let mut units = Vec::new();
        for (file, section) in self.sections.iter().enumerate() {
            match &section.form {
                Form::Whole(_) => units.push(Unit {
                    file,
                    part: Part::Whole,
                }),
                Form::Hunks(hunks) => units.extend((0..hunks.len()).map(|hunk| Unit {
                    file,
                    part: Part::Hunk(hunk),
                })),
            }
        }
        units
    }

    /// The pieces a hunk splits into, when it splits.
    pub fn split(&self, unit: Unit) -> Option<Vec<Unit>> {
        let Part::Hunk(hunk) = unit.part else {
            return None;
        };
        let pieces = self.hunk(unit.file, hunk)?.pieces.len();
        (pieces > 1).then(|| {
            (0..pieces)
                .map(|piece| Unit {
                    file: unit.file,
                    part: Part::Piece { hunk, piece },
                })
                .collect()
        })
    }

    /// What a section taken whole does; `None` for a section of hunks.
    pub fn whole(&self, file: usize) -> Option<&Whole> {
        match &self.sections.get(file)?.form {
            Form::Whole(whole) => Some(whole),
            Form::Hunks(_) => None,
        }
    }

    /// A unit's header: `@@ -3,7 +3,8 @@` for a hunk or piece (its lines
    /// in the original and in the model's version), what it does for a
    /// section taken whole ([`Whole::describe`]).
    pub fn header(&self, unit: Unit) -> Result<String, HunkError> {
        match unit.part {
            Part::Whole => self
                .whole(unit.file)
                .map(Whole::describe)
                .ok_or(HunkError::NoSuchUnit(unit)),
            _ => Ok(self.span(unit)?.header()),
        }
    }

    /// Lines added and removed by a unit.
    pub fn counts(&self, unit: Unit) -> Result<(u64, u64), HunkError> {
        match unit.part {
            Part::Whole => self
                .whole(unit.file)
                .map(|whole| (whole.added, whole.removed))
                .ok_or(HunkError::NoSuchUnit(unit)),
            _ => self.span(unit).map(|span| (span.added, span.removed)),
        }
    }

    /// A hunk's or piece's lines as the patch has them (after its `@@`
    /// line), at most [`MAX_SHOWN_BYTES`], and whether more were cut;
    /// nothing for a section taken whole.
    pub fn lines(&self, patch_path: &Path, unit: Unit) -> Result<(Vec<u8>, bool), HunkError> {
        if unit.part == Part::Whole {
            return Ok((Vec::new(), false));
        }
        let span = self.span(unit)?;
        let len = span.end - span.start;
        let shown = len.min(MAX_SHOWN_BYTES as u64);
        let mut bytes = vec![0; usize::try_from(shown).unwrap_or(MAX_SHOWN_BYTES)];
        let read_err = |source| HunkError::Io {
            action: "read",
            path: patch_path.to_path_buf(),
            source,
        };
        File::open(patch_path)
            .and_then(|file| file.read_exact_at(&mut bytes, span.start))
            .map_err(read_err)?;
        Ok((bytes, shown < len))
    }

    /// The atoms a unit stands for.
    fn atoms(&self, unit: Unit) -> Result<std::ops::Range<usize>, HunkError> {
        let missing = || HunkError::NoSuchUnit(unit);
        let section = self.sections.get(unit.file).ok_or_else(missing)?;
        match (unit.part, &section.form) {
            (Part::Whole, Form::Whole(_)) => Ok(section.atom..section.atom + 1),
            (Part::Hunk(h), Form::Hunks(_)) => {
                let hunk = self.hunk(unit.file, h).ok_or_else(missing)?;
                Ok(hunk.atom..hunk.atom + hunk.pieces.len().max(1))
            }
            (Part::Piece { hunk: h, piece }, Form::Hunks(_)) => {
                let hunk = self.hunk(unit.file, h).ok_or_else(missing)?;
                if piece >= hunk.pieces.len() {
                    return Err(missing());
                }
                Ok(hunk.atom + piece..hunk.atom + piece + 1)
            }
            _ => Err(missing()),
        }
    }

    fn hunk(&self, file: usize, hunk: usize) -> Option<&Hunk> {
        match &self.sections.get(file)?.form {
            Form::Hunks(hunks) => hunks.get(hunk),
            Form::Whole(_) => None,
        }
    }

    fn span(&self, unit: Unit) -> Result<&Span, HunkError> {
        let found = match unit.part {
            Part::Whole => None,
            Part::Hunk(h) => self.hunk(unit.file, h).map(|hunk| &hunk.span),
            Part::Piece { hunk, piece } => self
                .hunk(unit.file, hunk)
                .and_then(|hunk| hunk.pieces.get(piece)),
        };
        found.ok_or(HunkError::NoSuchUnit(unit))
    }
}

/// Which units go into `chosen.patch`; every other one goes to the rest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    chosen: Vec<bool>,
}

impl Selection {
    /// Nothing chosen yet.
    pub fn none(hunks: &PatchHunks) -> Selection {
        Selection {
            chosen: vec![false; hunks.atoms],
        }
    }

    /// Chooses `unit` (a hunk chooses all its pieces).
    pub fn choose(&mut self, hunks: &PatchHunks, unit: Unit) -> Result<(), HunkError> {
        let atoms = hunks.atoms(unit)?;
        self.chosen[atoms].fill(true);
        Ok(())
    }

    pub fn is_all(&self) -> bool {
        self.chosen.iter().all(|&chosen| chosen)
    }

    pub fn is_none(&self) -> bool {
        !self.chosen.iter().any(|&chosen| chosen)
    }

    fn has(&self, atom: usize) -> bool {
        self.chosen.get(atom).copied().unwrap_or(false)
    }
}
