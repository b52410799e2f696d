//! The files ah reads for itself, in one place: the project's (its
//! `.ah/config.toml`, prompts in `.ah/sys/`, instruction files, skills,
//! commands, agent and tool files), read as hostile through
//! [`ah_tools::fs_beneath::own_file`] — no link out of the project, nothing
//! the run's read policy withholds, no `.git` folder, no special file, a
//! size cap — and the user's own (`~/.config/ah/…`), read with the same
//! file-type and size rules but links followed. Every error names the file.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ah_record::policy::Policy;
use ah_tools::fs_beneath::dir::Kind;
use ah_tools::fs_beneath::own_file::{self, Tree};

/// The cap of configuration files (`config.toml`).
pub const CONFIG_CAP: u64 = 1024 * 1024;
/// The cap of prompts, skills and commands.
pub const PROMPT_CAP: u64 = 256 * 1024;
/// The cap of agent and tool files.
pub const SMALL_CAP: u64 = 64 * 1024;

/// A project's files as ah reads them for itself, judged by the run's read
/// policy. Cheap to clone.
#[derive(Clone, Debug)]
pub struct ProjectFiles {
    /// The project's canonical folder.
    project: PathBuf,
    policy: Arc<Policy>,
}

impl ProjectFiles {
    /// The files of `project` (a canonical path), refused where `policy`
    /// withholds them.
    pub fn new(project: &Path, policy: &Policy) -> ProjectFiles {
        ProjectFiles {
            project: project.to_path_buf(),
            policy: Arc::new(policy.clone()),
        }
    }

    /// The files of `project` under its own policy (the built-in one and
    /// its `.ah/policy.toml`), for commands that take no policy flags.
    pub fn of_project(project: &Path) -> anyhow::Result<ProjectFiles> {
        let policy = Policy::load(project, None, &[], &[])?;
        Ok(ProjectFiles::new(project, &policy))
    }

    /// The project's folder.
    pub fn project(&self) -> &Path {
        &self.project
    }

    /// The project's `.ah` folder.
    pub fn ah_dir(&self) -> PathBuf {
        self.project.join(".ah")
    }

    /// The text of `rel` (relative to the project), at most `cap` bytes;
    /// `None` when it does not exist.
    pub fn read(&self, rel: &Path, cap: u64) -> Result<Option<String>, String> {
        let withheld = |path: &Path| self.policy.withheld_by(path).is_some();
        Tree::new(&self.project, &withheld)
            .read_text(rel, cap)
            .map_err(|err| err.to_string())
    }

    /// [`ProjectFiles::read`] in `tree`, the project or a folder holding
    /// it (the repository whose instruction files apply), as bytes.
    pub fn read_bytes_in(
        &self,
        tree: &Path,
        rel: &Path,
        cap: u64,
    ) -> Result<Option<Vec<u8>>, String> {
        let withheld = |path: &Path| self.policy.withheld_by(path).is_some();
        Tree::new(tree, &withheld)
            .read(rel, cap)
            .map_err(|err| err.to_string())
    }

    /// The names of the files and links in the project's folder `rel`
    /// (folders and special files left out), sorted.
    fn names(&self, rel: &Path) -> Result<Vec<(String, Kind)>, String> {
        let withheld = |path: &Path| self.policy.withheld_by(path).is_some();
        let entries = Tree::new(&self.project, &withheld)
            .list(rel)
            .map_err(|err| err.to_string())?;
        Ok(utf8_names(entries))
    }
}

/// A folder of ah's files: one of the project's (`.ah/agents`), read as
/// hostile, or one of the user's own (`~/.config/ah/agents`).
#[derive(Clone, Debug)]
pub enum Folder {
    Project { files: ProjectFiles, rel: PathBuf },
    User(PathBuf),
}

impl Folder {
    /// The project's folder `.ah/<name>` and the user's `<global>/<name>`,
    /// in that order (the project's files hide the user's of one name).
    pub fn both(files: &ProjectFiles, global: Option<&Path>, name: &str) -> Vec<Folder> {
        let mut folders = vec![Folder::Project {
            files: files.clone(),
            rel: Path::new(".ah").join(name),
        }];
        folders.extend(global.map(|dir| Folder::User(dir.join(name))));
        folders
    }

    /// Where a name in this folder is, for people.
    pub fn shown(&self, name: &str) -> PathBuf {
        match self {
            Folder::Project { files, rel } => files.project.join(rel).join(name),
            Folder::User(dir) => dir.join(name),
        }
    }

    /// Where a name in this folder is, for the model: its path in the
    /// project, or a neutral name for the user's folder (`what`, e.g.
    /// `tools`); never a path of the host's.
    pub fn for_model(&self, what: &str, name: &str) -> String {
        match self {
            Folder::Project { rel, .. } => rel.join(name).display().to_string(),
            Folder::User(_) => format!("the user's own {what} folder ({name})"),
        }
    }

    /// The entries of the folder with their kinds (a link's own), sorted;
    /// empty when there is no such folder.
    pub fn entries(&self) -> Result<Vec<(String, Kind)>, String> {
        match self {
            Folder::Project { files, rel } => files.names(rel),
            Folder::User(dir) => {
                let Ok(entries) = std::fs::read_dir(dir) else {
                    return Ok(Vec::new());
                };
                let mut listed = Vec::new();
                for entry in entries.flatten() {
                    let kind = match entry.file_type() {
                        Ok(kind) if kind.is_symlink() => Kind::Link,
                        Ok(kind) if kind.is_dir() => Kind::Dir,
                        Ok(kind) if kind.is_file() => Kind::File,
                        _ => Kind::Special,
                    };
                    listed.push((entry.file_name().as_bytes().to_vec(), kind));
                }
                listed.sort_by(|a, b| a.0.cmp(&b.0));
                Ok(utf8_names(listed))
            }
        }
    }

    /// The text of `rel` in this folder, at most `cap` bytes; `None` when
    /// it does not exist. The error names the file.
    pub fn read(&self, rel: &str, cap: u64) -> Result<Option<String>, String> {
        match self {
            Folder::Project { files, rel: folder } => files.read(&folder.join(rel), cap),
            Folder::User(dir) => read_user(&dir.join(rel), cap),
        }
    }
}

/// A file of the user's own (links followed), at most `cap` bytes;
/// `None` when it does not exist. The error names the file.
pub fn read_user(path: &Path, cap: u64) -> Result<Option<String>, String> {
    own_file::read_trusted_text(path, cap).map_err(|err| err.to_string())
}

/// The entries whose names are UTF-8 (ah's file names are), as strings.
fn utf8_names(entries: Vec<(Vec<u8>, Kind)>) -> Vec<(String, Kind)> {
    entries
        .into_iter()
        .filter_map(|(name, kind)| {
            let name = OsStr::from_bytes(&name).to_str()?.to_string();
            Some((name, kind))
        })
        .collect()
}
