//! A run's baseline as a remote sandbox receives it: the files of the
//! baseline commit in the shadow repo, written as a tar stream from git's
//! objects (never from the work tree, so nothing in it is followed or
//! opened), and keyed by the commit's tree: two runs on the same files
//! share one copy on the engine (see `ah_sandbox::podman::remote`).

use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use ah_sandbox::podman::remote::Snapshot;
use git2::{ObjectType, Oid, Repository, TreeWalkMode, TreeWalkResult};

use crate::overlay::BaselineThread;

/// The baseline commit of a run, or the thread still taking it.
#[derive(Debug, Clone)]
pub enum Commit {
    Taken(Oid),
    Taking(BaselineThread),
}

/// A run's baseline, to send to a remote engine.
#[derive(Debug, Clone)]
pub struct BaselineSnapshot {
    git_dir: PathBuf,
    commit: Commit,
}

impl BaselineSnapshot {
    /// The baseline `commit` of the shadow repo at `git_dir`.
    pub fn new(git_dir: &Path, commit: Commit) -> BaselineSnapshot {
        BaselineSnapshot {
            git_dir: git_dir.to_path_buf(),
            commit,
        }
    }

    /// The baseline's tree, once the baseline is taken.
    fn tree(&self, repo: &Repository) -> Result<Oid, String> {
        let commit = match &self.commit {
            Commit::Taken(oid) => *oid,
            Commit::Taking(thread) => thread.commit()?,
        };
        let commit = repo
            .find_commit(commit)
            .map_err(|e| format!("the baseline commit: {e}"))?;
        Ok(commit.tree_id())
    }

    fn repo(&self) -> Result<Repository, String> {
        Repository::open(&self.git_dir)
            .map_err(|e| format!("the shadow repo {}: {e}", self.git_dir.display()))
    }
}

impl Snapshot for BaselineSnapshot {
    fn key(&self) -> Result<String, String> {
        let repo = self.repo()?;
        Ok(self.tree(&repo)?.to_string())
    }

    fn write(&self, out: &mut dyn Write) -> Result<(), String> {
        let repo = self.repo()?;
        let tree = repo
            .find_tree(self.tree(&repo)?)
            .map_err(|e| format!("the baseline's tree: {e}"))?;
        write_tree(&repo, &tree, out)
    }
}

/// Writes every file, link and folder of `tree` to `out` as a tar stream.
fn write_tree(repo: &Repository, tree: &git2::Tree<'_>, out: &mut dyn Write) -> Result<(), String> {
    let mut builder = tar::Builder::new(out);
    let mut failed = None;
    tree.walk(TreeWalkMode::PreOrder, |parent, entry| {
        let name = entry.name_bytes();
        let mut path = parent.as_bytes().to_vec();
        path.extend_from_slice(name);
        let path = Path::new(OsStr::from_bytes(&path));
        let added = match entry.kind() {
            Some(ObjectType::Tree) => folder(&mut builder, path),
            // A submodule: its folder, empty (as a checkout leaves it).
            Some(ObjectType::Commit) => folder(&mut builder, path),
            Some(ObjectType::Blob) => blob(repo, &mut builder, path, entry.id(), entry.filemode()),
            _ => Ok(()),
        };
        match added {
            Ok(()) => TreeWalkResult::Ok,
            Err(err) => {
                failed = Some(format!("{}: {err}", path.display()));
                TreeWalkResult::Abort
            }
        }
    })
    .map_err(|e| failed.take().unwrap_or_else(|| e.to_string()))?;
    if let Some(err) = failed {
        return Err(err);
    }
    builder.finish().map_err(|e| e.to_string())
}

fn folder(builder: &mut tar::Builder<&mut dyn Write>, path: &Path) -> std::io::Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::Directory);
    header.set_mode(0o755);
    header.set_size(0);
    builder.append_data(&mut header, path, std::io::empty())
}

fn blob(
    repo: &Repository,
    builder: &mut tar::Builder<&mut dyn Write>,
    path: &Path,
    id: Oid,
    mode: i32,
) -> std::io::Result<()> {
    let blob = repo.find_blob(id).map_err(std::io::Error::other)?;
    let bytes = blob.content();
    let mut header = tar::Header::new_gnu();
    if mode == 0o120000 {
        header.set_entry_type(tar::EntryType::Symlink);
        header.set_mode(0o777);
        header.set_size(0);
        let target = Path::new(OsStr::from_bytes(bytes));
        return builder.append_link(&mut header, path, target);
    }
    header.set_entry_type(tar::EntryType::Regular);
    header.set_mode(if mode == 0o100755 { 0o755 } else { 0o644 });
    header.set_size(bytes.len() as u64);
    builder.append_data(&mut header, path, bytes)
}

#[cfg(test)]
mod tests;
