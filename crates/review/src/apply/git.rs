//! Running the host's `git` for the apply, and reading what it prints. Every
//! git ah runs on the host goes through [`Git::run`], which runs it without
//! the repository's hooks or fsmonitor program (a hook is a tracked script
//! the patch may just have changed) and with a minimal environment: nothing
//! of ah's own (API keys) and no `GIT_*` variable that moves where git reads
//! or writes. Output meant for parsing is asked for NUL-separated (`-z`);
//! `LC_ALL=C` keeps the messages that end up in errors in one language.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

/// Options before every git command: no hook runs (`/dev/null` holds no
/// hook, and `post-index-change`, `reference-transaction` and the commit
/// hooks all fire without a commit too), and no fsmonitor program (a
/// repository's config can name one that git runs on `status` and `add`).
const NO_PROGRAMS: [&str; 4] = [
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
];

/// Variables of ah's environment a host git gets, besides `LC_*`: where to
/// find programs and the user's config (their identity lives there), who the
/// user is and their time zone, identity variables, and what a signed commit
/// needs to reach the user's gpg or ssh agent.
const KEPT_VARIABLES: [&str; 15] = [
    "PATH",
    "HOME",
    "XDG_CONFIG_HOME",
    "USER",
    "LOGNAME",
    "TZ",
    "LANG",
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
    "EMAIL",
    "GNUPGHOME",
    "SSH_AUTH_SOCK",
    "GPG_TTY",
];

/// The variables of `vars` a host git may see (see [`KEPT_VARIABLES`]).
fn kept_env(vars: impl Iterator<Item = (OsString, OsString)>) -> Vec<(OsString, OsString)> {
    vars.filter(|(name, _)| {
        let name = name.to_string_lossy();
        KEPT_VARIABLES.contains(&name.as_ref()) || name.starts_with("LC_")
    })
    .collect()
}

/// The `git` program, plus environment for every call (tests use it to keep
/// the machine's git configuration out).
#[derive(Debug, Clone)]
pub(crate) struct Git {
    program: PathBuf,
    env: Vec<(OsString, OsString)>,
}

/// What one git call did.
#[derive(Debug)]
pub(crate) struct GitRun {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl GitRun {
    pub(crate) fn ok(&self) -> bool {
        self.status.success()
    }
}

impl Git {
    pub(crate) fn find() -> Result<Git, which::Error> {
        Ok(Git {
            program: which::which("git")?,
            env: Vec::new(),
        })
    }

    #[cfg(test)]
    pub(super) fn with_env(mut self, key: &str, value: impl Into<OsString>) -> Git {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Runs `git <args>` in `dir` with stdin closed, no hooks and no
    /// fsmonitor, in ah's environment reduced to [`kept_env`] plus
    /// `extra_env`.
    pub(crate) fn run<S: AsRef<OsStr>>(
        &self,
        dir: &Path,
        args: &[S],
        extra_env: &[(&str, &OsStr)],
    ) -> io::Result<GitRun> {
        let output = Command::new(&self.program)
            .args(NO_PROGRAMS)
            .args(args)
            .current_dir(dir)
            .env_clear()
            .envs(kept_env(std::env::vars_os()))
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .envs(extra_env.iter().copied())
            .env("LC_ALL", "C")
            .stdin(Stdio::null())
            .output()?;
        Ok(GitRun {
            status: output.status,
            stdout: output.stdout,
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        })
    }
}

/// Splits `-z` output into paths.
pub(super) fn nul_paths(stdout: &[u8]) -> Vec<PathBuf> {
    stdout
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| PathBuf::from(OsString::from_vec(p.to_vec())))
        .collect()
}

/// The paths of `git apply --numstat -z` output (`added\tremoved\tpath\0`),
/// relative to the project: `prefix` (the project's place in its repo) is cut.
pub(super) fn numstat_paths(stdout: &[u8], prefix: &[u8]) -> Vec<PathBuf> {
    stdout
        .split(|b| *b == 0)
        .filter_map(|record| record.splitn(3, |b| *b == b'\t').nth(2))
        .filter(|path| !path.is_empty())
        .map(|path| path.strip_prefix(prefix).unwrap_or(path))
        .map(|path| PathBuf::from(OsStr::from_bytes(path)))
        .collect()
}

/// `--directory=<prefix>` when the project is a subdirectory of its repo
/// (git reads patch paths from the repo root otherwise).
pub(super) fn directory_arg(prefix: &[u8]) -> Option<OsString> {
    if prefix.is_empty() {
        return None;
    }
    let mut arg = OsString::from("--directory=");
    arg.push(OsStr::from_bytes(prefix));
    Some(arg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numstat_paths_handle_binary_tabs_and_prefixes() {
        let out = b"-\t-\tsub/bin\x001\t2\tsub/we\tird name\x000\t0\tother\x00";
        let paths = numstat_paths(out, b"sub/");
        let expected: Vec<PathBuf> = ["bin", "we\tird name", "other"]
            .iter()
            .map(PathBuf::from)
            .collect();
        assert_eq!(paths, expected);
    }

    #[test]
    fn kept_env_drops_secrets_and_git_redirections() {
        let vars = [
            ("PATH", "/usr/bin"),
            ("HOME", "/home/u"),
            ("LC_TIME", "de_DE.UTF-8"),
            ("GIT_AUTHOR_NAME", "U"),
            ("ANTHROPIC_API_KEY", "sk-secret"),
            ("OPENAI_API_KEY", "sk-secret"),
            ("GIT_DIR", "/elsewhere/.git"),
            ("GIT_WORK_TREE", "/elsewhere"),
            ("GIT_INDEX_FILE", "/elsewhere/index"),
            ("GIT_OBJECT_DIRECTORY", "/elsewhere/objects"),
            ("GIT_CONFIG_GLOBAL", "/elsewhere/config"),
            ("GIT_CONFIG_PARAMETERS", "'core.hookspath'='/evil'"),
            ("GIT_EXEC_PATH", "/evil"),
            ("LD_PRELOAD", "/evil.so"),
        ];
        let kept = kept_env(vars.iter().map(|(k, v)| (k.into(), v.into())));
        let names: Vec<String> = kept
            .iter()
            .map(|(name, _)| name.to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["PATH", "HOME", "LC_TIME", "GIT_AUTHOR_NAME"]);
    }

    #[test]
    fn directory_arg_only_for_subdirectories() {
        assert_eq!(directory_arg(b""), None);
        assert_eq!(
            directory_arg(b"a b/"),
            Some(OsString::from("--directory=a b/"))
        );
    }
}
