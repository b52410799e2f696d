//! The pager the user set in their own git configuration for diffs, for
//! the review to show a patch in: `pager.diff`, then `core.pager`, each
//! from the user's global file (`~/.gitconfig`, `$XDG_CONFIG_HOME/git/config`
//! or `$GIT_CONFIG_GLOBAL`), then from the system's (`/etc/gitconfig`).
//!
//! Never from a repository's: a cloned repository's `.git/config` (or a
//! file it includes) can name any program as a pager, and the project is
//! hostile. So git runs through the hook-free runner from `/`, with
//! `GIT_DIR=/dev/null` (which is no repository: git looks for none, in the
//! project or above it) and `--global` or `--system`, which read that one
//! file; `--includes` follows the includes of the user's own files. The
//! variables that point git at the user's own files (`GIT_CONFIG_GLOBAL`,
//! `GIT_CONFIG_SYSTEM`, `GIT_CONFIG_NOSYSTEM`) come from ah's environment
//! as the user set them.

use std::ffi::OsString;
use std::path::Path;

use crate::apply::git::Git;

/// What the user's git says about paging diffs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GitPager {
    /// `pager.diff` names a program: a pager for diffs.
    Diff(String),
    /// `pager.diff` is false: diffs are not paged.
    Off,
    /// `core.pager` names a program: git's pager for everything.
    Core(String),
}

/// The variables that say where the user's own git files are.
const USER_FILES: [&str; 3] = [
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "GIT_CONFIG_NOSYSTEM",
];

/// The user's git pager for diffs, or `None` when their global and system
/// files set none (or git cannot be run).
pub fn users_git_pager() -> Option<GitPager> {
    let git = Git::find().ok()?;
    let get = |key: &str| read(&git, key);
    match get("pager.diff").as_deref().map(str::trim) {
        Some(value) if is_false(value) => return Some(GitPager::Off),
        Some(value) if !value.is_empty() && !is_true(value) => {
            return Some(GitPager::Diff(value.to_string()));
        }
        _ => {}
    }
    get("core.pager")
        .filter(|value| !value.trim().is_empty())
        .map(GitPager::Core)
}

/// `key` from the user's global file, else from the system's.
fn read(git: &Git, key: &str) -> Option<String> {
    let user_files: Vec<(&str, OsString)> = USER_FILES
        .iter()
        .filter_map(|name| Some((*name, std::env::var_os(name)?)))
        .collect();
    let mut env: Vec<(&str, &std::ffi::OsStr)> = user_files
        .iter()
        .map(|(name, value)| (*name, value.as_os_str()))
        .collect();
    env.push(("GIT_DIR", "/dev/null".as_ref()));
    ["--global", "--system"].iter().find_map(|scope| {
        let args = ["config", scope, "--includes", "--get", key];
        let run = git.run(Path::new("/"), &args, &env).ok()?;
        run.ok().then(|| {
            String::from_utf8_lossy(&run.stdout)
                .trim_end_matches('\n')
                .to_string()
        })
    })
}

fn is_true(value: &str) -> bool {
    ["true", "yes", "on", "1"]
        .iter()
        .any(|word| value.eq_ignore_ascii_case(word))
}

fn is_false(value: &str) -> bool {
    ["false", "no", "off", "0"]
        .iter()
        .any(|word| value.eq_ignore_ascii_case(word))
}
