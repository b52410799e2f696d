//! One run: the work copy of the project, its shadow repo, the backend that
//! runs commands, the write policy, and the on-disk record of every step.
//!
//! Each tool call is a step. A step that may change files is committed in the
//! shadow repo and its changed paths are checked against the policy; a step
//! that broke the policy is reverted, recorded in `steps/step-N.violation.txt`
//! and the model is told. A violating step that cannot be reverted poisons the
//! run: no further tool runs, and its changes must not be applied. `finish`
//! stops the backend and builds the patch.

mod finish;
mod late;
pub mod mcp;
mod rules;
#[cfg(test)]
mod tests;
mod view;

pub use finish::{Draft, RunResult};
pub use rules::{HostTool, StepRules};

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use git2::Oid;
use serde_json::Value;

use super::overlay;
use super::policy::{self, Policy, Reason, Violation};
use super::rundir::{RunDir, StepRecord, ViolationRecord};
use super::shadow::{self, Layers, ShadowRepo, StatCache, StepCommit};
use super::{Change, workspace};
use ah_llm::ToolDef;
use ah_llm::models::EditFormat;
use ah_sandbox::cleanup::Cleanup;
use ah_sandbox::disk::DiskBudget;
use ah_sandbox::egress::EgressDecision;
use ah_sandbox::podman::OverlayDirs;
use ah_sandbox::{Backend, BackendKind, Changed, View, capture};
use ah_tools::fs_beneath::dir::DirHandle;
use ah_tools::mcp::{McpServer, McpTool};
use ah_tools::project::ProjectTool;
use ah_tools::{self as tools, OutputLimits, ToolOutput};
use rules::Route;
use view::ExecView;

/// Why a run could not be prepared or finished.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("could not prepare the run directory: {0}")]
    RunDir(String),
    #[error("could not copy the project into the work directory: {0}")]
    Copy(String),
    #[error("shadow repository error: {0}")]
    Shadow(String),
    #[error("could not build the session patch: {0}")]
    Patch(String),
}

/// What one tool step did.
#[derive(Debug, Clone)]
pub struct StepOutcome {
    pub step: u32,
    pub output: ToolOutput,
    pub duration_ms: u64,
    /// The step's commit in the shadow repo, when it changed files and stood.
    pub commit: Option<String>,
    /// The run's last accepted commit once the step is over: the step's own
    /// commit when it stood, else the commit before it (a step that changed
    /// nothing or was undone leaves the files as they were). This is the
    /// state of the files at this point of the conversation.
    pub head: String,
    pub changes: Vec<Change>,
    /// The violation report, when the step broke the policy and was undone.
    pub violation: Option<String>,
    /// What the network proxy decided while the step ran.
    pub egress: Vec<EgressDecision>,
}

fn redact_output(output: &mut ToolOutput) {
    use ah_base::redact;
    output.content = redact::text(&output.content).into_owned();
    output.stdout = redact::bytes(&output.stdout).into_owned();
    output.stderr = redact::bytes(&output.stderr).into_owned();
    redact::json(&mut output.details);
}

/// Caps what the step files and the session keep of the raw output.
fn bound_output(output: &mut ToolOutput) {
    for stream in [&mut output.stdout, &mut output.stderr] {
        *stream = capture::bounded(std::mem::take(stream), capture::MAX_STORED_BYTES);
    }
}

/// Where a prepared run starts: its shadow repo, the baseline its patch is
/// taken against, the commit its work copy holds (the baseline, unless the
/// files were restored from an earlier run's step), and the project files
/// the read policy kept out of the work copy.
#[derive(Debug)]
pub struct Start {
    pub shadow: ShadowRepo,
    pub baseline: Oid,
    pub head: Oid,
    /// Relative to the project root, sorted.
    pub withheld: Vec<String>,
    /// Where the container's `/work` is an overlay of the project: its
    /// folders. `None` for a work copy.
    pub overlay: Option<overlay::Overlay>,
    /// The baseline, when it is still being taken (an overlay of the
    /// project's current files): `baseline`, `head` and the overlay's
    /// `lower` are not known yet, and `shadow` stands in for the shadow repo
    /// the thread hands over. The run settles it before its first step
    /// and before it finishes.
    pub taking: Option<overlay::BaselineThread>,
    /// An overlay's watch on what appears in the project during the run.
    pub late: Option<overlay::LateFiles>,
}

/// A prepared run, ready for tool steps.
pub struct Run {
    dir: RunDir,
    shadow: ShadowRepo,
    backend: Box<dyn Backend>,
    rules: StepRules,
    /// The project's own tools (see [`Run::set_project_tools`]).
    project_tools: Vec<Arc<ProjectTool>>,
    /// The run's MCP servers and their tools (see [`Run::start_mcp`]).
    mcp: mcp::McpServers,
    mcp_tools: Vec<Arc<McpTool>>,
    policy: Policy,
    baseline: Oid,
    head: Oid,
    /// Project files the read policy kept out of the work copy.
    withheld: Vec<String>,
    steps: u32,
    violations: Vec<ViolationRecord>,
    artifact_cap: u64,
    /// Why the run must stop and never be applied, once a violating step
    /// could not be undone.
    poisoned: Option<String>,
    /// The patch last written before the run's end (`draft_patch`), and
    /// the head it was made at: the end does not write it again.
    drafted: Option<(Oid, crate::patch::PatchInfo)>,
    /// Why the run must stop without being tainted: a limit it reached (the
    /// disk budget). No more tools run; its patch may still be applied
    /// after a look.
    limit: Option<String>,
    limits: OutputLimits,
    bash_timeout: u64,
    disk_budget: DiskBudget,
    /// How the sandbox is removed at the end ([`Run::set_cleanup`]).
    cleanup: Cleanup,
    overlay: Option<overlay::Overlay>,
    /// What earlier steps of an overlay run hashed.
    stat_cache: StatCache,
    /// The baseline still being taken (see [`Start::taking`]).
    taking: Option<overlay::BaselineThread>,
    /// What appears in an overlay's project is hidden ([`Start::late`]).
    late: Option<overlay::LateFiles>,
}

impl Run {
    /// Copies `project` into the run's work directory, leaving out what
    /// `policy` withholds, and takes the baseline commit. The backend is
    /// started afterwards by the caller (it needs the work directory) and
    /// handed to [`Run::attach`]. (A run that starts from an earlier run's
    /// files is prepared by [`super::restore`].)
    pub fn prepare(project: &Path, dir: &RunDir, policy: &Policy) -> Result<Start, RunError> {
        let withhold = |rel: &Path| policy.withheld_by(rel).is_some();
        let copied = workspace::copy_project(project, &dir.work_dir(), &withhold)
            .map_err(|e| RunError::Copy(e.to_string()))?;
        let shadow = ShadowRepo::init(&dir.shadow_dir(), &dir.work_dir())
            .map_err(|e| RunError::Shadow(e.to_string()))?;
        let baseline = shadow
            .baseline()
            .map_err(|e| RunError::Shadow(e.to_string()))?;
        Ok(Start {
            shadow,
            baseline,
            head: baseline,
            withheld: copied.withheld,
            overlay: None,
            taking: None,
            late: None,
        })
    }

    /// Prepares a run whose container mounts `/work` as an overlay of
    /// `project`: nothing is copied, what the container must not see is
    /// hidden (see [`crate::overlay`]), and the baseline is read from the
    /// project itself on a thread ([`Start::taking`]) while the backend
    /// starts with the returned folders.
    pub fn prepare_overlay(
        project: &Path,
        dir: &RunDir,
        policy: &Policy,
    ) -> Result<Start, RunError> {
        let shadow_err = |e: shadow::ShadowError| RunError::Shadow(e.to_string());
        let shadow = ShadowRepo::init(&dir.shadow_dir(), project).map_err(shadow_err)?;
        let withhold = |rel: &Path| policy.withheld_by(rel).is_some();
        let dirs = OverlayDirs {
            upper: dir.upper_dir(),
            work: dir.overlay_scratch_dir(),
        };
        let laying = overlay::begin(shadow, project, &dirs, &withhold).map_err(RunError::Copy)?;
        Ok(Start {
            shadow: ShadowRepo::open(&dir.shadow_dir(), project).map_err(shadow_err)?,
            baseline: Oid::ZERO_SHA1,
            head: Oid::ZERO_SHA1,
            withheld: laying.withheld,
            overlay: Some(overlay::Overlay {
                project: project.to_path_buf(),
                dirs,
                lower: Oid::ZERO_SHA1,
            }),
            taking: Some(laying.taking),
            late: Some(laying.late),
        })
    }

    /// Waits for a baseline still being taken and takes it over; why it
    /// could not be taken, if not (the run's start has failed then).
    async fn settle(&mut self) -> Result<(), String> {
        let Some(taking) = self.taking.clone() else {
            return Ok(());
        };
        // The thread is joined off the runtime's threads.
        let waiting = taking.clone();
        tokio::task::spawn_blocking(move || waiting.wait())
            .await
            .map_err(|e| format!("waiting for the run's baseline failed: {e}"))??;
        let taken = taking.take()?;
        self.taking = None;
        self.shadow = taken.shadow;
        self.baseline = taken.baseline;
        self.head = taken.baseline;
        if let Some(overlay) = &mut self.overlay {
            overlay.lower = taken.baseline;
        }
        Ok(())
    }

    /// Assembles a run from its prepared parts.
    pub fn attach(
        dir: RunDir,
        start: Start,
        backend: Box<dyn Backend>,
        policy: Policy,
        artifact_cap: u64,
    ) -> Run {
        Run {
            dir,
            shadow: start.shadow,
            backend,
            rules: StepRules::default(),
            project_tools: Vec::new(),
            mcp: mcp::McpServers::default(),
            mcp_tools: Vec::new(),
            policy,
            baseline: start.baseline,
            head: start.head,
            withheld: start.withheld,
            steps: 0,
            violations: Vec::new(),
            artifact_cap,
            poisoned: None,
            drafted: None,
            limit: None,
            limits: OutputLimits::default(),
            bash_timeout: ah_tools::bash::DEFAULT_TIMEOUT,
            disk_budget: DiskBudget::default(),
            cleanup: Cleanup::Wait,
            overlay: start.overlay,
            stat_cache: StatCache::default(),
            taking: start.taking,
            late: start.late,
        }
    }

    /// Sets how much of each tool's output the model gets.
    pub fn set_output_limits(&mut self, limits: OutputLimits) {
        self.limits = limits;
    }

    /// Sets what the next steps may do (the project's tools and the MCP
    /// servers' join rules that let `/work` be written).
    pub fn set_rules(&mut self, rules: StepRules) {
        self.rules = rules
            .with_project_tools(&self.project_tools)
            .with_mcp_tools(&self.mcp_tools);
    }

    /// The project's (and the user's) own tools, offered from now on
    /// wherever the rules let `/work` be written.
    pub fn set_project_tools(&mut self, tools: Vec<Arc<ProjectTool>>) {
        self.project_tools = tools;
        self.rules = self.rules.clone().with_project_tools(&self.project_tools);
    }

    /// Starts `servers` in the sandbox (waiting for it) and offers their
    /// tools from now on wherever the rules let `/work` be written; a
    /// line for the user about each server.
    pub async fn start_mcp(&mut self, servers: Vec<McpServer>) -> Vec<String> {
        let (started, tools, lines) =
            mcp::McpServers::start(servers, self.backend.as_ref(), self.dir.path()).await;
        self.mcp = started;
        self.mcp_tools = tools;
        self.rules = self.rules.clone().with_mcp_tools(&self.mcp_tools);
        lines
    }

    /// The tools the model is offered under the current rules, with the
    /// edit tool of its edit `format`.
    pub fn tool_specs(&self, format: EditFormat) -> Vec<ToolDef> {
        self.rules.specs(format)
    }

    /// Sets how much disk the run may use; checked after every step.
    pub fn set_disk_budget(&mut self, budget: DiskBudget) {
        self.disk_budget = budget;
    }

    /// Sets how the sandbox is removed at the end: handed off
    /// ([`Cleanup::Detached`]: [`RunResult::remains`] says what is left to
    /// remove) or stopped before [`Run::finish`] returns ([`Cleanup::Wait`],
    /// the default).
    pub fn set_cleanup(&mut self, cleanup: Cleanup) {
        self.cleanup = cleanup;
    }

    /// Sets how long a `bash` call runs when the model names no timeout.
    pub fn set_bash_timeout(&mut self, seconds: u64) {
        self.bash_timeout = seconds;
    }

    pub fn id(&self) -> String {
        self.dir.id().to_string()
    }

    pub fn dir(&self) -> &RunDir {
        &self.dir
    }

    pub fn backend_kind(&self) -> BackendKind {
        self.backend.kind()
    }

    /// The baseline commit, once it is taken.
    pub async fn baseline(&mut self) -> Result<String, RunError> {
        self.settle().await.map_err(RunError::Shadow)?;
        Ok(self.baseline.to_string())
    }

    /// The project files the read policy kept out of the work copy,
    /// relative to the project root, sorted.
    pub fn withheld(&self) -> &[String] {
        &self.withheld
    }

    /// Why the run is poisoned, if it is: a step broke the write policy and
    /// could not be undone, so the work tree holds what the policy forbids.
    /// A poisoned run runs no more tools, and its patch must not be applied.
    pub fn poisoned(&self) -> Option<&str> {
        self.poisoned.as_deref()
    }

    /// The limit the run reached, if it reached one (see `limit`): no
    /// more tools run.
    pub fn limit_reached(&self) -> Option<&str> {
        self.limit.as_deref()
    }

    /// Runs one tool call as step N: the tool, then (if it may have changed
    /// files) the commit and the policy check, then the step files.
    pub async fn tool_step(&mut self, name: &str, input: &Value) -> StepOutcome {
        self.steps += 1;
        let step = self.steps;
        let started = Instant::now();
        // Nothing runs that could not be recorded.
        if let Err(err) = self.settle().await {
            self.poisoned
                .get_or_insert(format!("the project's baseline could not be taken: {err}"));
        }
        // A server must not go on changing /work while it may not change.
        if self.rules.is_read_only() {
            self.mcp.end_all(self.backend.as_ref()).await;
        }
        let seen = self.backend.view().await;
        // What appeared in the project since the last step is hidden; a
        // server that ran meanwhile may have read it.
        let mut appeared = match &seen {
            Ok(seen) => self.hide_late(&seen.root).await,
            Err(_) => Vec::new(),
        };
        if !appeared.is_empty() && self.mcp.running() {
            self.mcp.end_all(self.backend.as_ref()).await;
        } else {
            appeared.clear();
        }
        // Where a file tool writes, the sandbox learns of it after the step.
        let on_host = matches!(self.rules.route(name), Route::Builtin) && name != "bash";
        let view = ExecView {
            root: seen
                .as_ref()
                .map_or_else(|_| self.dir.work_dir(), |seen| seen.root.clone()),
            backend: self.backend.as_ref(),
            policy: &self.policy,
            limits: self.limits,
            bash_timeout: self.bash_timeout,
            full_output: self.dir.step_file(step, "out"),
        };
        let mut output = match (self.poisoned.as_ref().or(self.limit.as_ref()), &seen) {
            (Some(reason), _) => ToolOutput::error(format!(
                "[ah: not run: the run is stopped because {reason}; make no more tool calls]"
            )),
            (None, Err(err)) => ToolOutput::error(format!(
                "[ah: not run: the sandbox's files cannot be reached: {err}]"
            )),
            (None, Ok(_)) => match self.rules.route(name) {
                Route::Builtin => tools::call(name, input, &view).await,
                Route::Project(tool) => tools::project::call(&tool, input, &view).await,
                Route::Mcp(tool) => {
                    self.mcp
                        .call(&tool, input, self.backend.as_ref(), &self.limits)
                        .await
                }
                Route::Host(tool) => rules::call_host(tool.as_ref(), input),
                Route::Refused(why) => ToolOutput::error(why),
            },
        };
        // What appeared while the step ran may have been read by it.
        if self.late.is_some()
            && let Ok(seen) = self.backend.view().await
        {
            appeared.extend(self.hide_late(&seen.root).await);
            if !appeared.is_empty() {
                self.mcp.end_all(self.backend.as_ref()).await;
                self.withhold_step(step, &seen.root, &appeared, &mut output)
                    .await;
            }
        }
        let duration_ms = started.elapsed().as_millis() as u64;
        // A secret the sandbox could read (a key in a project file) goes no
        // further: not to the model, the session or the step files.
        redact_output(&mut output);
        bound_output(&mut output);
        let mut outcome = StepOutcome {
            step,
            output: ToolOutput::error(String::new()),
            duration_ms,
            commit: None,
            head: String::new(),
            changes: Vec::new(),
            violation: None,
            egress: self.backend.take_egress(),
        };
        if output.may_change_files {
            // A file tool wrote the view the step began with; anything else
            // ran in the sandbox, which the view is brought up to date with.
            let seen = match (on_host, seen) {
                (true, Ok(seen)) => Ok(seen),
                _ => self.backend.view().await,
            };
            self.commit_step(step, name, seen, &mut output, &mut outcome);
            // The host wrote: an undo (anything it put back), or a file
            // tool (what the step recorded).
            let changed: Vec<String> = outcome.changes.iter().map(|c| c.path.clone()).collect();
            if outcome.violation.is_some() {
                self.push(None, &mut output).await;
            } else if on_host {
                self.push(Some(&changed), &mut output).await;
            }
        }
        outcome.output = output;
        outcome.head = self.head.to_string();
        let record = StepRecord {
            step,
            tool: name.to_string(),
            input: input.clone(),
            exit_code: outcome.output.exit_code,
            is_error: outcome.output.is_error,
            duration_ms,
            commit: outcome.commit.clone(),
            head: Some(outcome.head.clone()),
            changed: outcome.changes.clone(),
        };
        if let Err(err) = self.dir.write_step(
            step,
            &record,
            &outcome.output.stdout,
            &outcome.output.stderr,
        ) {
            outcome.output.content.push_str(&format!(
                "\n[ah: the step record could not be written: {err}]"
            ));
        }
        self.check_disk(&mut outcome);
        outcome
    }

    /// Stops the run (no more tools; the patch is kept for a look, never
    /// applied on its own) once its files pass the disk budget.
    fn check_disk(&mut self, outcome: &mut StepOutcome) {
        if self.poisoned.is_some() || self.limit.is_some() {
            return;
        }
        if let Err(why) = self.disk_budget.check(self.dir.path()) {
            outcome.output.content.push_str(&format!(
                "\n[ah: the run is stopped: {why}; make no more tool calls]"
            ));
            self.limit = Some(why);
        }
    }

    /// Commits what the step changed on the last accepted commit, or undoes
    /// it when it broke the policy (a file over the size cap counts as that).
    fn commit_step(
        &mut self,
        step: u32,
        name: &str,
        seen: std::io::Result<View>,
        output: &mut ToolOutput,
        outcome: &mut StepOutcome,
    ) {
        let message = format!("step {step}: {name}");
        let limit = shadow::MAX_FILE_BYTES;
        let seen = match seen {
            Ok(seen) => seen,
            // Nothing can be checked or undone without the files.
            Err(err) => {
                let why = format!(
                    "step {step} could not be checked: the sandbox's files cannot be reached: {err}"
                );
                output.is_error = true;
                output
                    .content
                    .push_str(&format!("\n[ah: the run is stopped: {why}]"));
                self.poisoned = Some(why);
                return;
            }
        };
        let root = seen.root.clone();
        let committed = match self.record(&seen, &message, limit) {
            Ok(committed) => committed,
            // Fails closed: what cannot be recorded cannot be checked, so
            // the step is undone (or the run poisoned when it cannot be).
            Err(err) => {
                let violation = Violation {
                    path: ".".to_string(),
                    reason: Reason::Unrecordable {
                        why: format!("the step's changes could not be recorded: {err}"),
                    },
                };
                self.undo_step(step, &[violation], output, outcome);
                return;
            }
        };
        if !committed.nested_repos.is_empty() {
            output.content.push_str(&format!(
                "\n[ah: {} {} a nested git repository; files inside are not recorded \
                 and will not be part of the patch]",
                committed.nested_repos.join(", "),
                if committed.nested_repos.len() == 1 {
                    "contains"
                } else {
                    "contain"
                }
            ));
        }
        let mut violations: Vec<Violation> = committed
            .too_large
            .into_iter()
            .map(|path| Violation {
                path,
                reason: Reason::TooLarge { limit },
            })
            .collect();
        violations.extend(committed.refused.into_iter().map(|refused| Violation {
            path: String::from_utf8_lossy(&refused.path).into_owned(),
            reason: Reason::Unrecordable { why: refused.why },
        }));
        if let Some(commit) = committed.commit {
            outcome.changes = committed.changes;
            if self.rules.is_read_only() {
                violations.extend(outcome.changes.iter().map(|change| Violation {
                    path: change.path.clone(),
                    reason: Reason::ReadOnly,
                }));
            }
            violations.extend(self.check_commit(&root, commit, &outcome.changes));
            if violations.is_empty() {
                self.head = commit;
                outcome.commit = Some(commit.to_string());
                return;
            }
        }
        if !violations.is_empty() {
            self.undo_step(step, &violations, output, outcome);
        }
    }

    /// Hands what the host changed in its view (`paths`) to the sandbox;
    /// a sandbox that cannot take it stops the run, since it would no longer
    /// hold what was recorded.
    async fn push(&mut self, paths: Option<&[String]>, output: &mut ToolOutput) {
        if let Err(err) = self.backend.push(paths).await {
            let why = format!("the sandbox could not be given the host's changes: {err}");
            output.is_error = true;
            output
                .content
                .push_str(&format!("\n[ah: the run is stopped: {why}]"));
            self.poisoned.get_or_insert(why);
        }
    }

    /// Records the step's files on the last accepted commit, from the
    /// host's view `seen`: a walk of all of it, or only the folders an
    /// overlay's upper folder holds.
    fn record(&mut self, seen: &View, message: &str, limit: u64) -> Result<StepCommit, String> {
        // An undo writes through the view too.
        self.shadow.rebind(&seen.root);
        let Changed::Within(upper) = &seen.changed else {
            return self
                .shadow
                .commit_step(self.head, message, limit)
                .map_err(|e| e.to_string());
        };
        let merged = DirHandle::open_root(&seen.root)
            .map_err(|e| format!("cannot open the sandbox's merged work tree: {e}"))?;
        let upper = DirHandle::open_root(upper)
            .map_err(|e| format!("cannot open the overlay's upper folder: {e}"))?;
        let layers = Layers {
            merged: &merged,
            upper: &upper,
        };
        self.shadow
            .commit_layered_step(self.head, message, &layers, &mut self.stat_cache, limit)
            .map_err(|e| e.to_string())
    }

    /// The policy check of a step's commit; symlinks are read from the commit.
    fn check_commit(&self, work_dir: &Path, commit: Oid, changes: &[Change]) -> Vec<Violation> {
        match self.shadow.committed_links(commit) {
            Ok(links) => self
                .policy
                .check_changes(work_dir, changes, &|path| links.target(path)),
            // Fails closed: every change counts as a link that cannot be read.
            Err(err) => {
                let err = err.to_string();
                self.policy
                    .check_changes(work_dir, changes, &|_| Err(err.clone()))
            }
        }
    }

    /// Reverts a violating step to the last accepted commit and records it;
    /// poisons the run when the revert fails.
    fn undo_step(
        &mut self,
        step: u32,
        violations: &[Violation],
        output: &mut ToolOutput,
        outcome: &mut StepOutcome,
    ) {
        let undo_failure = self
            .shadow
            .revert_to(self.head)
            .err()
            .map(|e| e.to_string());
        let mut text = policy::violation_report(violations, undo_failure.as_deref());
        if let Some(err) = undo_failure {
            self.poisoned = Some(format!(
                "step {step} broke the write policy and could not be undone: {err}"
            ));
        }
        if let Err(err) = self.dir.write_violation(step, &text) {
            text.push_str(&format!(
                "\n(the violation record could not be written: {err})"
            ));
        }
        self.violations
            .extend(violations.iter().map(|v| ViolationRecord {
                step,
                path: v.path.clone(),
                rule: v.rule().map_or_else(|| v.to_string(), str::to_string),
            }));
        output.is_error = true;
        output.content.push_str(&format!("\n\n{text}"));
        outcome.violation = Some(text);
    }
}
