//! Which program shows the patch at `--review ask`, chosen from what the
//! user alone sets, never from the project (a cloned repository's
//! `.git/config` or `.ah/config.toml` could name any program, and the pager
//! runs on the host, outside the sandbox). In order: `GIT_PAGER`, `PAGER`
//! (the user's environment), `[review] pager` of the user's own ah
//! configuration, `pager.diff` then `core.pager` of the user's own git
//! configuration (global or system files, [`ah_review::pager`]), then
//! `less -R`, else the patch is printed.
//!
//! A pager set for diffs (`[review] pager`, git's `pager.diff`) colours the
//! patch itself, as `delta` or `diff-so-fancy` do: it gets the patch as it
//! is (escaped for the terminal, uncoloured), unless its program is a plain
//! pager (`less`, `more`, `most`, `cat`, `pg`, `lv`). Any other pager gets
//! ah's coloured view.

use ah_review::pager::GitPager;

/// The program that shows the patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pager {
    /// A plain pager (a shell command): it gets ah's view of the patch,
    /// coloured when colours are on.
    Plain(String),
    /// A diff pager (a shell command): it gets the patch as it is, escaped
    /// for the terminal, and colours it itself.
    Diff(String),
    /// Nothing chosen: `less -R` where it is installed, else printed.
    Default,
    /// The user's git pages no diffs (`pager.diff = false`): printed.
    Off,
}

/// The pager, from the environment (`var`), the user's `[review] pager`
/// (`own`) and the user's git configuration (`git`, asked only when
/// nothing before it chose).
pub(crate) fn choose(
    var: impl Fn(&str) -> Option<String>,
    own: Option<&str>,
    git: impl FnOnce() -> Option<GitPager>,
) -> Pager {
    let set = |value: Option<String>| value.filter(|v| !v.trim().is_empty());
    if let Some(command) = set(var("GIT_PAGER")).or_else(|| set(var("PAGER"))) {
        return Pager::Plain(command);
    }
    if let Some(command) = set(own.map(str::to_string)) {
        return for_diffs(command);
    }
    match git() {
        Some(GitPager::Diff(command)) => for_diffs(command),
        Some(GitPager::Core(command)) => Pager::Plain(command),
        Some(GitPager::Off) => Pager::Off,
        None => Pager::Default,
    }
}

/// A pager set for diffs: a diff pager, unless its program only pages.
fn for_diffs(command: String) -> Pager {
    const PLAIN: [&str; 6] = ["less", "more", "most", "cat", "pg", "lv"];
    let program = command.split_whitespace().next().unwrap_or_default();
    let name = program.rsplit('/').next().unwrap_or(program);
    match PLAIN.contains(&name) {
        true => Pager::Plain(command),
        false => Pager::Diff(command),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        |name| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn the_environment_comes_first_then_ah_then_git() {
        let git = || Some(GitPager::Diff("delta".into()));
        let both = env(&[("GIT_PAGER", "less -S"), ("PAGER", "more")]);
        assert_eq!(choose(both, Some("x"), git), Pager::Plain("less -S".into()));
        let pager = env(&[("GIT_PAGER", " "), ("PAGER", "more")]);
        assert_eq!(choose(pager, None, git), Pager::Plain("more".into()));
        let asked = || -> Option<GitPager> { panic!("git is not asked") };
        assert_eq!(
            choose(env(&[]), Some("delta --side-by-side"), asked),
            Pager::Diff("delta --side-by-side".into())
        );
        assert_eq!(choose(env(&[]), None, git), Pager::Diff("delta".into()));
    }

    #[test]
    fn a_diff_pager_that_only_pages_gets_the_coloured_view() {
        let git = || None;
        assert_eq!(
            choose(env(&[]), Some("less -R"), git),
            Pager::Plain("less -R".into())
        );
        assert_eq!(
            choose(env(&[]), Some("/usr/bin/cat"), git),
            Pager::Plain("/usr/bin/cat".into())
        );
        let diff = || Some(GitPager::Diff("diff-so-fancy | less --tabs=4 -RF".into()));
        assert_eq!(
            choose(env(&[]), None, diff),
            Pager::Diff("diff-so-fancy | less --tabs=4 -RF".into())
        );
    }

    #[test]
    fn core_pager_is_plain_and_pager_diff_false_prints() {
        let core = || Some(GitPager::Core("delta".into()));
        assert_eq!(choose(env(&[]), None, core), Pager::Plain("delta".into()));
        assert_eq!(choose(env(&[]), None, || Some(GitPager::Off)), Pager::Off);
        assert_eq!(choose(env(&[]), None, || None), Pager::Default);
    }
}
