//! The baseline of an overlay run, read from the project itself: the work
//! copy is not copied first, so the baseline walks the project (the
//! overlay's lower layer) with the same rules as any baseline, passes over
//! what the container will not see ([`crate::overlay::survey`], which also
//! hides what git cannot record), and takes the object ids the project's
//! own index vouches for ([`super::seed`]). Nothing in the project is
//! written.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use git2::{IndexEntry, Oid, Tree};

use super::seed::ProjectSeed;
use super::{ShadowError, ShadowRepo};
use crate::tree::scan::{Refused, Tracked};
use ah_tools::fs_beneath::dir::{DirHandle, Kind};

/// libgit2's own test of a tree entry's name, as the baseline's trees apply
/// it (`.git` in the forms other file systems read as `.git`, among
/// others): the survey hides what it refuses before the container starts,
/// so that the container sees no entry the baseline leaves out.
pub struct NameCheck<'r> {
    builder: git2::TreeBuilder<'r>,
    /// Any blob id: only the name is tested (ah has libgit2 look up no id
    /// it is given; see where a shadow repo is opened).
    id: Oid,
    held: usize,
}

impl NameCheck<'_> {
    /// Whether a tree may hold an entry named `name`.
    pub fn accepts(&mut self, name: &[u8]) -> bool {
        // The builder keeps what it accepted: emptied now and then.
        if self.held == NAME_CHECK_BATCH {
            self.builder.clear().ok();
            self.held = 0;
        }
        self.held += 1;
        self.builder.insert(name, self.id, 0o100644).is_ok()
    }
}

/// How many names a [`NameCheck`] holds before it empties its builder.
const NAME_CHECK_BATCH: usize = 4096;

impl ShadowRepo {
    /// A test of entry names with this repo's settings.
    pub fn name_check(&self) -> Result<NameCheck<'_>, ShadowError> {
        let builder = self
            .repo
            .treebuilder(None)
            .map_err(self.err("starting a tree"))?;
        let id = Oid::hash_object(git2::ObjectType::Blob, b"")
            .map_err(self.err("hashing an empty file"))?;
        Ok(NameCheck {
            builder,
            id,
            held: 0,
        })
    }
}

/// The project as the baseline sees it: nothing tracked yet, and its own
/// `.git` and what the container will not see passed over.
struct ProjectView<'h> {
    hidden: &'h HashSet<Vec<u8>>,
}

impl Tracked for ProjectView<'_> {
    fn file(&self, _: &[u8]) -> bool {
        false
    }

    fn dir(&self, _: &[u8]) -> bool {
        false
    }

    fn hidden(&self, path: &[u8], _kind: Kind) -> bool {
        path == b".git" || self.hidden.contains(path)
    }
}

impl ShadowRepo {
    /// Takes the baseline commit from `project`, passing over the entries
    /// `hidden` names (relative to the project: what
    /// [`crate::overlay::survey`] found). An entry git refuses all the same
    /// (one that appeared since the survey) is left out of it. `seed` is the
    /// project's repository, read beforehand ([`ProjectSeed::read`]).
    pub fn project_baseline(
        &self,
        project: &Path,
        hidden: &HashSet<Vec<u8>>,
        seed: ProjectSeed,
    ) -> Result<Oid, ShadowError> {
        // Without the project's objects, every file is hashed.
        let repo = seed
            .into_repo()
            .filter(|r| self.add_alternate(&r.objects).is_ok());
        let root = DirHandle::open_root(project).map_err(|source| ShadowError::WorkDir {
            path: project.to_path_buf(),
            source,
        })?;
        let view = ProjectView { hidden };
        let (entries, mut refused) =
            self.read_baseline(&root, &view, repo.as_ref().map(|r| &r.seed))?;
        let tree = self.tree_of(&entries, &mut refused)?;
        let commit = self.commit(&tree, "baseline", &[])?;
        let refused_paths: HashSet<&[u8]> = refused.iter().map(|r| r.path.as_slice()).collect();
        let kept = entries
            .into_iter()
            .filter(|e| !refused_paths.contains(e.path.as_slice()))
            .collect();
        drop(refused_paths);
        self.write_index_later(kept);
        Ok(commit)
    }

    /// Lets the shadow repo read the objects in `objects` (a project's
    /// object store), now and whenever it is opened again.
    pub(super) fn add_alternate(&self, objects: &Path) -> Result<(), ShadowError> {
        let file = self.git_dir.join("objects").join("info").join("alternates");
        // Added to those already listed (a restored run's shadow reaches an
        // earlier run's project store too), once.
        let mut text = match std::fs::read(&file) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(source) => return Err(ShadowError::Io { path: file, source }),
        };
        let line = objects.as_os_str().as_encoded_bytes();
        if !text.split(|&b| b == b'\n').any(|listed| listed == line) {
            text.extend_from_slice(line);
            text.push(b'\n');
            std::fs::create_dir_all(file.parent().unwrap_or(&self.git_dir))
                .and_then(|()| std::fs::write(&file, &text))
                .map_err(|source| ShadowError::Io {
                    path: file.clone(),
                    source,
                })?;
        }
        let objects = objects.to_str().ok_or_else(|| ShadowError::Io {
            path: objects.to_path_buf(),
            source: std::io::Error::other(
                "the project's object store has a path that is not UTF-8",
            ),
        })?;
        self.repo
            .odb()
            .and_then(|odb| odb.add_disk_alternate(objects))
            .map_err(self.err("adding the project's objects"))
    }

    /// The tree of `entries`, written folder by folder, deepest first; an
    /// entry git refuses is added to `refused`. (An index would give the
    /// same tree, at several times the cost for a large project.)
    fn tree_of(
        &self,
        entries: &[IndexEntry],
        refused: &mut Vec<Refused>,
    ) -> Result<Tree<'_>, ShadowError> {
        // Folder → its files, and folder → its folders.
        let mut files: HashMap<&[u8], Vec<&IndexEntry>> = HashMap::new();
        let mut folders: HashMap<&[u8], Vec<&[u8]>> = HashMap::new();
        folders.insert(b"", Vec::new());
        let mut linked: HashSet<&[u8]> = HashSet::new();
        for entry in entries {
            let mut dir = split(&entry.path).0;
            files.entry(dir).or_default().push(entry);
            while !dir.is_empty() && linked.insert(dir) {
                folders.entry(dir).or_default();
                let parent = split(dir).0;
                folders.entry(parent).or_default().push(dir);
                dir = parent;
            }
        }
        let mut order: Vec<&[u8]> = folders.keys().copied().collect();
        let depth =
            |dir: &[u8]| dir.iter().filter(|&&b| b == b'/').count() + usize::from(!dir.is_empty());
        order.sort_by_key(|dir| std::cmp::Reverse(depth(dir)));
        let mut written: HashMap<&[u8], Oid> = HashMap::new();
        for dir in order {
            let mut builder = self
                .repo
                .treebuilder(None)
                .map_err(self.err("starting a tree"))?;
            for entry in files.get(dir).into_iter().flatten() {
                if let Err(e) = builder.insert(split(&entry.path).1, entry.id, entry.mode as i32) {
                    refused.push(Refused {
                        path: entry.path.clone(),
                        why: format!("git cannot record it: {}", e.message()),
                    });
                }
            }
            for child in &folders[dir] {
                if let Some(id) = written.get(child) {
                    builder
                        .insert(split(child).1, *id, 0o040000)
                        .map_err(self.err("adding a folder to a tree"))?;
                }
            }
            // Git stores no empty folder (all of its files were refused).
            if builder.is_empty() && !dir.is_empty() {
                continue;
            }
            written.insert(dir, builder.write().map_err(self.err("writing a tree"))?);
        }
        let root = written[&b""[..]];
        self.repo
            .find_tree(root)
            .map_err(self.err("reading the baseline's tree"))
    }

    /// Which of `paths` (relative, `/`-separated) hold something else in the
    /// folder `root` than in commit `at`: another content, a file where the
    /// commit has none, or none where it has one. Links are compared by
    /// target; nothing is followed, and a file over the size cap counts as
    /// changed unread.
    pub fn differs_from(
        &self,
        at: Oid,
        root: &Path,
        paths: &[String],
    ) -> Result<Vec<String>, ShadowError> {
        let tree = self.commit_tree(at)?;
        let root = DirHandle::open_root(root).map_err(|source| ShadowError::WorkDir {
            path: root.to_path_buf(),
            source,
        })?;
        let mut differ = Vec::new();
        for path in paths {
            let then = tree.get_path(Path::new(path)).ok().map(|e| e.id());
            if blob_at(&root, path.as_bytes()) != then {
                differ.push(path.clone());
            }
        }
        Ok(differ)
    }
}

/// The blob id of the file or link at `path` under `root`, if there is one
/// that can be read (over the size cap: an id no commit holds).
fn blob_at(root: &DirHandle, path: &[u8]) -> Option<Oid> {
    let mut parts: Vec<&[u8]> = path.split(|&b| b == b'/').collect();
    let name = parts.pop()?;
    let mut dir = root.open_dir(b".").ok()?;
    for part in parts {
        dir = dir.open_dir(part).ok()?;
    }
    let bytes = match dir.kind(name).ok()?? {
        Kind::Link => dir.read_link(name).ok()?,
        Kind::File => {
            let (file, _) = dir.open_regular(name).ok()?;
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(
                &mut std::io::Read::take(file, super::MAX_FILE_BYTES + 1),
                &mut bytes,
            )
            .ok()?;
            if bytes.len() as u64 > super::MAX_FILE_BYTES {
                return Some(Oid::ZERO_SHA1);
            }
            bytes
        }
        Kind::Dir | Kind::Special => return None,
    };
    Oid::hash_object(git2::ObjectType::Blob, &bytes).ok()
}

/// `dir/name` split at its last `/` (`dir` empty at the root).
fn split(path: &[u8]) -> (&[u8], &[u8]) {
    match path.iter().rposition(|&b| b == b'/') {
        Some(at) => (&path[..at], &path[at + 1..]),
        None => (&path[..0], path),
    }
}
