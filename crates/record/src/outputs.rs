//! Build and cache outputs: files a run's commands leave behind (`*.pyc`,
//! `.pytest_cache/`, `node_modules/`, `target/`) that nobody means to
//! commit. A project with a `.gitignore` already keeps them out of the
//! shadow repo; one without (or with a short one) would get them in its
//! patch, where a single binary `*.pyc` makes `--review auto` refuse the
//! lot.
//!
//! They are still recorded, so the write policy checks them like any other
//! path and they are copied out as artifacts; only the session patch leaves
//! them out, and only files the run added. A pattern naming a folder
//! (`build/`) counts only where the baseline had no such folder: a project
//! that keeps sources in `build/` gets its new files there in the patch.
//! Patterns are written as in a `.gitignore` (`name/` matches folders only,
//! a pattern without a `/` matches at any depth, a leading `/` anchors it at
//! the work root); the list is `[outputs] exclude` of the policy.

use std::path::Path;

use ignore::gitignore::{Gitignore, GitignoreBuilder};

/// A pattern that is not a valid `.gitignore` pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadPattern {
    pub pattern: String,
    pub message: String,
}

/// The compiled `[outputs] exclude` list.
#[derive(Debug, Clone)]
pub struct Outputs {
    patterns: Vec<String>,
    rules: Gitignore,
}

impl Outputs {
    /// Compiles `patterns` (`.gitignore` lines; blank lines and `#`
    /// comments match nothing).
    pub fn new(patterns: &[String]) -> Result<Outputs, BadPattern> {
        let mut builder = GitignoreBuilder::new(".");
        for pattern in patterns {
            builder.add_line(None, pattern).map_err(|err| BadPattern {
                pattern: pattern.clone(),
                message: err.to_string(),
            })?;
        }
        let rules = builder.build().map_err(|err| BadPattern {
            pattern: patterns.join(", "),
            message: err.to_string(),
        })?;
        Ok(Outputs {
            patterns: patterns.to_vec(),
            rules,
        })
    }

    /// A list that matches nothing: every added file is in the patch.
    pub fn none() -> Outputs {
        Outputs {
            patterns: Vec::new(),
            rules: Gitignore::empty(),
        }
    }

    /// The patterns, as given.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    /// Whether `path` (relative to the work root, `/` as separator), a file
    /// the run added, is an output to leave out of the patch: it matches a
    /// pattern itself, or one of its folders matches one and
    /// `baseline_has_dir` says the baseline had no such folder.
    pub fn is_output(&self, path: &str, baseline_has_dir: &dyn Fn(&str) -> bool) -> bool {
        if self.patterns.is_empty() {
            return false;
        }
        let mut end = 0;
        while let Some(at) = path[end..].find('/') {
            let dir = &path[..end + at];
            end += at + 1;
            if self.rules.matched(Path::new(dir), true).is_ignore() && !baseline_has_dir(dir) {
                return true;
            }
        }
        self.rules.matched(Path::new(path), false).is_ignore()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outputs(patterns: &[&str]) -> Outputs {
        let patterns: Vec<String> = patterns.iter().map(|p| p.to_string()).collect();
        Outputs::new(&patterns).unwrap()
    }

    const NO_DIRS: &dyn Fn(&str) -> bool = &|_| false;

    #[test]
    fn file_and_folder_patterns_match_at_any_depth() {
        let list = outputs(&["__pycache__/", "*.pyc", ".pytest_cache/"]);
        assert!(list.is_output("pkg/__pycache__/m.cpython-311.pyc", NO_DIRS));
        assert!(list.is_output("__pycache__/notes.txt", NO_DIRS));
        assert!(list.is_output("a/b/stale.pyc", NO_DIRS));
        assert!(list.is_output(".pytest_cache/v/cache/lastfailed", NO_DIRS));
        assert!(!list.is_output("pkg/m.py", NO_DIRS));
        assert!(!list.is_output("pyc", NO_DIRS));
    }

    #[test]
    fn a_folder_pattern_never_matches_a_file_of_that_name() {
        // A `build` script is source, whatever `build/` outputs are.
        let list = outputs(&["build/", "dist/"]);
        assert!(!list.is_output("build", NO_DIRS));
        assert!(!list.is_output("scripts/dist", NO_DIRS));
        assert!(list.is_output("build/lib/m.so", NO_DIRS));
    }

    #[test]
    fn a_folder_the_baseline_had_is_the_projects() {
        let list = outputs(&["build/", "*.o"]);
        let tracked = |dir: &str| dir == "build";
        assert!(!list.is_output("build/new.c", &tracked));
        // A file pattern still matches inside it, and a deeper output
        // folder the baseline lacked still counts.
        assert!(list.is_output("build/new.o", &tracked));
        assert!(list.is_output("build/sub/build/x.c", &|dir: &str| dir == "build"));
    }

    #[test]
    fn anchored_and_negated_patterns_work_as_in_gitignore() {
        let list = outputs(&["/target/", "*.log", "!keep.log", "# a comment", ""]);
        assert!(list.is_output("target/debug/ah", NO_DIRS));
        assert!(!list.is_output("crates/x/target/debug/x", NO_DIRS));
        assert!(list.is_output("run.log", NO_DIRS));
        assert!(!list.is_output("keep.log", NO_DIRS));
    }

    #[test]
    fn an_empty_list_matches_nothing() {
        assert!(!Outputs::none().is_output("__pycache__/m.pyc", NO_DIRS));
        assert!(!outputs(&[]).is_output("x.pyc", NO_DIRS));
    }

    #[test]
    fn a_bad_pattern_is_named() {
        let err = Outputs::new(&["[z-a".to_string()]).unwrap_err();
        assert_eq!(err.pattern, "[z-a");
    }
}
