//! The shadow repo: a git repository outside the work tree that records the
//! work copy after every step, so each step's changes can be listed, checked
//! against the write policy, reverted, and finally turned into a patch.
//!
//! The repo's git directory is the run's `shadow.git/`; its work tree is the
//! work copy, which has no `.git` of its own, so nothing running in the work
//! tree can reach the history. libgit2 is never pointed at the work tree (the
//! repo is opened bare): it follows links and opens whatever the tree holds
//! under the names `.gitignore` and `.gitattributes`. Walking, staging and
//! writing the tree back go through [`crate::tree`] and folder
//! handles instead. Staging keeps a stat cache in the index: the index file
//! stays in `shadow.git/`, and a step only rehashes the files whose size,
//! mode or timestamps changed, so a step stays cheap on a large tree.
//!
//! What is recorded: everything in the work tree except what the project's
//! own `.gitignore` files ignore (as `git add -A` would; build outputs and
//! such are never committed, never checked by the policy, never in the patch)
//! and a top-level `.ah/`. Content is recorded byte for byte (ah reads the
//! files itself, through no filter); for diffs, the user's global git
//! configuration (excludes file, attributes file) is overridden in the shadow
//! repo's own config, and `info/attributes`, which outranks every
//! `.gitattributes`, switches off what recorded attributes could do to the
//! review (`binary`, `-diff`), so the model cannot disguise a change.
//!
//! A step whose changes cannot all be recorded (a name git refuses, a tree
//! too deep, a rules file too large, a walk that does not finish in time)
//! is reported to the caller, which undoes it: no tool runs on a tree that
//! was not completely checked.
//!
//! The repo's HEAD is not trusted: a step is committed on the parent the
//! caller names (the run's last accepted commit), so a rejected commit that a
//! failed revert left at HEAD never becomes part of the run.

mod baseline;
mod checkout;
mod layered;
mod links;
mod pack;
mod project;
mod restore;
mod revert;
mod seed;
mod stage;
#[cfg(test)]
mod tests;
mod treediff;

pub use layered::{Layers, StatCache};
pub use links::CommittedLinks;
pub use project::NameCheck;
pub use restore::LayerEntry;
pub use revert::Reverted;
pub use seed::ProjectSeed;

use std::path::{Path, PathBuf};

use git2::{Commit, Oid, Repository, RepositoryInitOptions, Signature, Tree};

use super::Change;
use super::safe_text::path_safe;
use super::tree::scan::Refused;

const COMMITTER_NAME: &str = "ah";
const COMMITTER_EMAIL: &str = "ah@localhost";
const BRANCH: &str = "main";
const BRANCH_REF: &str = "refs/heads/main";

/// The largest file a step may add or change: 50 MiB. Larger files are not
/// staged (hashing whatever the container creates could exhaust the host).
pub const MAX_FILE_BYTES: u64 = 50 * 1024 * 1024;

/// Patterns never recorded, written to the shadow repo's `info/exclude`.
const EXCLUDES: &str = "# Written by ah: ah's own state is never part of a run's changes.\n/.ah/\n";

/// Written to the shadow repo's `info/attributes`, which outranks the work
/// tree's `.gitattributes`: content is stored and checked out byte for byte
/// (`-text` never converts line endings; `eol`, `crlf`, `ident`, `filter` and
/// `working-tree-encoding` are unspecified, so they do nothing), and whether a
/// file diffs as text is decided by its content alone (`diff` unspecified,
/// which also undoes the `binary` macro's `-diff`).
const ATTRIBUTES: &str = "# Written by ah: the work tree's .gitattributes must not change what is \
recorded or how it is shown.\n\
* -text !eol !crlf !ident !filter !working-tree-encoding !diff\n";

#[derive(Debug, thiserror::Error)]
pub enum ShadowError {
    #[error("shadow repo {git_dir}: {what} failed: {source}")]
    Git {
        git_dir: PathBuf,
        what: &'static str,
        source: git2::Error,
    },
    #[error("cannot write {}: {source}", path_safe(path))]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("work directory {path}: {source} (copy the project before creating the shadow repo)")]
    WorkDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "cannot stage {}: {source}; the file changed while it was read, or cannot be read",
        path_safe(path)
    )]
    Stage {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("shadow repo {git_dir}: the work tree could not be reset to commit {commit}: {why}")]
    RevertFailed {
        git_dir: PathBuf,
        commit: Oid,
        why: String,
    },
    #[error(
        "shadow repo {git_dir}: the work tree written from commit {commit} does not read back \
         as that commit; the restore was stopped"
    )]
    RestoreMismatch { git_dir: PathBuf, commit: Oid },
    #[error("cannot record the work tree: {0}")]
    Walk(crate::tree::scan::WalkError),
    #[error(
        "shadow repo {git_dir}: writing the baseline's objects failed: {source}; \
         check the free space and permissions of the run directory"
    )]
    Pack {
        git_dir: PathBuf,
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
    /// The new commit, or `None` when the step changed nothing that could be
    /// staged.
    pub commit: Option<Oid>,
    /// What changed versus the parent commit, sorted by path.
    pub changes: Vec<Change>,
    /// Directories in the work tree that hold a git repository of their own
    /// (a nested repo, or a submodule whose `.git` file was copied). Their
    /// contents are not recorded: not checked, not reverted, not in the
    /// patch. Git itself treats such directories the same way.
    pub nested_repos: Vec<String>,
    /// Files the step added or changed that are over the size cap, sorted by
    /// path. They were not staged, so they are in neither `changes` nor the
    /// commit; the caller must treat them as a violation and revert.
    pub too_large: Vec<String>,
    /// Entries that cannot be recorded (see [`crate::tree::scan`]),
    /// sorted by path: not staged; the caller must revert, as for
    /// `too_large`.
    pub refused: Vec<Refused>,
}

/// A shadow repository bound to one work tree.
pub struct ShadowRepo {
    repo: Repository,
    git_dir: PathBuf,
    work_dir: PathBuf,
    /// The index of an overlay run's baseline, being written on a thread
    /// (see [`ShadowRepo::write_index_later`]).
    index_writer: std::sync::Mutex<Option<std::thread::JoinHandle<Result<(), String>>>>,
}

impl Drop for ShadowRepo {
    /// An index still being written is finished, so no `index.lock` is
    /// left behind in the run's record.
    fn drop(&mut self) {
        if let Some(writer) = self.index_writer.get_mut().ok().and_then(Option::take) {
            let _ = writer.join();
        }
    }
}

impl std::fmt::Debug for ShadowRepo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShadowRepo")
            .field("git_dir", &self.git_dir)
            .field("work_dir", &self.work_dir)
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
        let attributes = info.join("attributes");
        for (path, text) in [(&exclude, EXCLUDES), (&attributes, ATTRIBUTES)] {
            std::fs::create_dir_all(&info)
                .and_then(|()| std::fs::write(path, text))
                .map_err(|source| ShadowError::Io {
                    path: path.clone(),
                    source,
                })?;
        }
        let mut config = repo.config().map_err(err("opening the config"))?;
        let exclude = exclude.to_string_lossy();
        let attributes = attributes.to_string_lossy();
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
            ("core.attributesfile", &attributes),
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
        // Every tree and index entry the shadow repo writes names a blob it
        // has just written, or one whose header it has read (a seeded
        // baseline entry): libgit2's own re-check, an object lookup per
        // entry, costs a large project's start a tenth of its time. ah uses
        // git2 for shadow repos only (a project's repository is only read),
        // so the process-wide switch touches nothing else.
        static RELAXED: std::sync::Once = std::sync::Once::new();
        RELAXED.call_once(|| git2::opts::strict_object_creation(false));
        Ok(ShadowRepo {
            repo,
            git_dir: git_dir.to_path_buf(),
            work_dir: work_dir.to_path_buf(),
            index_writer: std::sync::Mutex::new(None),
        })
    }

    /// Writes an index of `entries` on a thread: only a staging of the whole
    /// tree (an undo) needs it, as its stat cache, and it costs a large
    /// project a few hundred milliseconds that the run's start need not wait
    /// for. Staging waits for it ([`ShadowRepo::settle_index`]).
    pub(super) fn write_index_later(&self, mut entries: Vec<git2::IndexEntry>) {
        // In the index's own order, each entry is appended: out of it, each
        // one moves the entries after it (quadratic in a large project).
        entries.sort_unstable_by(|a, b| a.path.cmp(&b.path));
        let git_dir = self.git_dir.clone();
        let writer = std::thread::spawn(move || -> Result<(), String> {
            let repo = Repository::open_bare(&git_dir).map_err(|e| e.to_string())?;
            let mut index = repo.index().map_err(|e| e.to_string())?;
            index.clear().map_err(|e| e.to_string())?;
            for entry in entries {
                index.add(&entry).map_err(|e| e.to_string())?;
            }
            index.write().map_err(|e| e.to_string())
        });
        if let Ok(mut slot) = self.index_writer.lock() {
            *slot = Some(writer);
        }
    }

    /// Waits for an index being written on a thread; one that failed is
    /// left empty, so the next staging reads every file (slower, as right).
    pub(super) fn settle_index(&self) -> Result<(), ShadowError> {
        let writer = self
            .index_writer
            .lock()
            .ok()
            .and_then(|mut slot| slot.take());
        let Some(writer) = writer else {
            return Ok(());
        };
        if !matches!(writer.join(), Ok(Ok(()))) {
            let mut index = self.repo.index().map_err(self.err("opening the index"))?;
            index.clear().map_err(self.err("emptying the index"))?;
            index.write().map_err(self.err("saving the index"))?;
        }
        Ok(())
    }

    /// Commits the whole work tree as the run's first commit. The project's
    /// own files are the user's: no size cap applies to them.
    pub fn baseline(&self) -> Result<Oid, ShadowError> {
        match self.head_commit() {
            Err(ShadowError::NoBaseline(_)) => {}
            Ok(_) => return Err(ShadowError::BaselineExists(self.git_dir.clone())),
            Err(e) => return Err(e),
        }
        let (tree, refused) = self.stage_baseline()?;
        // What git cannot record is taken out of the copy, so no step
        // starts with an entry it would be blamed for.
        let extra: Vec<Vec<u8>> = refused.into_iter().map(|r| r.path).collect();
        if !extra.is_empty() {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            self.write_tree(&tree, &extra, deadline)?;
        }
        self.commit(&tree, "baseline", &[])
    }

    /// Stages every change in the work tree and, when the staged tree differs
    /// from `parent`'s, commits it on `parent`. The changes are listed versus
    /// `parent`, whatever HEAD points at; the branch ends on the new commit,
    /// or on `parent` when nothing changed. Files over `max_file_bytes` are
    /// not staged but listed in [`StepCommit::too_large`].
    pub fn commit_step(
        &self,
        parent: Oid,
        message: &str,
        max_file_bytes: u64,
    ) -> Result<StepCommit, ShadowError> {
        // Only a repo with a baseline records steps.
        self.head_commit()?;
        let parent = self
            .repo
            .find_commit(parent)
            .map_err(self.err("finding the step's parent commit"))?;
        let parent_tree = parent
            .tree()
            .map_err(self.err("reading the parent's tree"))?;
        let staged = self.stage_all(max_file_bytes)?;
        let (commit, changes) = if staged.tree.id() == parent_tree.id() {
            (None, Vec::new())
        } else {
            let changes = self.tree_changes(&parent_tree, &staged.tree)?;
            let commit = self.commit(&staged.tree, message, &[&parent])?;
            (Some(commit), changes)
        };
        self.set_branch(commit.unwrap_or(parent.id()), "ah: record a step")?;
        Ok(StepCommit {
            commit,
            changes,
            nested_repos: staged.nested_repos,
            too_large: staged.too_large,
            refused: staged.refused,
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

    /// Points the repo at the work tree `work_dir` from now on (an overlay
    /// run's merged view, which moves when its container restarts).
    pub fn rebind(&mut self, work_dir: &Path) {
        self.work_dir = work_dir.to_path_buf();
    }

    /// The shadow repo's git directory.
    pub fn git_dir(&self) -> &Path {
        &self.git_dir
    }

    /// The underlying repository, for building the session patch and
    /// copying artifacts.
    pub(super) fn git(&self) -> &Repository {
        &self.repo
    }

    /// The repository again, for diffs of commits only: opened bare, with
    /// an empty index of its own. A diff looks up each file's attributes,
    /// which would read the work tree's `.gitattributes` and the whole
    /// index (megabytes for a large project, read and checksummed); only
    /// ah's own attributes file (`info/attributes`, which unsets what
    /// shows a diff for every path) matters to how a patch is shown.
    pub(super) fn for_diffs(&self) -> Result<Repository, ShadowError> {
        let err = |what| move |e| git_error(&self.git_dir, what, e);
        let repo = Repository::open_bare(&self.git_dir).map_err(err("opening the repo"))?;
        let mut index = git2::Index::new().map_err(err("making an empty index"))?;
        repo.set_index(&mut index)
            .map_err(err("setting an empty index"))?;
        Ok(repo)
    }

    /// The tree of `commit`.
    pub(super) fn commit_tree(&self, commit: Oid) -> Result<Tree<'_>, ShadowError> {
        self.repo
            .find_commit(commit)
            .and_then(|c| c.tree())
            .map_err(self.err("reading a commit's tree"))
    }

    fn tree_changes(&self, from: &Tree<'_>, to: &Tree<'_>) -> Result<Vec<Change>, ShadowError> {
        treediff::changes(&self.repo, from, to).map_err(self.err("comparing trees"))
    }

    /// Writes a commit without moving any reference; the branch is moved by
    /// the caller (libgit2 refuses to update a ref whose tip is not the
    /// first parent, and HEAD may hold a rejected commit).
    fn commit(
        &self,
        tree: &Tree<'_>,
        message: &str,
        parents: &[&Commit<'_>],
    ) -> Result<Oid, ShadowError> {
        let who = Signature::now(COMMITTER_NAME, COMMITTER_EMAIL)
            .map_err(self.err("making the committer signature"))?;
        let commit = self
            .repo
            .commit(None, &who, &who, message, tree, parents)
            .map_err(self.err("committing"))?;
        if parents.is_empty() {
            self.set_branch(commit, "ah: baseline")?;
        }
        Ok(commit)
    }

    fn set_branch(&self, commit: Oid, log: &str) -> Result<(), ShadowError> {
        self.repo
            .reference(BRANCH_REF, commit, true, log)
            .map(drop)
            .map_err(self.err("moving the branch"))
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
