//! Recording a step of an overlay work copy in O(changes).
//!
//! The container's `/work` is then an overlay: its lower layer is the
//! project, its upper folder holds everything the commands created, changed
//! or deleted. A folder in which nothing changed has no counterpart in the
//! upper folder, so the step's tree is the parent commit's tree with only
//! the folders that exist in the upper folder read again. They are read
//! through the merged view (the container's `/work`, which the host reaches
//! through the container's root), so whiteouts, opaque folders and copy-ups
//! are resolved by the kernel, not by ah. In a folder read again:
//!
//! - an entry the upper folder does not have is the lower layer's,
//!   unchanged: it keeps its entry of the parent tree (or stays out of the
//!   tree, as it was: ignored, or withheld);
//! - an entry the upper folder has is staged as a full walk stages it: the
//!   merged view's `.gitignore` rules, nested repositories, names git
//!   refuses, the size cap; a file is hashed unless its stat data matches
//!   what an earlier step hashed ([`StatCache`]);
//! - an entry of the parent tree that the folder no longer lists was
//!   deleted.
//!
//! One difference from a full walk, on purpose: a file of the project that
//! was ignored when the run started is not recorded when a step's
//! `.gitignore` stops ignoring it. It is the user's file, not the step's.
//!
//! The walk is bounded like a full one (entries listed, depth, path length,
//! time); what cannot be read fails the step closed.

use std::collections::HashMap;
use std::rc::Rc;
use std::time::SystemTime;

use git2::{IndexEntry, ObjectType, Oid, Tree, TreeEntry};

use super::stage::{SCAN_SECONDS, stat_matches};
use super::{ShadowError, ShadowRepo, StepCommit};
use crate::tree::ignore::{self, Chain, Rules};
use crate::tree::scan::{self, Limits, Refused, Visit, WalkError};
use ah_tools::fs_beneath::dir::{DirHandle, Kind};

/// The mode of a folder in a tree.
const TREE_MODE: i32 = 0o040000;

/// What earlier steps hashed, by path: a file whose stat data still matches
/// is not read again. Only files of the upper folder are ever in it.
#[derive(Debug, Default)]
pub struct StatCache(HashMap<Vec<u8>, IndexEntry>);

/// The two views of an overlay work copy a step is recorded from.
pub struct Layers<'a> {
    /// The merged view: what the container sees at `/work`.
    pub merged: &'a DirHandle,
    /// The overlay's upper folder, on the host.
    pub upper: &'a DirHandle,
}

/// One folder to read again.
struct Folder<'a, 't> {
    merged: &'a DirHandle,
    upper: &'a DirHandle,
    path: &'a [u8],
    depth: usize,
    /// The folder's tree in the parent commit.
    old: Option<&'a Tree<'t>>,
    chain: &'a Rc<Chain>,
    /// Inside an ignored folder, entered only for its recorded files.
    ignored: bool,
}

/// The state of one step's walk.
struct Walker<'r, 'c> {
    repo: &'r ShadowRepo,
    limits: Limits,
    max_file_bytes: u64,
    started: SystemTime,
    cache: &'c mut StatCache,
    listed: usize,
    nested_repos: Vec<String>,
    too_large: Vec<String>,
    refused: Vec<Refused>,
}

impl ShadowRepo {
    /// Records a step of an overlay work copy on `parent`, as
    /// [`ShadowRepo::commit_step`] does for a plain one.
    pub fn commit_layered_step(
        &self,
        parent: Oid,
        message: &str,
        layers: &Layers<'_>,
        cache: &mut StatCache,
        max_file_bytes: u64,
    ) -> Result<StepCommit, ShadowError> {
        let parent = self
            .repo
            .find_commit(parent)
            .map_err(self.err("finding the step's parent commit"))?;
        let parent_tree = parent
            .tree()
            .map_err(self.err("reading the parent's tree"))?;
        let mut walker = Walker {
            repo: self,
            limits: Limits::within(SCAN_SECONDS),
            max_file_bytes,
            started: SystemTime::now(),
            cache,
            listed: 0,
            nested_repos: Vec::new(),
            too_large: Vec::new(),
            refused: Vec::new(),
        };
        let root_chain = Chain::root(None);
        let tree = walker.folder(Folder {
            merged: layers.merged,
            upper: layers.upper,
            path: b"",
            depth: 0,
            old: Some(&parent_tree),
            chain: &root_chain,
            ignored: false,
        })?;
        let tree = match tree {
            Some(tree) => tree,
            None => self
                .repo
                .treebuilder(None)
                .and_then(|b| b.write())
                .map_err(self.err("writing an empty tree"))?,
        };
        let tree = self
            .repo
            .find_tree(tree)
            .map_err(self.err("reading the step's tree"))?;
        let (commit, changes) = if tree.id() == parent_tree.id() {
            (None, Vec::new())
        } else {
            let changes = self.tree_changes(&parent_tree, &tree)?;
            let commit = self.commit(&tree, message, &[&parent])?;
            (Some(commit), changes)
        };
        self.set_branch(commit.unwrap_or(parent.id()), "ah: record a step")?;
        let Walker {
            mut nested_repos,
            mut too_large,
            mut refused,
            ..
        } = walker;
        nested_repos.sort();
        too_large.sort();
        refused.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(StepCommit {
            commit,
            changes,
            nested_repos,
            too_large,
            refused,
        })
    }
}

impl Walker<'_, '_> {
    /// The folder's new tree, `None` when it records nothing.
    fn folder(&mut self, at: Folder<'_, '_>) -> Result<Option<Oid>, ShadowError> {
        if std::time::Instant::now() > self.limits.deadline {
            return Err(WalkError::TimedOut.into());
        }
        let io_err = |path: &[u8]| {
            let path = path.to_vec();
            move |source| ShadowError::Walk(WalkError::Io { path, source })
        };
        let entries = at.merged.entries().map_err(io_err(at.path))?;
        let upper: HashMap<Vec<u8>, Kind> = at
            .upper
            .entries()
            .map_err(io_err(at.path))?
            .into_iter()
            .collect();
        self.listed += entries.len() + upper.len();
        if self.listed > self.limits.max_entries {
            return Err(WalkError::TooManyEntries(self.limits.max_entries).into());
        }
        if !at.path.is_empty() && at.old.is_none() && entries.iter().any(|(n, _)| n == b".git") {
            self.nested_repos
                .push(String::from_utf8_lossy(at.path).into_owned());
            return Ok(None);
        }
        let rules = match ignore::load(at.merged).map_err(io_err(at.path))? {
            Rules::Loaded(rules) => Some(rules),
            Rules::None | Rules::TooLarge(_) => None,
        };
        let chain = match at.path.is_empty() {
            true => Chain::root(rules),
            false => at.chain.child(at.path.to_vec(), rules),
        };
        let repo = &self.repo.repo;
        let mut builder = repo
            .treebuilder(None)
            .map_err(self.repo.err("starting a tree"))?;
        for (name, kind) in entries {
            if at.path.is_empty() && name == b".ah" {
                continue;
            }
            let old = at.old.and_then(|tree| tree.get_name_bytes(&name));
            if !upper.contains_key(&name) {
                // The lower layer's entry, untouched.
                if let Some(old) = old {
                    insert(&mut builder, &name, old.id(), old.filemode(), self.repo)?;
                }
                continue;
            }
            let path = scan::join(at.path, &name);
            let ignored = at.ignored || chain.ignores(&path, kind == Kind::Dir);
            let new = match kind {
                Kind::Dir => self.subfolder(&at, &name, &path, old.as_ref(), &chain, ignored)?,
                Kind::File | Kind::Link => self.file(&at, &name, &path, old.as_ref(), ignored)?,
                // Never recorded, as git records no such files: a recorded
                // file replaced by one is deleted.
                Kind::Special => None,
            };
            if let Some((id, mode)) = new {
                insert(&mut builder, &name, id, mode, self.repo)?;
            }
        }
        if builder.is_empty() {
            return Ok(None);
        }
        builder
            .write()
            .map(Some)
            .map_err(self.repo.err("writing a tree"))
    }

    /// The entry of a changed folder: read again, or left as it was when it
    /// cannot be recorded.
    fn subfolder(
        &mut self,
        at: &Folder<'_, '_>,
        name: &[u8],
        path: &[u8],
        old: Option<&TreeEntry<'_>>,
        chain: &Rc<Chain>,
        ignored: bool,
    ) -> Result<Option<(Oid, i32)>, ShadowError> {
        let old_tree = old
            .filter(|e| e.kind() == Some(ObjectType::Tree))
            .map(|e| e.to_object(&self.repo.repo).and_then(|o| o.peel_to_tree()))
            .transpose()
            .map_err(self.repo.err("reading a folder of the parent tree"))?;
        if ignored && old_tree.is_none() {
            return Ok(None);
        }
        if let Some(why) = scan::refusal(name, path, at.depth + 1, &self.limits) {
            self.refused.push(Refused {
                path: path.to_vec(),
                why,
            });
            return Ok(old.map(|e| (e.id(), e.filemode())));
        }
        let merged = match at.merged.open_dir(name) {
            Ok(dir) => dir,
            // Gone or replaced since it was listed: seen as gone.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => {
                return Ok(None);
            }
            Err(source) => return Err(walk_io(path, source)),
        };
        let upper = at.upper.open_dir(name).map_err(|e| walk_io(path, e))?;
        let tree = self.folder(Folder {
            merged: &merged,
            upper: &upper,
            path,
            depth: at.depth + 1,
            old: old_tree.as_ref(),
            chain,
            ignored,
        })?;
        Ok(tree.map(|id| (id, TREE_MODE)))
    }

    /// The entry of a changed file or link: staged, or left as it was when
    /// it cannot be recorded.
    fn file(
        &mut self,
        at: &Folder<'_, '_>,
        name: &[u8],
        path: &[u8],
        old: Option<&TreeEntry<'_>>,
        ignored: bool,
    ) -> Result<Option<(Oid, i32)>, ShadowError> {
        let kept = || old.map(|e| (e.id(), e.filemode()));
        let tracked = old.is_some_and(|e| e.kind() == Some(ObjectType::Blob));
        if ignored && !tracked {
            return Ok(None);
        }
        if let Some(why) = scan::refusal(name, path, at.depth, &self.limits) {
            self.refused.push(Refused {
                path: path.to_vec(),
                why,
            });
            return Ok(kept());
        }
        let stat = match at.merged.stat(name) {
            Ok(stat) => stat,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(walk_io(path, e)),
        };
        let link = Kind::of_stat(&stat) == Kind::Link;
        if let Some(cached) = self.cache.0.get(path)
            && stat_matches(cached, &stat, link)
        {
            return Ok(Some((cached.id, cached.mode as i32)));
        }
        let visit = Visit {
            dir: at.merged,
            name,
            path,
            stat,
            link,
        };
        let Some(entry) = self
            .repo
            .stage_entry(&visit, self.max_file_bytes, self.started)?
        else {
            self.too_large
                .push(String::from_utf8_lossy(path).into_owned());
            return Ok(kept());
        };
        // An oversized rules file is refused when it is the step's change.
        if let Some(why) = scan::oversized_rules(name, &visit.stat, link)
            && old.is_none_or(|e| e.id() != entry.id)
        {
            self.refused.push(Refused {
                path: path.to_vec(),
                why,
            });
            return Ok(kept());
        }
        let new = (entry.id, entry.mode as i32);
        self.cache.0.insert(path.to_vec(), entry);
        Ok(Some(new))
    }
}

fn walk_io(path: &[u8], source: std::io::Error) -> ShadowError {
    ShadowError::Walk(WalkError::Io {
        path: path.to_vec(),
        source,
    })
}

/// Adds one entry to a tree; a name git refuses was checked before, so a
/// failure here is the object store's.
fn insert(
    builder: &mut git2::TreeBuilder<'_>,
    name: &[u8],
    id: Oid,
    mode: i32,
    repo: &ShadowRepo,
) -> Result<(), ShadowError> {
    builder
        .insert(name, id, mode)
        .map(drop)
        .map_err(repo.err("adding an entry to a tree"))
}
