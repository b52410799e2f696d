//! Applies a run's `session.patch` to the host project, the one place where
//! ah changes the user's files. git2 cannot do a 3-way apply, so this shells
//! out to the host's `git`:
//!
//! - in a git work tree: `git apply --index --3way`, falling back to
//!   `git apply --reject` (a failure there is any new `*.rej` file); with
//!   `commit`, only the paths the patch touches are committed, so the user's
//!   other staged and unstaged changes stay exactly as they were;
//! - elsewhere: a plain, all-or-nothing `git apply`.
//!
//! No hook of the repository runs, not even on ah's commit, and git gets a
//! minimal environment (see `git::Git::run`): the patch may have changed
//! the very script a hook runs, and nobody has run it yet.
//!
//! Every error says where the patch is saved and how to apply it by hand.

pub(crate) mod git;
mod probe;

use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use self::git::{Git, GitRun, directory_arg, nul_paths};
use ah_base::count;
use ah_record::safe_text::path_safe;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyOptions {
    /// Commit the patched paths in the host repo (git work trees only).
    pub commit: bool,
    pub message: String,
}

/// How the patch went in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApplyMethod {
    /// The patch changes nothing.
    Nothing,
    /// `git apply --index --3way`: applied (merged where the host moved on) and staged.
    ThreeWay,
    /// `git apply --reject` after the 3-way apply failed: every hunk applied,
    /// in the work tree only.
    Direct,
    /// Plain `git apply` in a directory that is not a git work tree.
    Plain,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyOutcome {
    pub method: ApplyMethod,
    /// Paths the patch touches, relative to the project (both sides of renames).
    pub paths: Vec<PathBuf>,
    /// The host commit made, when asked to and the project is a git work tree.
    pub commit: Option<String>,
    /// Touched paths that already had the user's own uncommitted changes:
    /// when there are any, the patch is applied but nothing is committed.
    pub not_committed: Vec<PathBuf>,
}

impl std::fmt::Display for ApplyOutcome {
    /// One line for the user: how many files, how, and the host commit.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let files = self.paths.len();
        let how = match self.method {
            ApplyMethod::Nothing => "nothing to apply",
            ApplyMethod::ThreeWay => "3-way apply",
            ApplyMethod::Direct => "direct apply (3-way failed, every hunk applied)",
            ApplyMethod::Plain => "plain apply, not a git repository",
        };
        write!(f, "{} ({how})", count(files, "file", "files"))?;
        if let Some(commit) = &self.commit {
            write!(f, ", committed {}", &commit[..commit.len().min(12)])?;
        }
        if !self.not_committed.is_empty() {
            write!(
                f,
                "; not committed, because these files had your own uncommitted changes: {} \
                 (review them with `git diff`, then commit)",
                list(&self.not_committed)
            )?;
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("git not found ({source}): install git to apply the patch; it is saved at {}", patch.display())]
    GitNotFound {
        source: which::Error,
        patch: PathBuf,
    },
    #[error("could not {action}: {source}; the patch is saved at {}", patch.display())]
    Io {
        action: String,
        source: io::Error,
        patch: PathBuf,
    },
    #[error("`git {command}` failed in {}: {stderr}; the patch is saved at {}", dir.display(), patch.display())]
    Git {
        command: String,
        dir: PathBuf,
        stderr: String,
        patch: PathBuf,
    },
    #[error("{} has unresolved merge conflicts ({}): finish or abort that merge first, then apply the patch with `git apply --3way {}`", project.display(), list(paths), patch.display())]
    MergeInProgress {
        project: PathBuf,
        paths: Vec<PathBuf>,
        patch: PathBuf,
    },
    #[error("the patch applied with merge conflicts in {}: the host changed the same lines. Resolve the conflict markers in those files and `git add` them; the rest of the patch is applied and staged, nothing was committed. The patch is saved at {}", list(paths), patch.display())]
    Conflicted { paths: Vec<PathBuf>, patch: PathBuf },
    #[error("the patch did not apply cleanly: git left the rejected hunks in {}. The hunks that did apply are in the work tree, not committed. Apply the rejected hunks by hand and delete the .rej files, or undo the partial apply and apply the saved patch {} yourself (`git apply --3way`)", list(files), patch.display())]
    Rejected { files: Vec<PathBuf>, patch: PathBuf },
    #[error("the patch does not apply to {}: {stderr}. {note} The patch is saved at {}: fix what git reports and apply it with `git apply {}`", project.display(), patch.display(), patch.display())]
    DoesNotApply {
        project: PathBuf,
        stderr: String,
        note: &'static str,
        patch: PathBuf,
    },
    #[error("the patch is applied, but `git commit` failed: {stderr}. Commit {} yourself (the patch is also saved at {})", list(paths), patch.display())]
    CommitFailed {
        paths: Vec<PathBuf>,
        stderr: String,
        patch: PathBuf,
    },
}

/// The files' names, escaped: they are the model's.
fn list(paths: &[PathBuf]) -> String {
    let names: Vec<_> = paths.iter().map(|p| path_safe(p)).collect();
    names.join(", ")
}

/// Applies `patch` (a git binary diff with full index lines, paths relative
/// to the project root) to `project`.
pub fn apply_patch(
    project: &Path,
    patch: &Path,
    opts: &ApplyOptions,
) -> Result<ApplyOutcome, ApplyError> {
    Applier::new(project, patch)?.apply(opts)
}

/// Whether `patch` would apply to `project` without rejected hunks or merge
/// conflicts; in a git work tree a 3-way merge counts. Nothing in the project
/// changes (a 3-way check may add blobs to the repo's object store).
pub fn check_patch(project: &Path, patch: &Path) -> Result<bool, ApplyError> {
    Applier::new(project, patch)?.check()
}

/// Where the project stands with respect to git.
enum Host {
    NotGit,
    /// A git work tree; `prefix` is the project's path inside it (`""` at the
    /// root, else ending in `/`).
    Repo {
        prefix: Vec<u8>,
    },
}

struct Applier<'a> {
    git: Git,
    project: &'a Path,
    patch: &'a Path,
}

impl<'a> Applier<'a> {
    fn new(project: &'a Path, patch: &'a Path) -> Result<Applier<'a>, ApplyError> {
        let git = Git::find().map_err(|source| ApplyError::GitNotFound {
            source,
            patch: patch.to_path_buf(),
        })?;
        Ok(Applier::with_git(git, project, patch))
    }

    fn with_git(git: Git, project: &'a Path, patch: &'a Path) -> Applier<'a> {
        Applier {
            git,
            project,
            patch,
        }
    }

    fn apply(&self, opts: &ApplyOptions) -> Result<ApplyOutcome, ApplyError> {
        let nothing = ApplyOutcome {
            method: ApplyMethod::Nothing,
            paths: Vec::new(),
            commit: None,
            not_committed: Vec::new(),
        };
        if self.patch_is_empty()? {
            return Ok(nothing);
        }
        let host = self.host()?;
        let paths = self.touched_paths(&host)?;
        if paths.is_empty() {
            return Ok(nothing);
        }
        match host {
            Host::NotGit => {
                let run = self.git_apply(&[], &[])?;
                if !run.ok() {
                    return Err(self.does_not_apply(run.stderr, "Nothing was changed."));
                }
                Ok(ApplyOutcome {
                    method: ApplyMethod::Plain,
                    paths,
                    commit: None,
                    not_committed: Vec::new(),
                })
            }
            Host::Repo { prefix } => self.apply_in_repo(&prefix, paths, opts),
        }
    }

    fn apply_in_repo(
        &self,
        prefix: &[u8],
        paths: Vec<PathBuf>,
        opts: &ApplyOptions,
    ) -> Result<ApplyOutcome, ApplyError> {
        let unmerged = self.unmerged()?;
        if !unmerged.is_empty() {
            return Err(ApplyError::MergeInProgress {
                project: self.project.to_path_buf(),
                paths: unmerged,
                patch: self.patch.to_path_buf(),
            });
        }
        // Stale stat data would make `--index` see every copied or touched
        // file as "does not match index".
        self.git(&["update-index", "-q", "--refresh"])?;
        let dirty = self.dirty(&paths)?;
        let rejects_before = self.rejects(&paths);

        let three_way = self.git_apply(prefix, &["--index", "--3way"])?;
        let conflicted = self.unmerged()?;
        if !conflicted.is_empty() {
            return Err(ApplyError::Conflicted {
                paths: conflicted,
                patch: self.patch.to_path_buf(),
            });
        }
        let method = if three_way.ok() {
            ApplyMethod::ThreeWay
        } else {
            let direct = self.git_apply(prefix, &["--reject"])?;
            let rejects_after = self.rejects(&paths);
            let mut new_rejects: Vec<PathBuf> = rejects_after
                .into_iter()
                .filter(|(path, state)| state.is_some() && rejects_before.get(path) != Some(state))
                .map(|(path, _)| path)
                .collect();
            new_rejects.sort();
            if !new_rejects.is_empty() {
                return Err(ApplyError::Rejected {
                    files: new_rejects,
                    patch: self.patch.to_path_buf(),
                });
            }
            if !direct.ok() {
                let stderr = format!("{}\n{}", three_way.stderr, direct.stderr);
                return Err(self.does_not_apply(
                    stderr,
                    "Part of the patch may have been applied: `git status` shows what changed.",
                ));
            }
            ApplyMethod::Direct
        };
        // The user's own uncommitted edits in a touched file must not end up
        // in ah's commit: then nothing is committed and the user decides.
        let commit = if opts.commit && dirty.is_empty() {
            Some(self.commit(&paths, &opts.message)?)
        } else {
            None
        };
        Ok(ApplyOutcome {
            method,
            paths,
            commit,
            not_committed: if opts.commit { dirty } else { Vec::new() },
        })
    }

    fn check(&self) -> Result<bool, ApplyError> {
        if self.patch_is_empty()? {
            return Ok(true);
        }
        let host = self.host()?;
        let prefix = match &host {
            Host::NotGit => &[][..],
            Host::Repo { prefix } => prefix.as_slice(),
        };
        let plain = self.git_apply(prefix, &["--check"])?;
        if plain.ok() {
            return Ok(true);
        }
        if matches!(host, Host::NotGit) || plain.status.code() != Some(1) {
            return self.exit_as_bool(plain, "apply --check");
        }
        // A 3-way merge into a copy of the index: conflicts show as a failure
        // there, while `--check --3way` would report success.
        let index = self.git(&["rev-parse", "--git-path", "index"])?;
        let index = self
            .project
            .join(OsStr::from_bytes(index.stdout.trim_ascii_end()));
        let scratch =
            tempfile::tempdir().map_err(|e| self.io("create a temporary directory", e))?;
        let copy = scratch.path().join("index");
        if index.exists() {
            std::fs::copy(&index, &copy)
                .map_err(|e| self.io(format!("copy {}", index.display()), e))?;
        }
        let mut args: Vec<OsString> = vec!["apply".into(), "--cached".into(), "--3way".into()];
        args.extend(directory_arg(prefix));
        args.push(self.patch.into());
        let merged = self
            .git
            .run(self.project, &args, &[("GIT_INDEX_FILE", copy.as_os_str())])
            .map_err(|e| self.io(format!("run git in {}", self.project.display()), e))?;
        self.exit_as_bool(merged, "apply --cached --3way")
    }

    /// Exit 0 is `true`, 1 (does not apply) is `false`, anything else an error.
    fn exit_as_bool(&self, run: GitRun, command: &str) -> Result<bool, ApplyError> {
        match run.status.code() {
            Some(0) => Ok(true),
            Some(1) => Ok(false),
            _ => Err(self.git_failed(command, run)),
        }
    }

    fn commit(&self, paths: &[PathBuf], message: &str) -> Result<String, ApplyError> {
        // `commit --only` refuses paths git does not track: files the patch
        // created outside the index (direct apply) are added first.
        let mut ls_args: Vec<OsString> = vec![
            "--literal-pathspecs".into(),
            "ls-files".into(),
            "-z".into(),
            "--".into(),
        ];
        ls_args.extend(paths.iter().map(|p| p.into()));
        let tracked: BTreeSet<PathBuf> = nul_paths(&self.git_checked(&ls_args, "ls-files")?.stdout)
            .into_iter()
            .collect();
        let untracked: Vec<&PathBuf> = paths
            .iter()
            .filter(|p| !tracked.contains(*p) && self.project.join(p).symlink_metadata().is_ok())
            .collect();
        if !untracked.is_empty() {
            let mut add: Vec<OsString> = vec![
                "--literal-pathspecs".into(),
                "add".into(),
                "-f".into(),
                "--".into(),
            ];
            add.extend(untracked.iter().map(|p| p.into()));
            self.git_checked(&add, "add")?;
        }

        let mut args: Vec<OsString> = vec!["--literal-pathspecs".into()];
        args.extend(self.identity_args()?);
        // `--no-verify` besides the runner's empty hooks path: the commit
        // hooks are the ones a changed tracked script reaches first.
        args.extend(["commit", "--quiet", "--no-verify", "-m"].map(OsString::from));
        args.push(message.into());
        args.extend(["--only", "--"].map(OsString::from));
        args.extend(paths.iter().map(|p| p.into()));
        let run = self.git(&args)?;
        if !run.ok() {
            return Err(ApplyError::CommitFailed {
                paths: paths.to_vec(),
                stderr: run.stderr,
                patch: self.patch.to_path_buf(),
            });
        }
        let head = self.git_checked(&["rev-parse", "--verify", "HEAD"], "rev-parse HEAD")?;
        Ok(String::from_utf8_lossy(&head.stdout).trim().to_string())
    }

    /// `-c user.name=ah -c user.email=ah@localhost` for whichever of the two
    /// git has no value for, so the commit works on a machine with no git
    /// identity; nothing when the user has one.
    fn identity_args(&self) -> Result<Vec<OsString>, ApplyError> {
        let author = self.git(&["var", "GIT_AUTHOR_IDENT"])?;
        let committer = self.git(&["var", "GIT_COMMITTER_IDENT"])?;
        if author.ok() && committer.ok() {
            return Ok(Vec::new());
        }
        let mut args = Vec::new();
        for (key, fallback) in [("user.name", "ah"), ("user.email", "ah@localhost")] {
            let value = self.git(&["config", "--get", key])?;
            if !value.ok() || value.stdout.trim_ascii().is_empty() {
                args.push(OsString::from("-c"));
                args.push(format!("{key}={fallback}").into());
            }
        }
        Ok(args)
    }
}

#[cfg(test)]
mod tests;
