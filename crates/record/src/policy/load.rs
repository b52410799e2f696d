//! Builds a `Policy` from its layers: the built-in defaults, the project's
//! `.ah/policy.toml`, `--policy FILE`, then command-line globs. A file replaces
//! each list it sets and keeps the rest, except `[review] restricted`, which a
//! file can only add to (the built-in list is a floor: a project policy that
//! restricts one more path must not drop every CI and build file from it);
//! command-line globs are appended. The project's file (which a cloned
//! repository ships) can only add to the read policy too: its `[read] deny`
//! globs are added, its `[read] allow` is ignored and said so
//! ([`Policy::ignored`]); only the user's `--policy FILE` may let a withheld
//! file into the sandbox. The project's file is read as ah reads every
//! project file ([`ah_tools::fs_beneath::own_file`], judged by the built-in
//! read rules), the user's with links followed; both bounded. Every
//! glob is compiled as it is read, so an error names the layer and the line.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use globset::{Glob, GlobBuilder, GlobSetBuilder};
use serde::Deserialize;
use toml::Spanned;

use super::{
    PROJECT_POLICY_FILE, Policy, ReadRules, ReviewRules, RuleSet, SandboxRules, WriteRules,
};
use crate::outputs::Outputs;
use ah_sandbox::egress::allow::Rule as NetworkRule;
use ah_tools::fs_beneath::own_file::{self, Tree};

/// The built-in policy, embedded in the binary.
const BUILTIN: &str = include_str!("../../../../policy/default.toml");

/// The largest policy file read.
const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// Where a rule came from, for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    Builtin,
    File(PathBuf),
    CommandLine,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Builtin => f.write_str("the built-in policy"),
            Origin::File(path) => write!(f, "{}", path.display()),
            Origin::CommandLine => f.write_str("the command line"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("cannot use policy file {why}; fix or remove it")]
    Read { why: String },

    #[error(
        "policy file {origin} is not valid TOML for a policy: {message}\n\
         the keys are [read] deny, allow; [write] allow, deny; \
         [review] max_lines, max_files, max_bytes, restricted; \
         [network] allow; [sandbox] env; [outputs] exclude"
    )]
    Parse { origin: Origin, message: String },

    #[error("bad glob {glob:?} in {origin}{}: {message}; fix or remove it", line_suffix(*.line))]
    Glob {
        origin: Origin,
        line: Option<usize>,
        glob: String,
        message: String,
    },

    #[error("bad output pattern {pattern:?} in {origin}{}: {message}; fix or remove it", line_suffix(*.line))]
    Output {
        origin: Origin,
        line: Option<usize>,
        pattern: String,
        message: String,
    },

    #[error("cannot compile the output patterns together: {0}; use fewer or simpler patterns")]
    Outputs(String),

    #[error("bad network rule in {origin}{}: {message}", line_suffix(*.line))]
    Network {
        origin: Origin,
        line: Option<usize>,
        message: String,
    },

    #[error("cannot compile the policy globs together: {0}; use fewer or simpler globs")]
    Build(globset::Error),
}

fn line_suffix(line: Option<usize>) -> String {
    line.map(|line| format!(" (line {line})"))
        .unwrap_or_default()
}

/// One policy file as written: every key optional, no unknown keys.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Layer {
    read: Option<ReadLayer>,
    write: Option<WriteLayer>,
    review: Option<ReviewLayer>,
    network: Option<NetworkLayer>,
    sandbox: Option<SandboxLayer>,
    outputs: Option<OutputsLayer>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OutputsLayer {
    exclude: Option<Vec<Spanned<String>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NetworkLayer {
    allow: Option<Vec<Spanned<String>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SandboxLayer {
    env: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadLayer {
    deny: Option<Vec<Spanned<String>>>,
    allow: Option<Vec<Spanned<String>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteLayer {
    allow: Option<Vec<Spanned<String>>>,
    deny: Option<Vec<Spanned<String>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReviewLayer {
    max_lines: Option<u64>,
    max_files: Option<u64>,
    max_bytes: Option<u64>,
    restricted: Option<Vec<Spanned<String>>>,
}

/// A list of globs, compiled as they are added.
struct Rules {
    case_insensitive: bool,
    globs: Vec<(String, Glob)>,
}

impl Rules {
    fn new(case_insensitive: bool) -> Self {
        Rules {
            case_insensitive,
            globs: Vec::new(),
        }
    }

    fn push(
        &mut self,
        pattern: &str,
        origin: &Origin,
        line: Option<usize>,
    ) -> Result<(), PolicyError> {
        let glob = GlobBuilder::new(pattern)
            .literal_separator(true)
            .case_insensitive(self.case_insensitive)
            .build()
            .map_err(|err| PolicyError::Glob {
                origin: origin.clone(),
                line,
                glob: pattern.to_string(),
                message: err.kind().to_string(),
            })?;
        self.globs.push((pattern.to_string(), glob));
        Ok(())
    }

    /// Replaces the list with the globs a file sets.
    fn replace(
        &mut self,
        source: &str,
        origin: &Origin,
        globs: Vec<Spanned<String>>,
    ) -> Result<(), PolicyError> {
        self.globs.clear();
        self.extend(source, origin, globs)
    }

    /// Appends the globs a file sets.
    fn extend(
        &mut self,
        source: &str,
        origin: &Origin,
        globs: Vec<Spanned<String>>,
    ) -> Result<(), PolicyError> {
        for glob in globs {
            let line = line_of(source, glob.span().start);
            self.push(glob.get_ref(), origin, Some(line))?;
        }
        Ok(())
    }

    fn patterns(&self) -> Vec<String> {
        self.globs
            .iter()
            .map(|(pattern, _)| pattern.clone())
            .collect()
    }

    fn compile(self) -> Result<RuleSet, PolicyError> {
        let mut builder = GlobSetBuilder::new();
        let mut patterns = Vec::with_capacity(self.globs.len());
        for (pattern, glob) in self.globs {
            builder.add(glob);
            patterns.push(pattern);
        }
        let set = builder.build().map_err(PolicyError::Build)?;
        Ok(RuleSet { patterns, set })
    }
}

/// The policy being merged, layer by layer.
struct Draft {
    // Read deny globs ignore letter case as write deny globs do; read allow
    // globs, like write allow globs, are exact.
    read_deny: Rules,
    read_allow: Rules,
    allow: Rules,
    // Deny and restricted globs ignore letter case: on a case-insensitive host
    // file system `.GIT/config` is `.git/config`.
    deny: Rules,
    restricted: Rules,
    max_lines: u64,
    max_files: u64,
    max_bytes: u64,
    sandbox: SandboxRules,
    /// `[outputs] exclude`, each pattern checked as it was read.
    outputs: Vec<String>,
    /// What the project's file set that it may not (see [`Policy::ignored`]).
    ignored: Vec<String>,
}

impl Draft {
    /// Adds a network rule, checked as it is read.
    fn push_network(
        &mut self,
        rule: &str,
        origin: &Origin,
        line: Option<usize>,
    ) -> Result<(), PolicyError> {
        NetworkRule::parse(rule).map_err(|err| PolicyError::Network {
            origin: origin.clone(),
            line,
            message: err.to_string(),
        })?;
        self.sandbox.network_allow.push(rule.to_string());
        Ok(())
    }

    /// Applies one layer; a `project`'s file only adds to the read rules.
    fn apply(&mut self, source: &str, origin: &Origin, project: bool) -> Result<(), PolicyError> {
        let layer: Layer = toml::from_str(source).map_err(|err| PolicyError::Parse {
            origin: origin.clone(),
            message: err.to_string().trim_end().to_string(),
        })?;
        if let Some(read) = layer.read {
            match (read.deny, project) {
                (Some(deny), true) => self.read_deny.extend(source, origin, deny)?,
                (Some(deny), false) => self.read_deny.replace(source, origin, deny)?,
                (None, _) => {}
            }
            match (read.allow, project) {
                (Some(allow), true) if !allow.is_empty() => {
                    let globs: Vec<&str> =
                        allow.iter().map(|glob| glob.get_ref().as_str()).collect();
                    self.ignored
                        .push(format!("[read] allow = {globs:?} (in {origin})"));
                }
                (Some(allow), false) => self.read_allow.replace(source, origin, allow)?,
                _ => {}
            }
        }
        if let Some(write) = layer.write {
            if let Some(allow) = write.allow {
                self.allow.replace(source, origin, allow)?;
            }
            if let Some(deny) = write.deny {
                self.deny.replace(source, origin, deny)?;
            }
        }
        if let Some(review) = layer.review {
            if let Some(max_lines) = review.max_lines {
                self.max_lines = max_lines;
            }
            if let Some(max_files) = review.max_files {
                self.max_files = max_files;
            }
            if let Some(max_bytes) = review.max_bytes {
                self.max_bytes = max_bytes;
            }
            if let Some(restricted) = review.restricted {
                self.restricted.extend(source, origin, restricted)?;
            }
        }
        if let Some(allow) = layer.network.and_then(|network| network.allow) {
            self.sandbox.network_allow.clear();
            for rule in allow {
                let line = line_of(source, rule.span().start);
                self.push_network(rule.get_ref(), origin, Some(line))?;
            }
        }
        if let Some(env) = layer.sandbox.and_then(|sandbox| sandbox.env) {
            self.sandbox.env = env;
        }
        if let Some(exclude) = layer.outputs.and_then(|outputs| outputs.exclude) {
            self.outputs.clear();
            for pattern in exclude {
                let line = line_of(source, pattern.span().start);
                let pattern = pattern.into_inner();
                // Checked one by one, so an error names its file and line.
                Outputs::new(std::slice::from_ref(&pattern)).map_err(|err| {
                    PolicyError::Output {
                        origin: origin.clone(),
                        line: Some(line),
                        pattern: err.pattern,
                        message: err.message,
                    }
                })?;
                self.outputs.push(pattern);
            }
        }
        Ok(())
    }

    /// Applies the project's own file, if it has one, read as hostile
    /// under `builtin`'s read rules.
    fn apply_project(&mut self, project: &Path, builtin: &Policy) -> Result<(), PolicyError> {
        let withheld = |rel: &Path| builtin.withheld_by(rel).is_some();
        let read = Tree::new(project, &withheld)
            .read_text(Path::new(PROJECT_POLICY_FILE), MAX_FILE_BYTES)
            .map_err(|err| PolicyError::Read {
                why: err.to_string(),
            })?;
        match read {
            Some(source) => self.apply(
                &source,
                &Origin::File(project.join(PROJECT_POLICY_FILE)),
                true,
            ),
            None => Ok(()),
        }
    }

    /// Applies the user's `--policy FILE`, which must exist.
    fn apply_user(&mut self, path: &Path) -> Result<(), PolicyError> {
        let read =
            own_file::read_trusted_text(path, MAX_FILE_BYTES).map_err(|err| PolicyError::Read {
                why: err.to_string(),
            })?;
        let Some(source) = read else {
            return Err(PolicyError::Read {
                why: format!("{}: it does not exist", path.display()),
            });
        };
        self.apply(&source, &Origin::File(path.to_path_buf()), false)
    }

    fn finish(self) -> Result<Policy, PolicyError> {
        let read = ReadRules {
            deny: self.read_deny.patterns(),
            allow: self.read_allow.patterns(),
        };
        let write = WriteRules {
            allow: self.allow.patterns(),
            deny: self.deny.patterns(),
        };
        let review = ReviewRules {
            max_lines: self.max_lines,
            max_files: self.max_files,
            max_bytes: self.max_bytes,
            restricted: self.restricted.patterns(),
        };
        let outputs =
            Outputs::new(&self.outputs).map_err(|err| PolicyError::Outputs(err.message))?;
        Ok(Policy {
            read,
            write,
            review,
            sandbox: self.sandbox,
            outputs,
            ignored: self.ignored,
            read_deny: self.read_deny.compile()?,
            read_allow: self.read_allow.compile()?,
            allow: self.allow.compile()?,
            deny: self.deny.compile()?,
            restricted: self.restricted.compile()?,
        })
    }
}

impl Policy {
    /// Merges the layers: built-in defaults, then `<project_dir>/.ah/policy.toml`
    /// if present, then `policy_file` (which must exist), each replacing the
    /// lists it sets (adding to the restricted list); then `extra_allow` and
    /// `extra_deny` are appended.
    pub fn load(
        project_dir: &Path,
        policy_file: Option<&Path>,
        extra_allow: &[String],
        extra_deny: &[String],
    ) -> Result<Policy, PolicyError> {
        Policy::merge(Some(project_dir), policy_file, extra_allow, extra_deny)
    }

    /// The built-in policy alone, made once per process.
    pub fn builtin() -> Result<&'static Policy, PolicyError> {
        static BUILT: OnceLock<Result<Policy, String>> = OnceLock::new();
        BUILT
            .get_or_init(|| Policy::merge(None, None, &[], &[]).map_err(|err| err.to_string()))
            .as_ref()
            .map_err(|message| PolicyError::Parse {
                origin: Origin::Builtin,
                message: message.clone(),
            })
    }

    /// [`Policy::load`] without the project's own file: what the built-in
    /// policy and the user's file and flags make it, to tell what the
    /// project's file changes.
    pub fn load_without_project(
        policy_file: Option<&Path>,
        extra_allow: &[String],
        extra_deny: &[String],
    ) -> Result<Policy, PolicyError> {
        Policy::merge(None, policy_file, extra_allow, extra_deny)
    }

    fn merge(
        project_dir: Option<&Path>,
        policy_file: Option<&Path>,
        extra_allow: &[String],
        extra_deny: &[String],
    ) -> Result<Policy, PolicyError> {
        let mut draft = Draft {
            read_deny: Rules::new(true),
            read_allow: Rules::new(false),
            allow: Rules::new(false),
            deny: Rules::new(true),
            restricted: Rules::new(true),
            max_lines: 0,
            max_files: 0,
            max_bytes: 0,
            sandbox: SandboxRules::default(),
            outputs: Vec::new(),
            ignored: Vec::new(),
        };
        draft.apply(BUILTIN, &Origin::Builtin, false)?;
        if let Some(project) = project_dir {
            draft.apply_project(project, Policy::builtin()?)?;
        }
        if let Some(path) = policy_file {
            draft.apply_user(path)?;
        }
        for glob in extra_allow {
            draft.allow.push(glob, &Origin::CommandLine, None)?;
        }
        for glob in extra_deny {
            draft.deny.push(glob, &Origin::CommandLine, None)?;
        }
        draft.finish()
    }

    /// Appends the command line's network rules (`--allow-host`) and
    /// environment names (`--env`) to the files' lists.
    pub fn with_sandbox_flags(
        mut self,
        allow_hosts: &[String],
        env: &[String],
    ) -> Result<Policy, PolicyError> {
        for rule in allow_hosts {
            NetworkRule::parse(rule).map_err(|err| PolicyError::Network {
                origin: Origin::CommandLine,
                line: None,
                message: err.to_string(),
            })?;
            self.sandbox.network_allow.push(rule.clone());
        }
        self.sandbox.env.extend(env.iter().cloned());
        Ok(self)
    }
}

/// The 1-based line of a byte offset in `source`.
fn line_of(source: &str, offset: usize) -> usize {
    let end = offset.min(source.len());
    source.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}
