//! The policy of a run: which project files are withheld from the work copy
//! (the read rules: a deny glob withholds, an allow glob re-admits), which
//! paths a step may create, change or delete (deny wins, then a path must
//! match an allow rule; a withheld path is never written), where a symlink
//! the model made may point, and the limits `--review auto` applies. The
//! rules come from the
//! built-in `policy/default.toml`, then the project's `.ah/policy.toml`, then
//! `--policy FILE`, then globs given on the command line. The same files
//! say what the sandbox may reach on the network (`[network] allow`),
//! which host variables it gets (`[sandbox] env`) and which files a run
//! adds are build or cache outputs left out of the patch (`[outputs]
//! exclude`, see [`super::outputs`]).

mod load;
mod symlink;
#[cfg(test)]
mod tests;

use std::fmt;
use std::path::{Path, PathBuf};

use globset::GlobSet;
use serde::{Deserialize, Serialize};

use super::outputs::Outputs;
use super::{Change, ChangeKind};

pub use load::{Origin, PolicyError};

/// Where the policy reads symlinks: given a path relative to the work root,
/// the target of the link the step's commit holds there (`Ok(None)` when the
/// commit holds no link there; `Err` with why when it cannot be read). Links
/// are checked as committed, never as found on disk.
pub type LinkLookup<'a> = dyn Fn(&Path) -> Result<Option<PathBuf>, String> + 'a;

/// Where a project keeps its own policy, relative to the project root.
pub const PROJECT_POLICY_FILE: &str = ".ah/policy.toml";

/// Which paths the model may write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteRules {
    pub allow: Vec<String>,
    pub deny: Vec<String>,
}

/// Which files of the project are withheld from the work copy: those a
/// deny glob matches, unless an allow glob re-admits them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadRules {
    pub deny: Vec<String>,
    pub allow: Vec<String>,
}

/// What `--review auto` lets through without a human.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReviewRules {
    /// Most changed lines (added + removed) in one patch.
    pub max_lines: u64,
    /// Most files in one patch.
    pub max_files: u64,
    /// Most bytes of patch text, in all and for any one file.
    pub max_bytes: u64,
    /// Paths whose change always needs a human: the built-in list plus
    /// whatever policy files and flags add.
    pub restricted: Vec<String>,
}

/// What the sandbox may reach and carry: `host:port` rules for the egress
/// proxy (see `egress::allow`), and host variables passed into it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SandboxRules {
    /// `[network] allow`.
    pub network_allow: Vec<String>,
    /// `[sandbox] env`.
    pub env: Vec<String>,
}

/// The merged, compiled policy of one run.
#[derive(Debug, Clone, Serialize)]
pub struct Policy {
    read: ReadRules,
    write: WriteRules,
    review: ReviewRules,
    sandbox: SandboxRules,
    /// `[outputs] exclude`, compiled (serialized as its patterns).
    #[serde(serialize_with = "outputs_patterns")]
    outputs: Outputs,
    /// What the project's file set that it may not, each with its file
    /// (see [`Policy::ignored`]).
    #[serde(skip)]
    ignored: Vec<String>,
    #[serde(skip)]
    read_deny: RuleSet,
    #[serde(skip)]
    read_allow: RuleSet,
    #[serde(skip)]
    allow: RuleSet,
    #[serde(skip)]
    deny: RuleSet,
    #[serde(skip)]
    restricted: RuleSet,
}

fn outputs_patterns<S: serde::Serializer>(outputs: &Outputs, s: S) -> Result<S::Ok, S::Error> {
    outputs.patterns().serialize(s)
}

/// Globs in the order they were given, compiled into one matcher.
#[derive(Debug, Clone)]
struct RuleSet {
    patterns: Vec<String>,
    set: GlobSet,
}

impl RuleSet {
    /// The first rule (in the order given) that matches `path`.
    fn first_match(&self, path: impl AsRef<Path>) -> Option<&str> {
        let index = self.set.matches(path).into_iter().min()?;
        self.patterns.get(index).map(String::as_str)
    }
}

/// One path that broke the write policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// The changed path, relative to the work root.
    pub path: String,
    #[serde(flatten)]
    pub reason: Reason,
}

/// Why a path broke the policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Reason {
    /// A deny glob matched.
    Denied { rule: String },
    /// The path is withheld from the work copy by a read rule: a file
    /// written there would replace, on the host, one the model never saw.
    Withheld { rule: String },
    /// No allow glob matched.
    NoAllowRule,
    /// The path is absolute or climbs out with `..`.
    NotInWork,
    /// The symlink's target (through any chain of links) leaves `/work`.
    SymlinkOutside { target: String },
    /// The symlink leads, inside `/work`, to a path a deny glob matches.
    SymlinkToDenied {
        target: String,
        resolved: String,
        rule: String,
    },
    /// The link could not be followed: unreadable, or too many hops (a loop).
    SymlinkUnchecked { target: String, detail: String },
    /// A file over the size cap for staging: it was never recorded.
    TooLarge { limit: u64 },
    /// An entry the shadow repo cannot record (a name git refuses, a path
    /// too deep), or a step whose changes could not be recorded at all.
    Unrecordable { why: String },
    /// Any change while the run's steps are read-only (a phase that only
    /// looks, see `run::StepRules`).
    ReadOnly,
}

impl Violation {
    /// The glob this violation broke, when a glob was involved.
    pub fn rule(&self) -> Option<&str> {
        match &self.reason {
            Reason::Denied { rule }
            | Reason::Withheld { rule }
            | Reason::SymlinkToDenied { rule, .. } => Some(rule),
            _ => None,
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = &self.path;
        match &self.reason {
            Reason::Denied { rule } => write!(f, "{path:?} is denied by rule {rule:?}"),
            Reason::Withheld { rule } => write!(
                f,
                "{path:?} is withheld from the work copy by read rule {rule:?}, so it is never written"
            ),
            Reason::NoAllowRule => write!(f, "{path:?} matches no allow rule"),
            Reason::NotInWork => write!(f, "{path:?} is not a path inside /work"),
            Reason::SymlinkOutside { target } => {
                write!(f, "{path:?} is a symlink to {target:?}, outside /work")
            }
            Reason::SymlinkToDenied {
                target,
                resolved,
                rule,
            } => write!(
                f,
                "{path:?} is a symlink to {target:?}, which leads to {resolved:?}, denied by rule {rule:?}"
            ),
            Reason::SymlinkUnchecked { target, detail } if target.is_empty() => {
                write!(f, "{path:?} is a symlink that cannot be read: {detail}")
            }
            Reason::SymlinkUnchecked { target, detail } => write!(
                f,
                "{path:?} is a symlink to {target:?} that cannot be followed: {detail}"
            ),
            Reason::TooLarge { limit } => write!(
                f,
                "{path:?} is larger than {}: a file that large cannot be part of the patch",
                size_text(*limit)
            ),
            Reason::ReadOnly => write!(
                f,
                "{path:?} was changed while /work is read-only (this phase may only look)"
            ),
            Reason::Unrecordable { why } => write!(
                f,
                "{path:?} cannot be recorded ({why}), so it cannot be checked or be part of \
                 the patch"
            ),
        }
    }
}

/// The text of `steps/step-N.violation.txt`, also sent to the model as the
/// step's result: which paths broke which rule, and that the step was undone,
/// or, given `undo_failure`, that it could not be and the run is stopped.
pub fn violation_report(violations: &[Violation], undo_failure: Option<&str>) -> String {
    let mut out = String::from(match undo_failure {
        None => "step undone: these paths broke the write policy:\n",
        Some(_) => "step NOT undone: these paths broke the write policy:\n",
    });
    for violation in violations {
        out.push_str("  ");
        out.push_str(&violation.to_string());
        out.push('\n');
    }
    match undo_failure {
        None => out.push_str(
            "All changes of this step were reverted. Write only to paths the policy allows; \
             do not retry these paths.\n",
        ),
        Some(err) => out.push_str(&format!(
            "The step could not be reverted ({err}). The run is stopped and its changes will \
             not be applied: make no more tool calls, and tell the user what happened.\n"
        )),
    }
    out
}

impl Policy {
    /// The merged read rules, as given.
    pub fn read(&self) -> &ReadRules {
        &self.read
    }

    /// The read rule that withholds the project file `rel` (relative to the
    /// project root, `/` as separator) from the work copy: the first deny
    /// glob matching it, unless an allow glob matches it too. Deny globs
    /// ignore letter case, allow globs do not (a re-admission is exact).
    ///
    /// An editor's swap, backup or lock file of a withheld file is withheld
    /// too (`.env.swp`, `.env~`, `#.env#`, `.#.env`: see [`editor_originals`]):
    /// it holds the same secrets.
    pub fn withheld_by(&self, rel: &Path) -> Option<&str> {
        if let Some(rule) = self.withheld_as(rel) {
            return Some(rule);
        }
        let name = rel.file_name()?.to_str()?;
        let folder = rel.parent().unwrap_or(Path::new(""));
        editor_originals(name)
            .into_iter()
            .find_map(|original| self.withheld_as(&folder.join(original)))
    }

    fn withheld_as(&self, rel: &Path) -> Option<&str> {
        let rule = self.read_deny.first_match(rel)?;
        match self.read_allow.first_match(rel) {
            Some(_) => None,
            None => Some(rule),
        }
    }

    /// What the project's `.ah/policy.toml` set that a project's file may
    /// not, and was ignored: re-admissions to the read policy, each with its
    /// file. The run names them at its start.
    pub fn ignored(&self) -> &[String] {
        &self.ignored
    }

    /// What this policy lets into the sandbox that `builtin` (the built-in
    /// policy) withholds: its deny globs that this one dropped, and its allow
    /// globs; empty when none.
    pub fn read_loosened(&self, builtin: &Policy) -> Vec<String> {
        let dropped = builtin
            .read
            .deny
            .iter()
            .filter(|glob| !self.read.deny.contains(glob));
        let dropped = dropped.map(|glob| format!("deny -{glob}"));
        let admitted = self
            .read
            .allow
            .iter()
            .filter(|glob| !builtin.read.allow.contains(glob));
        dropped
            .chain(admitted.map(|glob| format!("allow +{glob}")))
            .collect()
    }

    /// The merged write rules, as given.
    pub fn write(&self) -> &WriteRules {
        &self.write
    }

    /// The merged review rules, as given.
    pub fn review(&self) -> &ReviewRules {
        &self.review
    }

    /// Overrides the `--review auto` thresholds (from the configuration),
    /// each one given.
    pub fn set_review_limits(
        &mut self,
        max_lines: Option<u64>,
        max_files: Option<u64>,
        max_bytes: Option<u64>,
    ) {
        let review = &mut self.review;
        review.max_lines = max_lines.unwrap_or(review.max_lines);
        review.max_files = max_files.unwrap_or(review.max_files);
        review.max_bytes = max_bytes.unwrap_or(review.max_bytes);
    }

    /// The merged network allowlist and environment allowlist, as given.
    pub fn sandbox(&self) -> &SandboxRules {
        &self.sandbox
    }

    /// The build and cache outputs a run's patch leaves out.
    pub fn outputs(&self) -> &Outputs {
        &self.outputs
    }

    /// The first restricted glob matching `path`, if any (letter case ignored).
    pub fn restricted_rule(&self, path: &str) -> Option<&str> {
        self.restricted.first_match(path)
    }

    /// Checks one path, relative to the work root: deny wins (naming the first
    /// matching rule), then the path must match an allow rule.
    pub fn check_path(&self, rel: &str) -> Result<(), Violation> {
        let violation = |reason| Violation {
            path: rel.to_string(),
            reason,
        };
        if !is_inside(rel) {
            return Err(violation(Reason::NotInWork));
        }
        if let Some(rule) = self.deny.first_match(rel) {
            return Err(violation(Reason::Denied {
                rule: rule.to_string(),
            }));
        }
        if let Some(rule) = self.withheld_by(Path::new(rel)) {
            return Err(violation(Reason::Withheld {
                rule: rule.to_string(),
            }));
        }
        if self.allow.first_match(rel).is_none() {
            return Err(violation(Reason::NoAllowRule));
        }
        Ok(())
    }

    /// Checks every change of a step, deletions included. A change whose new
    /// side is a symlink (by its flag, or by what `links` finds in the commit,
    /// so a wrong flag cannot skip the check) must lead, through any chain of
    /// committed links, to a path inside the work root that no deny rule
    /// matches. `work_dir` is the work root's host path, which absolute link
    /// targets may name (the `none` backend); nothing is read from it.
    pub fn check_changes(
        &self,
        work_dir: &Path,
        changes: &[Change],
        links: &LinkLookup<'_>,
    ) -> Vec<Violation> {
        let mut violations = Vec::new();
        for change in changes {
            if let Err(violation) = self.check_path(&change.path) {
                violations.push(violation);
                continue;
            }
            if change.kind == ChangeKind::Deleted {
                continue;
            }
            let committed_link = !matches!(links(Path::new(&change.path)), Ok(None));
            if change.symlink || committed_link {
                violations.extend(self.check_symlink(work_dir, &change.path, links));
            }
        }
        violations
    }

    fn check_symlink(
        &self,
        work_dir: &Path,
        link: &str,
        links: &LinkLookup<'_>,
    ) -> Option<Violation> {
        let (target, resolution) = symlink::resolve(work_dir, link, links);
        let reason = match resolution {
            symlink::Resolution::Inside(resolved) => {
                let rule = self
                    .deny
                    .first_match(&resolved)
                    .or_else(|| self.withheld_by(Path::new(&resolved)))?;
                Reason::SymlinkToDenied {
                    target,
                    resolved,
                    rule: rule.to_string(),
                }
            }
            symlink::Resolution::Outside => Reason::SymlinkOutside { target },
            symlink::Resolution::Unchecked(detail) => Reason::SymlinkUnchecked { target, detail },
        };
        Some(Violation {
            path: link.to_string(),
            reason,
        })
    }
}

/// A byte count for people: whole MiB when it is one, else bytes.
fn size_text(bytes: u64) -> String {
    const MIB: u64 = 1024 * 1024;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{bytes} bytes")
    }
}

/// A clean relative path as git writes it: not empty, not absolute, no empty,
/// `.` or `..` segment (so a glob sees the one spelling of each path).
fn is_inside(rel: &str) -> bool {
    !rel.is_empty()
        && rel
            .split('/')
            .all(|segment| !matches!(segment, "" | "." | ".."))
}

/// The names an editor's swap, backup, undo or lock file `name` stands for:
/// Vim's `.NAME.swp` (`.swo`, … `.sw?`) and `.NAME.un~`, Emacs's `NAME~`,
/// `#NAME#` and `.#NAME`, Kate's `.NAME.kate-swp`, and the usual `NAME.bak`,
/// `NAME.orig`, `NAME.save` (nano) and `NAME.old`.
pub fn editor_originals(name: &str) -> Vec<&str> {
    let mut originals = Vec::new();
    let hidden = name.strip_prefix('.');
    if let Some(inner) = name.strip_prefix('#').and_then(|n| n.strip_suffix('#')) {
        originals.push(inner);
    }
    if let Some(inner) = name.strip_prefix(".#") {
        originals.push(inner);
    }
    if let Some(inner) = name.strip_suffix('~') {
        originals.push(inner);
    }
    if let Some(inner) = hidden.and_then(|n| n.strip_suffix(".un~")) {
        originals.push(inner);
    }
    for stem in [Some(name), hidden].into_iter().flatten() {
        if let Some((inner, ext)) = stem.rsplit_once('.')
            && ext.len() == 3
            && ext.starts_with("sw")
            && ext.as_bytes()[2].is_ascii_lowercase()
        {
            originals.push(inner);
        }
    }
    if let Some(inner) = hidden.and_then(|n| n.strip_suffix(".kate-swp")) {
        originals.push(inner);
    }
    for suffix in [".bak", ".orig", ".save", ".old"] {
        if let Some(inner) = name.strip_suffix(suffix) {
            originals.push(inner);
        }
    }
    originals.retain(|original| !original.is_empty());
    originals
}
