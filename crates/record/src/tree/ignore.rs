//! The `.gitignore` rules of a tree the model controls, read without
//! trusting the files that hold them.
//!
//! A rules file is honoured only when it is a regular file (a link, FIFO,
//! socket or device named `.gitignore` is never opened, as git itself does
//! not follow a linked `.gitignore`) of at most [`MAX_RULES_BYTES`]; it is
//! read through an open folder handle, so it cannot be swapped for a link
//! to a host file. Rules are matched as git matches them: the deepest
//! folder's file decides first, the last matching line of a file wins, and
//! nothing under an ignored folder can be taken back.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::rc::Rc;

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

use ah_tools::fs_beneath::dir::{DirHandle, Kind};

/// The largest `.gitignore` (or `.gitattributes`) that is honoured: 1 MiB.
pub const MAX_RULES_BYTES: u64 = 1024 * 1024;

/// File names whose content git obeys when it reads the tree.
pub const RULES_FILES: [&[u8]; 2] = [b".gitignore", b".gitattributes"];

/// What one folder's `.gitignore` gave.
pub enum Rules {
    /// No file, or one without rules.
    None,
    Loaded(Gitignore),
    /// A regular file over [`MAX_RULES_BYTES`]: not honoured.
    TooLarge(u64),
}

/// Reads the `.gitignore` of the open folder `dir`.
pub fn load(dir: &DirHandle) -> std::io::Result<Rules> {
    if dir.kind(b".gitignore")? != Some(Kind::File) {
        return Ok(Rules::None);
    }
    let (file, stat) = match dir.open_regular(b".gitignore") {
        Ok(opened) => opened,
        // Replaced by something else since the look: not honoured.
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => return Ok(Rules::None),
        Err(e) => return Err(e),
    };
    let size = stat.st_size.max(0) as u64;
    if size > MAX_RULES_BYTES {
        return Ok(Rules::TooLarge(size));
    }
    let mut text = Vec::new();
    file.take(MAX_RULES_BYTES + 1).read_to_end(&mut text)?;
    if text.len() as u64 > MAX_RULES_BYTES {
        return Ok(Rules::TooLarge(text.len() as u64));
    }
    Ok(parse(&text).map_or(Rules::None, Rules::Loaded))
}

/// The rules of one file's text; `None` when it has none. A line that is
/// not a valid pattern is skipped, as git skips it.
fn parse(text: &[u8]) -> Option<Gitignore> {
    let mut builder = GitignoreBuilder::new(".");
    let mut any = false;
    for line in text.split(|&b| b == b'\n') {
        let line = String::from_utf8_lossy(line);
        if builder.add_line(None, &line).is_ok() {
            any = true;
        }
    }
    let rules = builder.build().ok()?;
    (any && !rules.is_empty()).then_some(rules)
}

/// The rules in force in one folder: its own and its parents'.
pub struct Chain {
    /// The folder, relative to the root (empty for the root).
    dir: Vec<u8>,
    rules: Option<Gitignore>,
    parent: Option<Rc<Chain>>,
}

impl Chain {
    /// The root's chain.
    pub fn root(rules: Option<Gitignore>) -> Rc<Chain> {
        Rc::new(Chain {
            dir: Vec::new(),
            rules,
            parent: None,
        })
    }

    /// The chain of the folder `dir` below this one.
    pub fn child(self: &Rc<Chain>, dir: Vec<u8>, rules: Option<Gitignore>) -> Rc<Chain> {
        Rc::new(Chain {
            dir,
            rules,
            parent: Some(Rc::clone(self)),
        })
    }

    /// Whether `path` (relative to the root, in this chain's folder) is
    /// ignored by the rules of this folder or its parents.
    pub fn ignores(&self, path: &[u8], is_dir: bool) -> bool {
        let mut link = Some(self);
        while let Some(chain) = link {
            if let Some(rules) = &chain.rules {
                let rel = relative(path, &chain.dir);
                match rules.matched(Path::new(OsStr::from_bytes(rel)), is_dir) {
                    Match::Ignore(_) => return true,
                    Match::Whitelist(_) => return false,
                    Match::None => {}
                }
            }
            link = chain.parent.as_deref();
        }
        false
    }
}

/// `path` relative to the folder `dir` (both relative to the root).
fn relative<'p>(path: &'p [u8], dir: &[u8]) -> &'p [u8] {
    if dir.is_empty() {
        return path;
    }
    path.strip_prefix(dir)
        .and_then(|rest| rest.strip_prefix(b"/"))
        .unwrap_or(path)
}

/// Answers "is this path ignored?" for any path of a tree, loading each
/// folder's rules once, on demand. For trees that are not being changed
/// while asked (a work copy being restored before its sandbox starts).
pub struct IgnoreCheck<'r> {
    root: &'r DirHandle,
    /// Each folder's chain; `None` for a path that is not a folder.
    chains: HashMap<Vec<u8>, Option<Rc<Chain>>>,
}

impl<'r> IgnoreCheck<'r> {
    pub fn new(root: &'r DirHandle) -> IgnoreCheck<'r> {
        IgnoreCheck {
            root,
            chains: HashMap::new(),
        }
    }

    /// Whether `path` is ignored: by its folders' rules, or because a
    /// folder above it is. A path under something that is not a folder in
    /// the tree is judged by the rules above that point.
    pub fn is_ignored(&mut self, path: &[u8], is_dir: bool) -> std::io::Result<bool> {
        let parts: Vec<&[u8]> = path
            .split(|&b| b == b'/')
            .filter(|p| !p.is_empty())
            .collect();
        let mut chain = self.chain(&[])?;
        for depth in 1..parts.len() {
            let dir = parts[..depth].join(&b'/');
            let Some(parent) = chain else { break };
            if parent.ignores(&dir, true) {
                return Ok(true);
            }
            chain = self.chain(&dir)?.or(Some(parent));
        }
        Ok(chain.is_some_and(|c| c.ignores(&parts.join(&b'/'), is_dir)))
    }

    fn chain(&mut self, dir: &[u8]) -> std::io::Result<Option<Rc<Chain>>> {
        if let Some(known) = self.chains.get(dir) {
            return Ok(known.clone());
        }
        let handle = match self.open(dir) {
            Ok(handle) => handle,
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => {
                self.chains.insert(dir.to_vec(), None);
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        let rules = match load(&handle)? {
            Rules::Loaded(rules) => Some(rules),
            Rules::None | Rules::TooLarge(_) => None,
        };
        let chain = match dir.iter().rposition(|&b| b == b'/') {
            _ if dir.is_empty() => Chain::root(rules),
            at => {
                let parent_dir = &dir[..at.unwrap_or(0)];
                let parent = self.chain(parent_dir)?.unwrap_or_else(|| Chain::root(None));
                parent.child(dir.to_vec(), rules)
            }
        };
        self.chains.insert(dir.to_vec(), Some(Rc::clone(&chain)));
        Ok(Some(chain))
    }

    fn open(&self, dir: &[u8]) -> std::io::Result<DirHandle> {
        let mut handle = self.root.open_dir(b".")?;
        for part in dir.split(|&b| b == b'/').filter(|p| !p.is_empty()) {
            handle = handle.open_dir(part)?;
        }
        Ok(handle)
    }
}
