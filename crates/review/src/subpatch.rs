//! Splitting a session patch by file, for a review that applies only some
//! files: the chosen sections form one patch (applied with the same 3-way
//! logic as the whole), the others the rest (saved as `rest.patch`).
//!
//! A section starts at a line beginning with `diff --git `. No other line
//! of a patch can: hunk lines start with ` `, `+`, `-` or `\`, and the lines
//! of a `GIT binary patch` start with a length character (`A`–`Z`, `a`–`z`)
//! followed by base85 text, never with `diff`.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use ah_record::patch::FileStat;
use ah_record::patch::PatchInfo;

/// What starts a file section.
const SECTION_START: &[u8] = b"diff --git ";
/// Bytes read from the patch at a time.
const CHUNK: usize = 64 * 1024;

/// A patch cut in two by file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    pub chosen: PatchInfo,
    pub rest: PatchInfo,
}

#[derive(Debug, thiserror::Error)]
pub enum SplitError {
    #[error(
        "the patch has {sections} file sections but its summary lists {files} files; it cannot be split by file (apply all of it, or save it)"
    )]
    Mismatch { sections: usize, files: usize },
    #[error("file number {0} is not in the patch")]
    NoSuchFile(usize),
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        source: io::Error,
    },
}

/// Cuts the patch at `patch_path` (described by `patch`) into the files at
/// the indexes in `chosen` (indexes into `patch.files`), written to
/// `chosen_path`, and the others, written to `rest_path` when there are
/// any; each side with its own totals. The patch is streamed, never held
/// whole.
pub fn split(
    patch_path: &Path,
    patch: &PatchInfo,
    chosen: &[usize],
    chosen_path: &Path,
    rest_path: &Path,
) -> Result<Split, SplitError> {
    if let Some(&bad) = chosen.iter().find(|&&i| i >= patch.files.len()) {
        return Err(SplitError::NoSuchFile(bad));
    }
    let mut sides = [Side::new(chosen_path), Side::new(rest_path)];
    let read_err = |source| SplitError::Io {
        action: "read",
        path: patch_path.to_path_buf(),
        source,
    };
    let mut input = File::open(patch_path).map_err(read_err)?;
    let mut buf = vec![0u8; CHUNK];
    let (mut len, mut line_start) = (0, true);
    // The section being copied, once the first has started.
    let mut section: Option<usize> = None;
    let mut sections = 0;
    loop {
        let read = input.read(&mut buf[len..]).map_err(read_err)?;
        len += read;
        let end = read == 0;
        let mut at = 0;
        while at < len {
            let rest = &buf[at..len];
            if line_start {
                // Wait for enough of the line to tell whether a section starts.
                if rest.len() < SECTION_START.len() && !end && !rest.contains(&b'\n') {
                    break;
                }
                if rest.starts_with(SECTION_START) {
                    if let Some(file) = patch.files.get(sections) {
                        sides[side_of(sections, chosen)].begin(file, file.added, file.removed);
                    }
                    section = Some(sections);
                    sections += 1;
                }
            }
            let taken = rest
                .iter()
                .position(|&b| b == b'\n')
                .map_or(rest.len(), |newline| newline + 1);
            line_start = rest[taken - 1] == b'\n';
            if let Some(index) = section {
                let side = &mut sides[side_of(index, chosen)];
                side.write(&rest[..taken])
                    .map_err(|source| write_error(side, source))?;
            }
            at += taken;
        }
        buf.copy_within(at..len, 0);
        len -= at;
        if end {
            break;
        }
    }
    let [chosen_side, rest_side] = sides;
    let finish = |side: Side<'_>| {
        let path = side.path().to_path_buf();
        side.finish().map_err(|source| SplitError::Io {
            action: "write",
            path,
            source,
        })
    };
    let split = Split {
        chosen: finish(chosen_side)?,
        rest: finish(rest_side)?,
    };
    if sections != patch.files.len() {
        for path in [chosen_path, rest_path] {
            let _ = std::fs::remove_file(path);
        }
        return Err(SplitError::Mismatch {
            sections,
            files: patch.files.len(),
        });
    }
    Ok(split)
}

/// Which side the section `index` goes to: 0 chosen, 1 the rest.
fn side_of(index: usize, chosen: &[usize]) -> usize {
    usize::from(!chosen.contains(&index))
}

/// One side of a patch cut in two (by file here, by hunk in
/// `hunks::write`): its file, made at its first byte, and its totals, each
/// section's bytes counted as written.
pub(crate) struct Side<'a> {
    path: &'a Path,
    out: Option<BufWriter<File>>,
    info: PatchInfo,
}

impl<'a> Side<'a> {
    pub(crate) fn new(path: &'a Path) -> Side<'a> {
        Side {
            path,
            out: None,
            info: PatchInfo::empty(),
        }
    }

    /// Where this side is written.
    pub(crate) fn path(&self) -> &Path {
        self.path
    }

    /// Starts `file`'s section on this side, with the lines it adds and
    /// removes here.
    pub(crate) fn begin(&mut self, file: &FileStat, added: u64, removed: u64) {
        self.info.files.push(FileStat {
            added,
            removed,
            bytes: 0,
            ..file.clone()
        });
        self.info.added_lines += added;
        self.info.removed_lines += removed;
    }

    pub(crate) fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        let out = match &mut self.out {
            Some(out) => out,
            None => self.out.insert(BufWriter::new(File::create(self.path)?)),
        };
        out.write_all(bytes)?;
        self.info.bytes += bytes.len() as u64;
        if let Some(file) = self.info.files.last_mut() {
            file.bytes += bytes.len() as u64;
        }
        Ok(())
    }

    pub(crate) fn finish(mut self) -> io::Result<PatchInfo> {
        if let Some(out) = self.out.take() {
            out.into_inner().map_err(|e| e.into_error())?;
        }
        Ok(self.info)
    }
}

/// The error of writing `side`.
fn write_error(side: &Side<'_>, source: io::Error) -> SplitError {
    SplitError::Io {
        action: "write",
        path: side.path().to_path_buf(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;
    use ah_record::patch::session_patch;
    use ah_record::shadow::{MAX_FILE_BYTES, ShadowRepo};
    use ah_record::testing::git;

    /// A shadow repo whose baseline has `a`, `b.bin`, `c` and whose head
    /// changes all three and adds `d`.
    fn patch() -> (tempfile::TempDir, PatchInfo) {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        fs::create_dir(&work).unwrap();
        fs::write(work.join("a"), "a1\n").unwrap();
        fs::write(work.join("b.bin"), [0u8, 1, 2, 3]).unwrap();
        // A line in file content that looks like a section start must not
        // split the patch: it is a hunk line, so it starts with +, - or space.
        fs::write(work.join("c"), "diff --git x y\n").unwrap();
        let repo = ShadowRepo::init(&dir.path().join("shadow.git"), &work).unwrap();
        let base = repo.baseline().unwrap();
        fs::write(work.join("a"), "a2\n").unwrap();
        fs::write(work.join("b.bin"), [9u8, 0, 8, 7, 6]).unwrap();
        fs::write(work.join("c"), "diff --git x y\nmore\n").unwrap();
        fs::write(work.join("d"), "new\n").unwrap();
        let head = repo
            .commit_step(base, "step", MAX_FILE_BYTES)
            .unwrap()
            .commit
            .unwrap();
        let file = dir.path().join("session.patch");
        let outputs = ah_record::outputs::Outputs::none();
        let info = session_patch(&repo, base, head, &outputs, &file, u64::MAX).unwrap();
        (dir, info)
    }

    /// Splits the test patch into `chosen` and `rest` files in its folder.
    fn cut(
        dir: &tempfile::TempDir,
        patch: &PatchInfo,
        chosen: &[usize],
    ) -> Result<Split, SplitError> {
        split(
            &dir.path().join("session.patch"),
            patch,
            chosen,
            &dir.path().join("chosen"),
            &dir.path().join("rest"),
        )
    }

    #[test]
    fn chosen_and_rest_partition_the_patch() {
        let (dir, patch) = patch();
        let names: Vec<_> = patch.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(names, ["a", "b.bin", "c", "d"]);
        let split = cut(&dir, &patch, &[1, 2]).unwrap();
        let chosen: Vec<_> = split.chosen.files.iter().map(|f| f.path.as_str()).collect();
        let rest: Vec<_> = split.rest.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!((chosen, rest), (vec!["b.bin", "c"], vec!["a", "d"]));
        assert_eq!(split.chosen.added_lines, 1);
        assert_eq!(split.rest.added_lines, 2);
        assert_eq!(split.chosen.bytes + split.rest.bytes, patch.bytes);
        let mut joined = Vec::new();
        for i in 0..4 {
            let one = cut(&dir, &patch, &[i]).unwrap().chosen;
            let text = fs::read(dir.path().join("chosen")).unwrap();
            assert_eq!(one.bytes, text.len() as u64);
            joined.extend(text);
        }
        let whole = fs::read(dir.path().join("session.patch")).unwrap();
        assert_eq!(joined, whole, "sections cover the patch exactly");
    }

    #[test]
    fn each_side_applies_on_its_own_with_real_git() {
        let (dir, patch) = patch();
        let host = dir.path().join("host");
        fs::create_dir(&host).unwrap();
        fs::write(host.join("a"), "a1\n").unwrap();
        fs::write(host.join("b.bin"), [0u8, 1, 2, 3]).unwrap();
        fs::write(host.join("c"), "diff --git x y\n").unwrap();
        git(&host, &["init", "-q"]);
        cut(&dir, &patch, &[1, 3]).unwrap();
        for name in ["chosen", "rest"] {
            let file = dir.path().join(name);
            git(&host, &["apply", file.to_str().unwrap()]);
        }
        assert_eq!(fs::read(host.join("b.bin")).unwrap(), [9u8, 0, 8, 7, 6]);
        assert_eq!(fs::read_to_string(host.join("a")).unwrap(), "a2\n");
        assert_eq!(fs::read_to_string(host.join("d")).unwrap(), "new\n");
    }

    #[test]
    fn a_patch_of_long_lines_is_split_in_pieces() {
        // Lines far longer than the piece read at a time.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("session.patch");
        let long = "x".repeat(3 * CHUNK);
        let text =
            format!("diff --git a/a b/a\n+{long}\ndiff --git a/b b/b\n-{long}\n+diff --git\n");
        fs::write(&file, &text).unwrap();
        let mut patch = PatchInfo::empty();
        patch.files = ["a", "b"]
            .map(|path| FileStat {
                path: path.to_string(),
                added: 1,
                removed: 0,
                binary: false,
                old_mode: 0,
                new_mode: 0,
                bytes: 0,
            })
            .into();
        patch.bytes = text.len() as u64;
        let split = cut(&dir, &patch, &[1]).unwrap();
        let chosen = fs::read_to_string(dir.path().join("chosen")).unwrap();
        assert_eq!(
            chosen,
            format!("diff --git a/b b/b\n-{long}\n+diff --git\n")
        );
        assert_eq!(split.rest.files.len(), 1);
    }

    #[test]
    fn bad_indexes_and_mismatched_summaries_are_errors() {
        let (dir, mut patch) = patch();
        assert!(matches!(
            cut(&dir, &patch, &[7]),
            Err(SplitError::NoSuchFile(7))
        ));
        patch.files.pop();
        assert!(matches!(
            cut(&dir, &patch, &[0]),
            Err(SplitError::Mismatch { .. })
        ));
        assert!(!dir.path().join("chosen").exists());
    }
}
