//! Splitting a session patch by file, for a review that applies only some
//! files: the chosen sections form one patch (applied with the same 3-way
//! logic as the whole), the others the rest (saved as `rest.patch`).
//!
//! A section starts at a line beginning with `diff --git `. No other line
//! of a patch can: hunk lines start with ` `, `+`, `-` or `\`, and the lines
//! of a `GIT binary patch` start with a length character (`A`–`Z`, `a`–`z`)
//! followed by base85 text, never with `diff`.

use super::patch::PatchInfo;

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
}

/// The patch's file sections, in order (each with its trailing newline).
pub(super) fn sections(text: &[u8]) -> Vec<&[u8]> {
    let mut starts = Vec::new();
    let mut at = 0;
    while at < text.len() {
        if text[at..].starts_with(b"diff --git ") {
            starts.push(at);
        }
        at += text[at..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(text.len() - at, |newline| newline + 1);
    }
    starts
        .iter()
        .enumerate()
        .map(|(i, &start)| &text[start..starts.get(i + 1).copied().unwrap_or(text.len())])
        .collect()
}

/// Cuts `patch` into the files at the indexes in `chosen` (indexes into
/// `patch.files`) and the others, each with its own line totals.
pub fn split(patch: &PatchInfo, chosen: &[usize]) -> Result<Split, SplitError> {
    let parts = sections(&patch.text);
    if parts.len() != patch.files.len() {
        return Err(SplitError::Mismatch {
            sections: parts.len(),
            files: patch.files.len(),
        });
    }
    if let Some(&bad) = chosen.iter().find(|&&i| i >= parts.len()) {
        return Err(SplitError::NoSuchFile(bad));
    }
    let mut split = Split {
        chosen: empty(),
        rest: empty(),
    };
    for (index, (part, file)) in parts.iter().zip(&patch.files).enumerate() {
        let side = if chosen.contains(&index) {
            &mut split.chosen
        } else {
            &mut split.rest
        };
        side.text.extend_from_slice(part);
        side.files.push(file.clone());
        side.added_lines += file.added;
        side.removed_lines += file.removed;
    }
    Ok(split)
}

fn empty() -> PatchInfo {
    PatchInfo {
        text: Vec::new(),
        files: Vec::new(),
        added_lines: 0,
        removed_lines: 0,
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::path::Path;
    use std::process::Command;

    use super::*;
    use crate::sandbox::patch::session_patch;
    use crate::sandbox::shadow::{MAX_FILE_BYTES, ShadowRepo};

    fn git(dir: &Path, args: &[&str]) -> std::process::Output {
        Command::new("git")
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", dir)
            .args(args)
            .output()
            .unwrap()
    }

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
        (dir, session_patch(&repo, base, head).unwrap())
    }

    #[test]
    fn chosen_and_rest_partition_the_patch() {
        let (_dir, patch) = patch();
        let names: Vec<_> = patch.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(names, ["a", "b.bin", "c", "d"]);
        let split = split(&patch, &[1, 2]).unwrap();
        let chosen: Vec<_> = split.chosen.files.iter().map(|f| f.path.as_str()).collect();
        let rest: Vec<_> = split.rest.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!((chosen, rest), (vec!["b.bin", "c"], vec!["a", "d"]));
        assert_eq!(split.chosen.added_lines, 1);
        assert_eq!(split.rest.added_lines, 2);
        let mut joined = Vec::new();
        for i in 0..4 {
            let one = super::split(&patch, &[i]).unwrap().chosen;
            joined.extend(one.text);
        }
        assert_eq!(joined, patch.text, "sections cover the patch exactly");
    }

    #[test]
    fn each_side_applies_on_its_own_with_real_git() {
        let (dir, patch) = patch();
        let host = dir.path().join("host");
        fs::create_dir(&host).unwrap();
        fs::write(host.join("a"), "a1\n").unwrap();
        fs::write(host.join("b.bin"), [0u8, 1, 2, 3]).unwrap();
        fs::write(host.join("c"), "diff --git x y\n").unwrap();
        assert!(git(&host, &["init", "-q"]).status.success());
        let split = split(&patch, &[1, 3]).unwrap();
        for (name, side) in [("chosen", &split.chosen), ("rest", &split.rest)] {
            let file = dir.path().join(name);
            side.write_to(&file).unwrap();
            let out = git(&host, &["apply", file.to_str().unwrap()]);
            assert!(out.status.success(), "{name}: {out:?}");
        }
        assert_eq!(fs::read(host.join("b.bin")).unwrap(), [9u8, 0, 8, 7, 6]);
        assert_eq!(fs::read_to_string(host.join("a")).unwrap(), "a2\n");
        assert_eq!(fs::read_to_string(host.join("d")).unwrap(), "new\n");
    }

    #[test]
    fn bad_indexes_and_mismatched_summaries_are_errors() {
        let (_dir, mut patch) = patch();
        assert!(matches!(
            split(&patch, &[7]),
            Err(SplitError::NoSuchFile(7))
        ));
        patch.files.pop();
        assert!(matches!(
            split(&patch, &[0]),
            Err(SplitError::Mismatch { .. })
        ));
    }
}
