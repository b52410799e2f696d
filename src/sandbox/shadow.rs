//! The shadow repo: a git repository outside the work tree that records the
//! work copy after every step, so each step's changes can be listed, checked
//! against the write policy, reverted, and finally turned into a patch.
//!
//! The repo's git directory is the run's `shadow.git/`; its work tree is the
//! work copy, which has no `.git` of its own, so nothing running in the work
//! tree can reach the history. Staging relies on libgit2's index stat cache:
//! the index file stays in `shadow.git/`, and a step only rehashes the files
//! whose size, mode or timestamps changed, so a step stays cheap on a large
//! tree.
//!
//! What is recorded: everything in the work tree except what the project's
//! own `.gitignore` files ignore (as `git add -A` would; build outputs and
//! such are never committed, never checked by the policy, never in the patch)
//! and a top-level `.ah/`. The user's global git configuration (excludes file,
//! attributes file, autocrlf) is overridden in the shadow repo's own config so
//! that what is recorded does not depend on who runs ah.

#[cfg(test)]
mod tests;

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use git2::build::CheckoutBuilder;
use git2::{
    Commit, Delta, DiffOptions, FileMode, Index, Oid, Repository, RepositoryInitOptions, Signature,
    Tree,
};

use super::{Change, ChangeKind};

const COMMITTER_NAME: &str = "ah";
const COMMITTER_EMAIL: &str = "ah@localhost";
const BRANCH: &str = "main";

/// Patterns never recorded, written to the shadow repo's `info/exclude`.
const EXCLUDES: &str = "# Written by ah: ah's own state is never part of a run's changes.\n/.ah/\n";

#[derive(Debug, thiserror::Error)]
pub enum ShadowError {
    #[error("shadow repo {git_dir}: {what} failed: {source}")]
    Git {
        git_dir: PathBuf,
        what: &'static str,
        source: git2::Error,
    },
    #[error("cannot write {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("work directory {path}: {source} (copy the project before creating the shadow repo)")]
    WorkDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("shadow repo {0} has no baseline commit yet: take the baseline before recording steps")]
    NoBaseline(PathBuf),
    #[error("shadow repo {0} already has a baseline: a run takes its baseline only once")]
    BaselineExists(PathBuf),
}

/// The outcome of [`ShadowRepo::commit_step`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepCommit {
    /// The new commit, or `None` when the step changed nothing.
    pub commit: Option<Oid>,
    /// What changed versus the previous commit, sorted by path.
    pub changes: Vec<Change>,
    /// Directories in the work tree that hold a git repository of their own
    /// (a nested repo, or a submodule whose `.git` file was copied). Their
    /// contents are not recorded: not checked, not reverted, not in the
    /// patch. Git itself treats such directories the same way.
    pub nested_repos: Vec<String>,
}

/// The outcome of [`ShadowRepo::revert_to`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reverted {
    /// The commit HEAD and the work tree now match.
    pub head: Oid,
    /// The commit HEAD pointed at before, when it was a different one. It is
    /// no longer on the branch but stays in the object store until pruned.
    pub dropped: Option<Oid>,
}

/// What one scan of the work tree found.
#[derive(Default)]
struct WorkTreeScan {
    /// Paths that differ from the index, each with whether it was deleted.
    changes: Vec<(bool, Vec<u8>)>,
    nested_repos: Vec<String>,
}

/// A shadow repository bound to one work tree.
pub struct ShadowRepo {
    repo: Repository,
    git_dir: PathBuf,
}

impl std::fmt::Debug for ShadowRepo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShadowRepo")
            .field("git_dir", &self.git_dir)
            .finish_non_exhaustive()
    }
}

impl ShadowRepo {
    /// Creates the shadow repo at `git_dir` (which must not hold one yet) for
    /// the work tree `work_dir`.
    pub fn init(git_dir: &Path, work_dir: &Path) -> Result<ShadowRepo, ShadowError> {
        // Checked first so that a wrong path leaves no half-made repo, and
        // made absolute for `core.worktree`.
        let work_dir = work_dir
            .canonicalize()
            .map_err(|source| ShadowError::WorkDir {
                path: work_dir.to_path_buf(),
                source,
            })?;
        let err = |what| move |e| git_error(git_dir, what, e);
        let mut opts = RepositoryInitOptions::new();
        opts.bare(true)
            .no_reinit(true)
            .mkpath(true)
            .initial_head(BRANCH);
        let repo = Repository::init_opts(git_dir, &opts).map_err(err("creating the repo"))?;
        // Absolute, as config paths must be.
        let info = repo.path().join("info");
        let exclude = info.join("exclude");
        std::fs::create_dir_all(&info)
            .and_then(|()| std::fs::write(&exclude, EXCLUDES))
            .map_err(|source| ShadowError::Io {
                path: exclude.clone(),
                source,
            })?;
        let mut config = repo.config().map_err(err("opening the config"))?;
        let exclude = exclude.to_string_lossy();
        let attributes = info.join("attributes");
        let worktree = work_dir.to_string_lossy();
        let settings: [(&str, &str); 12] = [
            // Lets a person inspect the run with `git --git-dir=shadow.git`.
            ("core.bare", "false"),
            ("core.worktree", &worktree),
            ("core.filemode", "true"),
            ("core.symlinks", "true"),
            ("core.ignorecase", "false"),
            ("core.precomposeunicode", "false"),
            ("core.autocrlf", "false"),
            ("core.safecrlf", "false"),
            // Shadow the user's global excludes and attributes.
            ("core.excludesfile", &exclude),
            ("core.attributesfile", &attributes.to_string_lossy()),
            ("user.name", COMMITTER_NAME),
            ("user.email", COMMITTER_EMAIL),
        ];
        for (key, value) in settings {
            config
                .set_str(key, value)
                .map_err(err("writing the config"))?;
        }
        Self::bind(repo, git_dir, &work_dir)
    }

    /// Opens an existing shadow repo for the work tree `work_dir`.
    pub fn open(git_dir: &Path, work_dir: &Path) -> Result<ShadowRepo, ShadowError> {
        let repo = Repository::open_bare(git_dir)
            .map_err(|e| git_error(git_dir, "opening the repo", e))?;
        Self::bind(repo, git_dir, work_dir)
    }

    fn bind(repo: Repository, git_dir: &Path, work_dir: &Path) -> Result<ShadowRepo, ShadowError> {
        repo.set_workdir(work_dir, false)
            .map_err(|e| git_error(git_dir, "setting the work tree", e))?;
        Ok(ShadowRepo {
            repo,
            git_dir: git_dir.to_path_buf(),
        })
    }

    /// Commits the whole work tree as the run's first commit.
    pub fn baseline(&self) -> Result<Oid, ShadowError> {
        match self.head_commit() {
            Err(ShadowError::NoBaseline(_)) => {}
            Ok(_) => return Err(ShadowError::BaselineExists(self.git_dir.clone())),
            Err(e) => return Err(e),
        }
        let (tree, _) = self.stage_all()?;
        self.commit(&tree, "baseline", &[])
    }

    /// Stages every change in the work tree and commits it when there is
    /// one. The changes are listed versus the previous commit.
    pub fn commit_step(&self, message: &str) -> Result<StepCommit, ShadowError> {
        let parent = self.head_commit()?;
        let parent_tree = parent.tree().map_err(self.err("reading HEAD's tree"))?;
        let (tree, nested_repos) = self.stage_all()?;
        if tree.id() == parent_tree.id() {
            return Ok(StepCommit {
                commit: None,
                changes: Vec::new(),
                nested_repos,
            });
        }
        let changes = self.tree_changes(&parent_tree, &tree)?;
        let commit = self.commit(&tree, message, &[&parent])?;
        Ok(StepCommit {
            commit: Some(commit),
            changes,
            nested_repos,
        })
    }

    /// Makes the work tree, the index and HEAD match `commit`: tracked files
    /// are restored, and files not in `commit` are removed, whether the later
    /// commits added them or they were never staged. Ignored files and nested
    /// repositories are left alone, as they were never recorded.
    pub fn revert_to(&self, commit: Oid) -> Result<Reverted, ShadowError> {
        let previous = self.head()?;
        let target = self
            .repo
            .find_commit(commit)
            .map_err(self.err("finding the commit to revert to"))?;
        // A hard reset would ignore `remove_untracked`: check out first,
        // then move the branch.
        let mut checkout = CheckoutBuilder::new();
        checkout.force().remove_untracked(true);
        self.repo
            .checkout_tree(target.as_object(), Some(&mut checkout))
            .map_err(self.err("checking out the commit to revert to"))?;
        self.repo
            .head()
            .and_then(|mut branch| branch.set_target(commit, "ah: revert a step"))
            .map_err(self.err("moving the branch"))?;
        Ok(Reverted {
            head: commit,
            dropped: (previous != commit).then_some(previous),
        })
    }

    /// The current commit.
    pub fn head(&self) -> Result<Oid, ShadowError> {
        Ok(self.head_commit()?.id())
    }

    /// What changed from commit `from` to commit `to`, sorted by path.
    pub fn changes_between(&self, from: Oid, to: Oid) -> Result<Vec<Change>, ShadowError> {
        let from = self.commit_tree(from)?;
        let to = self.commit_tree(to)?;
        self.tree_changes(&from, &to)
    }

    /// The shadow repo's git directory.
    pub fn git_dir(&self) -> &Path {
        &self.git_dir
    }

    /// The underlying repository, for building the session patch.
    pub(super) fn git(&self) -> &Repository {
        &self.repo
    }

    /// The tree of `commit`.
    pub(super) fn commit_tree(&self, commit: Oid) -> Result<Tree<'_>, ShadowError> {
        self.repo
            .find_commit(commit)
            .and_then(|c| c.tree())
            .map_err(self.err("reading a commit's tree"))
    }

    /// Brings the index in line with the work tree, saves it, and writes its
    /// tree; also returns the nested repositories left out. One scan of the
    /// work tree: files whose stat data matches the index are not read;
    /// files read and found unchanged get their stat data refreshed so they
    /// are not read again.
    fn stage_all(&self) -> Result<(Tree<'_>, Vec<String>), ShadowError> {
        let mut index = self.repo.index().map_err(self.err("opening the index"))?;
        index.read(false).map_err(self.err("reading the index"))?;
        let scan = self.scan_work_tree(&index)?;
        for (deleted, path) in scan.changes {
            let path = Path::new(std::ffi::OsStr::from_bytes(&path));
            if deleted {
                index.remove_path(path)
            } else {
                index.add_path(path)
            }
            .map_err(self.err("staging a change"))?;
        }
        index.write().map_err(self.err("saving the index"))?;
        let tree = index
            .write_tree()
            .map_err(self.err("writing the index's tree"))?;
        let tree = self
            .repo
            .find_tree(tree)
            .map_err(self.err("reading the index's tree"))?;
        Ok((tree, scan.nested_repos))
    }

    fn scan_work_tree(&self, index: &Index) -> Result<WorkTreeScan, ShadowError> {
        let mut opts = DiffOptions::new();
        opts.include_untracked(true)
            .recurse_untracked_dirs(true)
            .include_typechange(true)
            .update_index(true);
        let diff = self
            .repo
            .diff_index_to_workdir(Some(index), Some(&mut opts))
            .map_err(self.err("scanning the work tree"))?;
        // Paths are copied out: deltas may point into index entries that
        // staging replaces.
        let mut scan = WorkTreeScan::default();
        for delta in diff.deltas() {
            let deleted = delta.status() == Delta::Deleted;
            let file = if deleted {
                delta.old_file()
            } else {
                delta.new_file()
            };
            let Some(path) = file.path_bytes() else {
                continue;
            };
            // The only untracked directories a recursive scan reports whole
            // are those holding a `.git` of their own.
            if let Some(dir) = path.strip_suffix(b"/") {
                scan.nested_repos
                    .push(String::from_utf8_lossy(dir).into_owned());
            } else {
                scan.changes.push((deleted, path.to_vec()));
            }
        }
        Ok(scan)
    }

    fn tree_changes(&self, from: &Tree<'_>, to: &Tree<'_>) -> Result<Vec<Change>, ShadowError> {
        let mut opts = DiffOptions::new();
        opts.include_typechange(true);
        let diff = self
            .repo
            .diff_tree_to_tree(Some(from), Some(to), Some(&mut opts))
            .map_err(self.err("comparing trees"))?;
        Ok(diff.deltas().filter_map(to_change).collect())
    }

    fn commit(
        &self,
        tree: &Tree<'_>,
        message: &str,
        parents: &[&Commit<'_>],
    ) -> Result<Oid, ShadowError> {
        let who = Signature::now(COMMITTER_NAME, COMMITTER_EMAIL)
            .map_err(self.err("making the committer signature"))?;
        self.repo
            .commit(Some("HEAD"), &who, &who, message, tree, parents)
            .map_err(self.err("committing"))
    }

    fn head_commit(&self) -> Result<Commit<'_>, ShadowError> {
        let head = match self.repo.head() {
            Ok(head) => head,
            Err(e) if e.code() == git2::ErrorCode::UnbornBranch => {
                return Err(ShadowError::NoBaseline(self.git_dir.clone()));
            }
            Err(e) => return Err(self.err("reading HEAD")(e)),
        };
        head.peel_to_commit()
            .map_err(self.err("reading HEAD's commit"))
    }

    fn err(&self, what: &'static str) -> impl Fn(git2::Error) -> ShadowError + '_ {
        move |source| git_error(&self.git_dir, what, source)
    }
}

fn git_error(git_dir: &Path, what: &'static str, source: git2::Error) -> ShadowError {
    ShadowError::Git {
        git_dir: git_dir.to_path_buf(),
        what,
        source,
    }
}

/// One tree-diff entry as a [`Change`]. Type changes (file to link and back)
/// and mode-only changes are modifications.
fn to_change(delta: git2::DiffDelta<'_>) -> Option<Change> {
    let (kind, file) = match delta.status() {
        Delta::Added => (ChangeKind::Added, delta.new_file()),
        Delta::Deleted => (ChangeKind::Deleted, delta.old_file()),
        _ => (ChangeKind::Modified, delta.new_file()),
    };
    let path = file.path_bytes()?;
    Some(Change {
        path: String::from_utf8_lossy(path).into_owned(),
        kind,
        symlink: kind != ChangeKind::Deleted && delta.new_file().mode() == FileMode::Link,
    })
}
