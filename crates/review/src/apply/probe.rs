//! What the apply asks git and the file system about the project and the
//! patch (is it a work tree, which paths does the patch touch, which paths are
//! unmerged, which `.rej` files exist), and the errors built from the answers.

use std::collections::{BTreeSet, HashMap};
use std::ffi::{OsStr, OsString};
use std::io::{self, BufReader, Read};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::SystemTime;

use super::git::{GitRun, directory_arg, nul_paths, numstat_paths};
use super::{Applier, ApplyError, Host};

/// What is known about one `.rej` file: `None` when it does not exist.
pub(super) type RejectState = Option<(u64, Option<SystemTime>)>;

impl Applier<'_> {
    /// Whether the patch holds nothing but whitespace.
    pub(super) fn patch_is_empty(&self) -> Result<bool, ApplyError> {
        let read_err = |e| self.io(format!("read {}", self.patch.display()), e);
        let file = std::fs::File::open(self.patch).map_err(read_err)?;
        for byte in BufReader::new(file).bytes() {
            if !byte.map_err(read_err)?.is_ascii_whitespace() {
                return Ok(false);
            }
        }
        Ok(true)
    }

    pub(super) fn host(&self) -> Result<Host, ApplyError> {
        let run = self.git(&["rev-parse", "--is-inside-work-tree", "--show-prefix"])?;
        if !run.ok() {
            if run.stderr.contains("not a git repository") {
                return Ok(Host::NotGit);
            }
            return Err(self.git_failed("rev-parse --is-inside-work-tree", run));
        }
        let mut lines = run.stdout.split(|b| *b == b'\n');
        if lines.next() != Some(b"true") {
            return Ok(Host::NotGit);
        }
        let prefix = lines.next().unwrap_or_default().to_vec();
        Ok(Host::Repo { prefix })
    }

    /// Every path the patch touches, relative to the project: git's own
    /// parser lists the new names, and the reversed patch the old ones (the
    /// sources of renames and the deleted files).
    pub(super) fn touched_paths(&self, host: &Host) -> Result<Vec<PathBuf>, ApplyError> {
        let prefix = match host {
            Host::NotGit => &[][..],
            Host::Repo { prefix } => prefix.as_slice(),
        };
        let mut paths = BTreeSet::new();
        for flags in [&["--numstat", "-z"][..], &["--numstat", "-z", "-R"]] {
            let run = self.git_apply(prefix, flags)?;
            if !run.ok() {
                return Err(self.git_failed("apply --numstat", run));
            }
            paths.extend(numstat_paths(&run.stdout, prefix));
        }
        Ok(paths.into_iter().collect())
    }

    /// Paths with unmerged index entries, relative to the project.
    pub(super) fn unmerged(&self) -> Result<Vec<PathBuf>, ApplyError> {
        let args = ["diff", "--name-only", "--diff-filter=U", "--relative", "-z"];
        let run = self.git_checked(&args, "diff --diff-filter=U")?;
        Ok(nul_paths(&run.stdout))
    }

    /// Which of `paths` carry the user's own uncommitted work (staged or
    /// unstaged changes against HEAD). Committing such a path would put
    /// their edits into ah's commit.
    pub(super) fn dirty(&self, paths: &[PathBuf]) -> Result<Vec<PathBuf>, ApplyError> {
        let mut args: Vec<OsString> = vec![
            "--literal-pathspecs".into(),
            "status".into(),
            "--porcelain=v1".into(),
            "-z".into(),
            "--untracked-files=all".into(),
            "--no-renames".into(),
            "--".into(),
        ];
        args.extend(paths.iter().map(|p| p.into()));
        let run = self.git_checked(&args, "status")?;
        // Each entry is "XY path\0"; the path starts after the two status
        // letters and a space.
        Ok(run
            .stdout
            .split(|b| *b == 0)
            .filter(|entry| entry.len() > 3)
            .map(|entry| PathBuf::from(std::ffi::OsStr::from_bytes(&entry[3..])))
            .collect())
    }

    /// The `.rej` files `git apply --reject` would write for `paths`, and
    /// whether (and as what) they exist now.
    pub(super) fn rejects(&self, paths: &[PathBuf]) -> HashMap<PathBuf, RejectState> {
        paths
            .iter()
            .map(|path| {
                let mut name = path.clone().into_os_string();
                name.push(".rej");
                let rej = PathBuf::from(name);
                let state = std::fs::symlink_metadata(self.project.join(&rej))
                    .ok()
                    .map(|m| (m.len(), m.modified().ok()));
                (rej, state)
            })
            .collect()
    }

    /// `git apply <flags> --whitespace=nowarn [--directory=<prefix>] <patch>`.
    pub(super) fn git_apply(&self, prefix: &[u8], flags: &[&str]) -> Result<GitRun, ApplyError> {
        let mut args: Vec<OsString> = vec!["apply".into()];
        args.extend(flags.iter().map(OsString::from));
        args.push("--whitespace=nowarn".into());
        args.extend(directory_arg(prefix));
        args.push(self.patch.into());
        self.git(&args)
    }

    /// Runs git in the project.
    pub(super) fn git<S: AsRef<OsStr>>(&self, args: &[S]) -> Result<GitRun, ApplyError> {
        self.git
            .run(self.project, args, &[])
            .map_err(|e| self.io(format!("run git in {}", self.project.display()), e))
    }

    /// Runs git in the project; a non-zero exit is an error.
    pub(super) fn git_checked<S: AsRef<OsStr>>(
        &self,
        args: &[S],
        command: &str,
    ) -> Result<GitRun, ApplyError> {
        let run = self.git(args)?;
        if run.ok() {
            Ok(run)
        } else {
            Err(self.git_failed(command, run))
        }
    }

    pub(super) fn io(&self, action: impl Into<String>, source: io::Error) -> ApplyError {
        ApplyError::Io {
            action: action.into(),
            source,
            patch: self.patch.to_path_buf(),
        }
    }

    pub(super) fn git_failed(&self, command: &str, run: GitRun) -> ApplyError {
        ApplyError::Git {
            command: command.to_string(),
            dir: self.project.to_path_buf(),
            stderr: run.stderr,
            patch: self.patch.to_path_buf(),
        }
    }

    pub(super) fn does_not_apply(&self, stderr: String, note: &'static str) -> ApplyError {
        ApplyError::DoesNotApply {
            project: self.project.to_path_buf(),
            stderr: stderr.trim().to_string(),
            note,
            patch: self.patch.to_path_buf(),
        }
    }
}
