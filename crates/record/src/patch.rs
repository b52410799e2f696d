//! The session patch: everything a run changed, baseline..HEAD of the shadow
//! repo, as the unified diff `git diff --binary --full-index` would print, so
//! that the host can take it with `git apply --index --3way`.
//!
//! Binary files come as `GIT binary patch` (literal or delta), `index` lines
//! carry full 40-hex object ids (which is what lets `--3way` find the
//! preimage), and mode changes, new and deleted files, and symbolic links are
//! spelled out as git does. Renames are not detected, so a rename is a
//! deletion plus an addition, and a file replaced by a link (or back) is a
//! deletion plus an addition of the same path, again as git prints it.
//!
//! Files the run added that are build or cache outputs ([`Outputs`]) are
//! left out and listed: they are not the user's change, and one binary
//! among them would keep the whole patch from being applied on its own.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use git2::{DiffOptions, Oid, Patch};

mod stat;

pub use stat::{FileStat, MODE_EXECUTABLE, MODE_FILE, MODE_SUBMODULE, MODE_SYMLINK};

use super::outputs::Outputs;
use super::rundir::PatchStats;
use super::shadow::{ShadowError, ShadowRepo};

/// Hex digits of a full SHA-1 object id.
const FULL_INDEX: u16 = 40;

/// The largest patch `--review auto` may apply. A bigger one is saved whole
/// for a person to look at (binaries near the 50 MiB a recorded file may
/// have make patches of hundreds of MiB; no source change is that big).
pub const MAX_PATCH_BYTES: u64 = 64 * 1024 * 1024;

/// Files larger than this get a binary hunk, not a line diff: libgit2's
/// line diff holds ~100 bytes per line (a 2 MB file of 1M short lines took
/// 100 MiB, a 39 MB one 800 MiB), while a binary hunk costs a few times
/// the file, which is at most 50 MiB. A review lists such a file as binary.
pub const MAX_LINE_DIFF_BYTES: u64 = 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    #[error(transparent)]
    Shadow(#[from] ShadowError),
    #[error("building the session patch failed: {0}")]
    Diff(#[from] git2::Error),
    #[error("cannot write the session patch to {path}: {source}; check the disk has room")]
    Write { path: PathBuf, source: io::Error },
    /// The patch would pass the bytes it was given: nothing of it is kept.
    #[error("the session patch would take more than the {limit} bytes left for it")]
    TooBig { limit: u64 },
}

/// What is in a session patch written to disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatchInfo {
    /// One entry per file section, in patch order (the old path for a
    /// deletion; binary files have no line counts), with both sides' modes.
    pub files: Vec<FileStat>,
    pub added_lines: u64,
    pub removed_lines: u64,
    /// The size of the patch text.
    pub bytes: u64,
    /// Files the run added that are build or cache outputs, left out of
    /// the patch (still in the shadow repo, and copied as artifacts).
    pub left_out: Vec<String>,
}

impl PatchInfo {
    /// A patch with nothing in it.
    pub fn empty() -> PatchInfo {
        PatchInfo {
            files: Vec::new(),
            added_lines: 0,
            removed_lines: 0,
            bytes: 0,
            left_out: Vec::new(),
        }
    }

    /// True when the run changed nothing.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Over [`MAX_PATCH_BYTES`]: never applied without a person.
    pub fn over_cap(&self) -> bool {
        self.bytes > MAX_PATCH_BYTES
    }

    /// Files and line totals, as the manifest keeps them.
    pub fn summary(&self) -> PatchStats {
        PatchStats {
            files: u32::try_from(self.files.len()).unwrap_or(u32::MAX),
            added: self.added_lines,
            removed: self.removed_lines,
        }
    }
}

/// Writes the patch from commit `baseline` to commit `head` of `repo` to
/// `out` (the run's `session.patch`), streamed: one file's patch at a time
/// is made and printed into the file, and the counts come from the same
/// lines, so the patch text is never held whole. A file over
/// [`MAX_LINE_DIFF_BYTES`] on either side gets a binary hunk. A file the
/// baseline did not have that `outputs` names is left out and listed. A
/// patch that would pass `max_bytes` stops there and is removed
/// ([`PatchError::TooBig`]): a binary hunk of a sparse file, or of one
/// file under many names, is written out whole.
pub fn session_patch(
    repo: &ShadowRepo,
    baseline: Oid,
    head: Oid,
    outputs: &Outputs,
    out: &Path,
    max_bytes: u64,
) -> Result<PatchInfo, PatchError> {
    let write_err = |source| PatchError::Write {
        path: out.to_path_buf(),
        source,
    };
    let file = Capped {
        file: File::create(out).map_err(write_err)?,
        left: max_bytes,
        over: false,
    };
    let mut writer = BufWriter::new(file);
    let written = print_patch(repo, baseline, head, outputs, &mut writer, out)
        .and_then(|info| writer.flush().map(|()| info).map_err(write_err));
    if writer.get_ref().over {
        drop(writer);
        // Nothing of a patch cut short is kept; a file that cannot be
        // removed is at worst its first `max_bytes`.
        let _ = std::fs::remove_file(out);
        return Err(PatchError::TooBig { limit: max_bytes });
    }
    written
}

/// The patch file, refusing to grow past `left` more bytes.
struct Capped {
    file: File,
    left: u64,
    /// A write was refused for the cap.
    over: bool,
}

impl Write for Capped {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.len() as u64 > self.left {
            self.over = true;
            return Err(io::Error::other("the patch passes the bytes it may take"));
        }
        let written = self.file.write(buf)?;
        self.left -= written as u64;
        Ok(written)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// [`session_patch`]'s work: the patch printed into `writer` (the file
/// `out`), and counted.
fn print_patch(
    repo: &ShadowRepo,
    baseline: Oid,
    head: Oid,
    outputs: &Outputs,
    writer: &mut impl Write,
    out: &Path,
) -> Result<PatchInfo, PatchError> {
    let old = repo.commit_tree(baseline)?;
    let new = repo.commit_tree(head)?;
    let git = repo.for_diffs()?;
    // The same deltas in the same order, as text where it can be and as
    // binary for the large files.
    let diff = |binary: bool| {
        let mut opts = DiffOptions::new();
        opts.show_binary(true)
            .id_abbrev(FULL_INDEX)
            .force_binary(binary);
        // No `include_typechange`: git prints a type change as a deletion
        // and an addition, which is the form `git apply` takes.
        let (old, new) = (git.find_tree(old.id())?, git.find_tree(new.id())?);
        git.diff_tree_to_tree(Some(&old), Some(&new), Some(&mut opts))
    };
    let (text, binary) = (diff(false)?, diff(true)?);
    let odb = repo.git().odb()?;
    let large = |file: git2::DiffFile<'_>| {
        !file.id().is_zero()
            && odb
                .read_header(file.id())
                .is_ok_and(|(size, _)| size as u64 > MAX_LINE_DIFF_BYTES)
    };

    let mut info = PatchInfo::empty();
    let mut failed = None;
    let in_baseline = |path: &str| old.get_path(Path::new(path)).is_ok();
    let baseline_has_dir = |dir: &str| {
        old.get_path(Path::new(dir))
            .is_ok_and(|entry| entry.kind() == Some(git2::ObjectType::Tree))
    };
    for (idx, delta) in text.deltas().enumerate() {
        if delta.status() == git2::Delta::Added
            && let Some(path) = delta.new_file().path().and_then(Path::to_str)
            && !in_baseline(path)
            && outputs.is_output(path, &baseline_has_dir)
        {
            info.left_out.push(path.to_string());
            continue;
        }
        let source = if large(delta.old_file()) || large(delta.new_file()) {
            &binary
        } else {
            &text
        };
        let Some(mut patch) = Patch::from_diff(source, idx)? else {
            continue;
        };
        patch.print(
            &mut |delta, _, line| match print_line(writer, &mut info, &delta, &line) {
                Ok(()) => true,
                Err(e) => {
                    failed = Some(e);
                    false
                }
            },
        )?;
        if let Some(e) = failed.take() {
            return Err(PatchError::Write {
                path: out.to_path_buf(),
                source: e,
            });
        }
    }
    info.added_lines = info.files.iter().map(|f| f.added).sum();
    info.removed_lines = info.files.iter().map(|f| f.removed).sum();
    Ok(info)
}

/// Writes one line of a file's patch as git prints it, and counts it.
fn print_line(
    out: &mut impl Write,
    info: &mut PatchInfo,
    delta: &git2::DiffDelta<'_>,
    line: &git2::DiffLine<'_>,
) -> io::Result<()> {
    let origin = line.origin();
    match origin {
        // A file's header starts its section.
        'F' => info.files.push(file_stat(delta)),
        'B' => {
            if let Some(file) = info.files.last_mut() {
                file.binary = true;
            }
        }
        '+' | '-' => {
            if let Some(file) = info.files.last_mut() {
                if origin == '+' {
                    file.added += 1;
                } else {
                    file.removed += 1;
                }
            }
        }
        _ => {}
    }
    // git prints a hunk line's origin in front of its content.
    let prefix: &[u8] = match origin {
        '+' => b"+",
        '-' => b"-",
        ' ' => b" ",
        _ => b"",
    };
    out.write_all(prefix)?;
    out.write_all(line.content())?;
    let bytes = (prefix.len() + line.content().len()) as u64;
    info.bytes += bytes;
    if let Some(file) = info.files.last_mut() {
        file.bytes += bytes;
    }
    Ok(())
}

/// The patch and its text (lossy UTF-8), for tests: written to a
/// temporary file and read back.
#[cfg(test)]
pub fn patch_text(
    repo: &ShadowRepo,
    baseline: Oid,
    head: Oid,
) -> Result<(PatchInfo, String), PatchError> {
    let dir = tempfile::tempdir().map_err(|source| PatchError::Write {
        path: std::env::temp_dir(),
        source,
    })?;
    let file = dir.path().join("session.patch");
    let info = session_patch(repo, baseline, head, &Outputs::none(), &file, u64::MAX)?;
    let bytes = std::fs::read(&file).map_err(|source| PatchError::Write { path: file, source })?;
    Ok((info, String::from_utf8_lossy(&bytes).into_owned()))
}

/// A file section's entry, before its lines are counted.
fn file_stat(delta: &git2::DiffDelta<'_>) -> FileStat {
    let file = if delta.status() == git2::Delta::Deleted {
        delta.old_file()
    } else {
        delta.new_file()
    };
    FileStat {
        path: file
            .path_bytes()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .unwrap_or_default(),
        added: 0,
        removed: 0,
        binary: delta.flags().is_binary(),
        // Git's octal modes; a side that does not exist reads 0 (`Unreadable`).
        old_mode: u32::from(delta.old_file().mode()),
        new_mode: u32::from(delta.new_file().mode()),
        bytes: 0,
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::{PermissionsExt, symlink};
    use std::path::Path;

    use tempfile::TempDir;

    use super::*;
    use crate::shadow::MAX_FILE_BYTES;
    use crate::testing::git;
    use crate::workspace::copy_project;

    /// Binary content: NUL bytes and every byte value.
    fn binary(seed: u8, len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31) ^ seed)
            .collect()
    }

    struct Run {
        dir: TempDir,
        repo: ShadowRepo,
        baseline: Oid,
    }

    impl Run {
        fn host(&self) -> std::path::PathBuf {
            self.dir.path().join("host")
        }
        fn work(&self) -> std::path::PathBuf {
            self.dir.path().join("work")
        }
        fn patch_file(&self) -> std::path::PathBuf {
            self.dir.path().join("session.patch")
        }
        /// The patch's text.
        fn text(&self) -> String {
            String::from_utf8_lossy(&fs::read(self.patch_file()).unwrap()).into_owned()
        }
        /// The session patch from the baseline to `head`, in `session.patch`.
        fn build(&self, head: Oid) -> PatchInfo {
            session_patch(
                &self.repo,
                self.baseline,
                head,
                &Outputs::none(),
                &self.patch_file(),
                u64::MAX,
            )
            .unwrap()
        }
        /// Commits the work tree as one step and builds the session patch.
        fn patch(&self) -> (Oid, PatchInfo) {
            let parent = self.repo.head().unwrap();
            let step = self.repo.commit_step(parent, "step", MAX_FILE_BYTES);
            let head = step.unwrap().commit.unwrap();
            (head, self.build(head))
        }
        /// Applies the patch to the host as ah does.
        fn apply(&self) {
            let file = self.patch_file();
            git(
                &self.host(),
                &["apply", "--index", "--3way", file.to_str().unwrap()],
            );
        }
    }

    /// A committed host repo, its work copy, and the shadow baseline.
    fn run() -> Run {
        run_with(&[])
    }

    /// [`run`], with `extra` files in the host repo too.
    fn run_with(extra: &[(&str, &[u8])]) -> Run {
        let dir = tempfile::tempdir().unwrap();
        let host = dir.path().join("host");
        fs::create_dir_all(host.join("src")).unwrap();
        git(&host, &["init", "-q"]);
        for (path, content) in extra {
            let path = host.join(path);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, content).unwrap();
        }
        fs::write(host.join("README.md"), "one\ntwo\nthree\n").unwrap();
        fs::write(host.join("src/lib.rs"), "fn a() {}\n").unwrap();
        fs::write(host.join("logo.bin"), binary(7, 4000)).unwrap();
        fs::write(host.join("gone.bin"), binary(9, 100)).unwrap();
        fs::write(host.join("tool.sh"), "#!/bin/sh\necho hi\n").unwrap();
        fs::write(host.join("other.txt"), "a\nb\nc\n").unwrap();
        git(&host, &["add", "-A"]);
        git(&host, &["commit", "-qm", "base"]);
        let work = dir.path().join("work");
        copy_project(&host, &work, &|_| false).unwrap();
        let repo = ShadowRepo::init(&dir.path().join("shadow.git"), &work).unwrap();
        let baseline = repo.baseline().unwrap();
        Run {
            dir,
            repo,
            baseline,
        }
    }

    #[test]
    fn baseline_matches_the_host_commit() {
        let run = run();
        let host_tree = git(&run.host(), &["rev-parse", "HEAD^{tree}"]);
        let base_tree = run.repo.commit_tree(run.baseline).unwrap().id();
        assert_eq!(host_tree, base_tree.to_string());
    }

    #[test]
    fn empty_run_gives_an_empty_patch() {
        let run = run();
        let info = run.build(run.baseline);
        assert!(info.is_empty());
        assert_eq!(info.bytes, 0);
        assert!(run.text().is_empty());
        assert_eq!((info.added_lines, info.removed_lines), (0, 0));
    }

    #[test]
    fn every_kind_of_change_applies_with_git_apply_3way() {
        let run = run();
        let work = run.work();
        fs::write(work.join("README.md"), "one\n2\nthree\nfour\n").unwrap();
        let mut logo = binary(7, 4000);
        logo[100] ^= 0xff;
        fs::write(work.join("logo.bin"), &logo).unwrap();
        fs::write(work.join("new.bin"), binary(3, 300)).unwrap();
        fs::remove_file(work.join("gone.bin")).unwrap();
        fs::set_permissions(work.join("tool.sh"), fs::Permissions::from_mode(0o755)).unwrap();
        fs::write(work.join("empty"), "").unwrap();
        symlink("src/lib.rs", work.join("link")).unwrap();
        fs::remove_file(work.join("other.txt")).unwrap();
        symlink("README.md", work.join("other.txt")).unwrap();
        fs::create_dir(work.join("dir with space")).unwrap();
        fs::write(work.join("dir with space/é.txt"), "x\n").unwrap();

        let (head, info) = run.patch();
        let text = run.text();
        assert_eq!(info.bytes, fs::metadata(run.patch_file()).unwrap().len());
        assert!(text.contains("GIT binary patch"), "{text}");
        assert!(text.contains("old mode 100644\nnew mode 100755"), "{text}");
        assert!(text.contains("new file mode 120000"), "{text}");
        let full_index = format!("index {}..", "0".repeat(40));
        assert!(text.contains(&full_index), "{text}");

        run.apply();
        // The host's index now holds exactly the run's final tree.
        let host_tree = git(&run.host(), &["write-tree"]);
        let head_tree = run.repo.commit_tree(head).unwrap().id();
        assert_eq!(host_tree, head_tree.to_string());
        assert_eq!(fs::read(run.host().join("logo.bin")).unwrap(), logo);
        assert_eq!(
            fs::read_link(run.host().join("other.txt")).unwrap(),
            Path::new("README.md")
        );
    }

    #[test]
    fn file_stats_count_lines_and_mark_binaries() {
        let run = run();
        let work = run.work();
        fs::write(work.join("README.md"), "one\n2\nthree\nfour\n").unwrap();
        fs::write(work.join("logo.bin"), binary(8, 4000)).unwrap();
        fs::remove_file(work.join("src/lib.rs")).unwrap();
        let (_, info) = run.patch();
        assert_eq!(
            files(&info),
            [
                entry("README.md", 2, 1, false, (FILE, FILE)),
                entry("logo.bin", 0, 0, true, (FILE, FILE)),
                entry("src/lib.rs", 0, 1, false, (FILE, 0)),
            ]
        );
        assert_eq!((info.added_lines, info.removed_lines), (2, 2));
    }

    const FILE: u32 = super::MODE_FILE;
    const EXEC: u32 = super::MODE_EXECUTABLE;
    const LINK: u32 = super::MODE_SYMLINK;

    fn entry(path: &str, added: u64, removed: u64, binary: bool, modes: (u32, u32)) -> FileStat {
        FileStat {
            path: path.to_string(),
            added,
            removed,
            binary,
            old_mode: modes.0,
            new_mode: modes.1,
            bytes: 0,
        }
    }

    /// The file stats with their byte counts cleared, once checked: each
    /// file's sections add up to the whole patch.
    fn files(info: &PatchInfo) -> Vec<FileStat> {
        let total: u64 = info.files.iter().map(|file| file.bytes).sum();
        assert_eq!(total, info.bytes);
        assert!(info.files.iter().all(|file| file.bytes > 0));
        info.files
            .iter()
            .map(|file| FileStat {
                bytes: 0,
                ..file.clone()
            })
            .collect()
    }

    #[test]
    fn file_stats_carry_modes_of_links_and_executables() {
        let run = run();
        let work = run.work();
        fs::set_permissions(work.join("tool.sh"), fs::Permissions::from_mode(0o755)).unwrap();
        symlink("src/lib.rs", work.join("link")).unwrap();
        fs::remove_file(work.join("other.txt")).unwrap();
        symlink("README.md", work.join("other.txt")).unwrap();
        fs::write(
            work.join("run.sh"),
            "#!/bin/sh
",
        )
        .unwrap();
        fs::set_permissions(work.join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
        let (_, info) = run.patch();
        assert_eq!(
            files(&info),
            [
                entry("link", 1, 0, false, (0, LINK)),
                // A file replaced by a link: a deletion, then an addition.
                entry("other.txt", 0, 3, false, (FILE, 0)),
                entry("other.txt", 1, 0, false, (0, LINK)),
                entry("run.sh", 1, 0, false, (0, EXEC)),
                entry("tool.sh", 0, 0, false, (FILE, EXEC)),
            ]
        );
    }

    #[test]
    fn file_stats_mark_a_submodule_entry() {
        let run = run();
        let git = run.repo.git();
        let base = git.find_commit(run.baseline).unwrap();
        let mut tree = git.treebuilder(Some(&base.tree().unwrap())).unwrap();
        // A gitlink names a commit of another repository; any id will do.
        tree.insert("vendor", run.baseline, i32::from(git2::FileMode::Commit))
            .unwrap();
        let tree = git.find_tree(tree.write().unwrap()).unwrap();
        let who = git2::Signature::now("t", "t@t").unwrap();
        let head = git
            .commit(None, &who, &who, "add a submodule", &tree, &[&base])
            .unwrap();
        let info = run.build(head);
        assert_eq!(
            files(&info),
            [entry("vendor", 1, 0, false, (0, super::MODE_SUBMODULE))]
        );
        let text = run.text();
        assert!(text.contains("new file mode 160000"), "{text}");
    }

    #[test]
    fn applies_after_the_host_moved_on_in_another_file() {
        let run = run();
        fs::write(run.work().join("README.md"), "one\nTWO\nthree\n").unwrap();
        run.patch();
        // Meanwhile the user commits elsewhere on the host.
        fs::write(run.host().join("other.txt"), "a\nB\nc\n").unwrap();
        git(&run.host(), &["commit", "-qam", "host work"]);
        run.apply();
        let host = run.host();
        assert_eq!(
            fs::read_to_string(host.join("README.md")).unwrap(),
            "one\nTWO\nthree\n"
        );
        assert_eq!(
            fs::read_to_string(host.join("other.txt")).unwrap(),
            "a\nB\nc\n"
        );
    }

    #[test]
    fn the_patch_is_what_git_diff_prints_and_a_bad_path_is_named() {
        let run = run();
        // Text only: git and libgit2 compress binary hunks differently.
        fs::write(run.work().join("README.md"), "changed\n").unwrap();
        fs::write(run.work().join("src/lib.rs"), "fn a() {}\nfn b() {}").unwrap();
        fs::remove_file(run.work().join("other.txt")).unwrap();
        let (head, _) = run.patch();
        let expected = git(
            &run.host(),
            &[
                "--git-dir",
                run.dir.path().join("shadow.git").to_str().unwrap(),
                "diff",
                "--binary",
                "--full-index",
                &run.baseline.to_string(),
                &head.to_string(),
            ],
        );
        assert_eq!(run.text().trim_end(), expected);
        let missing = run.dir.path().join("missing/session.patch");
        let err = session_patch(
            &run.repo,
            run.baseline,
            head,
            &Outputs::none(),
            &missing,
            u64::MAX,
        )
        .unwrap_err();
        assert!(err.to_string().contains("missing/session.patch"), "{err}");
    }

    #[test]
    fn a_patch_past_its_bytes_is_not_kept() {
        let run = run();
        fs::write(run.work().join("README.md"), "changed\n").unwrap();
        let (head, info) = run.patch();
        let err = session_patch(
            &run.repo,
            run.baseline,
            head,
            &Outputs::none(),
            &run.patch_file(),
            info.bytes - 1,
        )
        .unwrap_err();
        assert!(matches!(err, PatchError::TooBig { .. }), "{err}");
        assert!(!run.patch_file().exists(), "nothing of it is left");
        let fits = session_patch(
            &run.repo,
            run.baseline,
            head,
            &Outputs::none(),
            &run.patch_file(),
            info.bytes,
        )
        .unwrap();
        assert_eq!(fits, info);
    }

    #[test]
    fn outputs_the_run_added_are_left_out_and_the_rest_applies() {
        let run = run_with(&[
            ("build/gen.c", b"int g;\n"),
            ("pkg/__pycache__/old.pyc", &binary(1, 50)),
        ]);
        let work = run.work();
        fs::write(work.join("src/lib.rs"), "fn a() {}\nfn b() {}\n").unwrap();
        fs::create_dir_all(work.join("pkg/__pycache__")).unwrap();
        fs::write(work.join("pkg/__pycache__/m.pyc"), binary(2, 50)).unwrap();
        fs::write(work.join("pkg/__pycache__/old.pyc"), binary(3, 50)).unwrap();
        fs::create_dir_all(work.join(".pytest_cache/v")).unwrap();
        fs::write(work.join(".pytest_cache/v/x"), "[]\n").unwrap();
        fs::write(work.join("build/new.c"), "int n;\n").unwrap();
        fs::write(work.join("build/new.o"), binary(4, 50)).unwrap();
        let patterns = ["__pycache__/", "*.pyc", ".pytest_cache/", "build/", "*.o"];
        let patterns: Vec<String> = patterns.iter().map(|p| p.to_string()).collect();
        let outputs = Outputs::new(&patterns).unwrap();
        let parent = run.repo.head().unwrap();
        let head = run
            .repo
            .commit_step(parent, "step", MAX_FILE_BYTES)
            .unwrap()
            .commit
            .unwrap();
        let info = session_patch(
            &run.repo,
            run.baseline,
            head,
            &outputs,
            &run.patch_file(),
            u64::MAX,
        )
        .unwrap();
        // What the project had stays: a changed `old.pyc` and a new file in
        // the tracked `build/`; what the run made up is left out.
        let paths: Vec<&str> = info.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(
            paths,
            ["build/new.c", "pkg/__pycache__/old.pyc", "src/lib.rs"]
        );
        assert_eq!(
            info.left_out,
            [".pytest_cache/v/x", "build/new.o", "pkg/__pycache__/m.pyc"]
        );
        assert!(!run.text().contains("m.pyc"));
        assert_eq!(info.bytes, fs::metadata(run.patch_file()).unwrap().len());
        run.apply();
        assert!(!run.host().join("pkg/__pycache__/m.pyc").exists());
        assert_eq!(
            fs::read(run.host().join("src/lib.rs")).unwrap(),
            b"fn a() {}\nfn b() {}\n"
        );
    }

    #[test]
    fn a_large_text_file_gets_a_binary_hunk_that_applies() {
        let run = run();
        let big: String = (0..200_000).map(|i| format!("line {i}\n")).collect();
        assert!(big.len() as u64 > MAX_LINE_DIFF_BYTES);
        fs::write(run.work().join("big.txt"), &big).unwrap();
        fs::write(run.work().join("README.md"), "small\n").unwrap();
        let (_, info) = run.patch();
        assert_eq!(
            files(&info),
            [
                entry("README.md", 1, 3, false, (FILE, FILE)),
                entry("big.txt", 0, 0, true, (0, FILE)),
            ]
        );
        assert!(run.text().contains("GIT binary patch"));
        run.apply();
        assert_eq!(fs::read_to_string(run.host().join("big.txt")).unwrap(), big);
    }
}
