//! Helpers for tests of this crate and of the layers above it (feature
//! `testing`, which only dev-dependencies turn on): real git, isolated from
//! the machine's configuration.

use std::path::Path;
use std::process::Command;

/// Runs real git in `dir`, isolated from the machine's git configuration
/// and with a fixed identity; panics with git's stderr when it fails.
/// Returns its stdout, trimmed.
pub fn git(dir: &Path, args: &[&str]) -> String {
    String::from_utf8_lossy(&git_raw(dir, args))
        .trim()
        .to_string()
}

/// [`git`]'s stdout as git wrote it, byte for byte (a patch, say).
pub fn git_raw(dir: &Path, args: &[&str]) -> Vec<u8> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .unwrap_or_else(|e| panic!("cannot run git {args:?}: {e}"));
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}
