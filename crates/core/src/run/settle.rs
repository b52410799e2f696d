//! Everything checked before a session is opened or anything copied: the
//! project, its configuration (filled into the options where the user gave
//! no value), the model and its credentials, the policy, the review mode,
//! the sandbox and the prompts.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};

use super::begin::Begin;
use super::prompt::{self, PromptSetup};
use super::{Front, ReviewMode, RunOptions, UsageError, network, weakening};
use crate::agent::instructions::global_dir;
use crate::config::{self, ProjectFiles, RetrySettings};
use ah_llm::providers::Selection;
use ah_llm::retry::RetryPolicy;
use ah_llm::{Provider, models};
use ah_record::policy::Policy;
use ah_record::safe_text::terminal_safe;
use ah_sandbox::{BackendKind, podman};

/// Settles a run of `task` (filling `args` from the configuration where
/// the user gave no value). The run begins with a new prompt unless the
/// caller says otherwise. `connect` connects what the engine talks to once
/// the configuration is read, before the sandbox's image is looked at (a
/// missing key is said before an image is built): given the run's model
/// (`-m`, else the configuration's), the options and the project's files;
/// [`run_model`] for an engine that talks to the run's model.
pub(crate) async fn settle<C>(
    args: &mut RunOptions,
    task: String,
    connect: impl FnOnce(&Selection, &RunOptions, &ProjectFiles) -> Result<C>,
    front: &mut dyn Front,
) -> Result<(RunSetup, C)> {
    let project = resolve_project(args.project.as_deref())?;
    // The policy comes first: it says which project files ah may read.
    let (file, allow, deny) = (args.policy.as_deref(), &args.allow, &args.deny);
    let policy = Policy::load(&project, file, allow, deny)?;
    let user_policy = Policy::load_without_project(file, allow, deny)?;
    read_policy_notices(&policy, front)?;
    let files = ProjectFiles::new(&project, &policy);
    let loaded =
        config::load(&files, &args.overrides).map_err(|err| UsageError::Mistake(err.into()))?;
    let given = weakening::CommandLineWins::of(args);
    config::fill(args, &loaded.config);
    weakening::engine_of_user(args, &loaded.user);
    let image = args
        .image
        .clone()
        .unwrap_or_else(|| podman::DEFAULT_IMAGE.to_string());
    // Looked for while the provider and the policy are set up.
    let image_check =
        (args.backend == BackendKind::Podman).then(|| super::sandbox::ImageCheck::start(&image));
    let ah_dir = project.join(".ah");
    // Private before the session's database or a run lands there.
    ah_record::rundir::ensure_ah_dir(&ah_dir)?;
    let selection = super::model::select(
        args.model.as_deref().unwrap_or(models::DEFAULT_MODEL),
        &args.config,
    )?;
    let connected = connect(&selection, args, &files)?;
    let policy = finish_policy(policy, args, &args.config)?;
    let user_policy = finish_policy(user_policy, args, &loaded.user)?;
    let (mcp_servers, mcp_lines) = config::mcp::servers(&loaded, &args.config, &project, &|name| {
        std::env::var(name).ok()
    });
    let settings = weakening::Settings {
        config: &loaded.config,
        user_config: &loaded.user,
        policy: &policy,
        user_policy: &user_policy,
        given,
        mcp_servers: &mcp_servers,
    };
    if let Some(line) = weakening::warning(&settings) {
        front.notice(&format!("{}", terminal_safe(&line)));
    }
    if let Some(line) = weakening::ignored(&settings) {
        front.notice(&terminal_safe(&line));
    }
    if let Some((_, _, file)) = loaded.ignored.first() {
        let line = format!("ah: {file} sets [prices]: {}", config::IGNORED_PRICES);
        front.notice(&terminal_safe(&line));
    }
    network::check_backend(args.backend, &args.sandbox)?;
    let review_mode = match (args.review, args.json) {
        (Some(mode), _) => mode,
        // JSON consumers are programs: nobody to ask.
        (None, true) => ReviewMode::Never,
        (None, false) => default_review(),
    };
    if args.json && review_mode == ReviewMode::Ask {
        return Err(UsageError::Message(
            "--json cannot ask for a review (stdout carries the events): use --review auto or never"
                .into(),
        )
        .into());
    }
    let project_tools =
        config::tools::load(&files, global_dir().as_deref()).map_err(UsageError::Message)?;
    for tool in project_tools
        .iter()
        .filter(|t| ah_tools::names().contains(&t.name))
    {
        front.notice(&format!(
            "tool {}: the one declared in {} replaces ah's own",
            tool.name,
            terminal_safe(&tool.source.display().to_string())
        ));
    }
    for line in mcp_lines {
        front.notice(&terminal_safe(&line));
    }
    for (_, secret) in mcp_servers
        .iter()
        .flat_map(|server| &server.env)
        .filter(|(name, _)| podman::is_secret_name(name))
    {
        ah_base::redact::register(secret);
    }
    let prompts = prompt::prepare(
        &files,
        super::lifecycle::workspace_of(args.backend),
        &task,
        &args.skills,
        front,
    )?;
    if let Some(check) = image_check {
        check.finish(front).await?;
    }
    let setup = RunSetup {
        run_id: ulid::Ulid::generate().to_string(),
        project,
        ah_dir,
        files,
        model_name: selection.display_name(),
        model: selection.model,
        agent_models: Vec::new(),
        policy,
        review_mode,
        pager: loaded.user.review.pager.clone(),
        image,
        task,
        prompts,
        project_tools,
        mcp_servers,
        begin: Begin::Prompt,
    };
    Ok((setup, connected))
}

/// The run's model, connected: what the single agent and the work phases
/// talk to (see [`settle`]).
pub(crate) fn run_model(
    selection: &Selection,
    args: &RunOptions,
    _: &ProjectFiles,
) -> Result<Box<dyn Provider>> {
    Ok(selection.connect(retry_policy(&args.config.retry))?)
}

/// Names, at the start, what of the read policy a project's file tried to
/// loosen (ignored), and what the user's own `--policy` loosens.
fn read_policy_notices(policy: &Policy, front: &mut dyn Front) -> Result<()> {
    for ignored in policy.ignored() {
        front.notice(&format!(
            "ah: ignored {}: a project's policy can add to the read policy, never let a \
             withheld file into the sandbox (give such globs in your own --policy FILE)",
            terminal_safe(ignored)
        ));
    }
    let loosened = policy.read_loosened(Policy::builtin()?);
    if !loosened.is_empty() {
        front.notice(&format!(
            "ah: the read policy lets into the sandbox what it withholds by default: {} \
             (--policy)",
            terminal_safe(&loosened.join(", "))
        ));
    }
    Ok(())
}

/// A policy as the files made it, with the command line's network rules
/// and variables and the review limits of `limits` (the run's
/// configuration, or the user's without the project's file).
fn finish_policy(policy: Policy, args: &RunOptions, limits: &config::Config) -> Result<Policy> {
    let mut policy = policy.with_sandbox_flags(&args.sandbox.allow_hosts, &args.sandbox.env)?;
    let review = &limits.review;
    policy.set_review_limits(review.max_lines, review.max_files, review.max_bytes);
    Ok(policy)
}

/// What `run` settled before the session was opened.
#[derive(Clone)]
pub(crate) struct RunSetup {
    /// The run's id, given out before it starts: every event of the run
    /// carries it, and its folder is named by it.
    pub run_id: String,
    pub project: PathBuf,
    pub ah_dir: PathBuf,
    /// The project's files as ah reads them for itself.
    pub files: ProjectFiles,
    /// The run's model (`-m`, else the configuration's): the single
    /// agent's and the work phases'; an org's agents that name none take it.
    pub model: models::ModelInfo,
    /// The run's model as people see it (`opus`'s id,
    /// `ollama:qwen2.5-coder:7b`).
    pub model_name: String,
    /// An org's agents, each with the model it runs as people see it, in
    /// turn order; empty when the run talks to its own model.
    pub agent_models: Vec<(String, String)>,
    pub policy: Policy,
    pub review_mode: ReviewMode,
    /// `[review] pager` from the user's own configuration (the project's
    /// file cannot set it).
    pub pager: Option<String>,
    pub image: String,
    pub task: String,
    pub prompts: PromptSetup,
    /// The project's and the user's own tools (`.ah/tools/`).
    pub project_tools: Vec<std::sync::Arc<ah_tools::project::ProjectTool>>,
    /// The MCP servers to start in the sandbox (`[mcp.NAME]`).
    pub mcp_servers: Vec<ah_tools::mcp::McpServer>,
    /// Where in the session tree the run starts.
    pub begin: Begin,
}

impl RunSetup {
    /// The model or models the run talks to, as the session and the
    /// manifest record them: the run's model, or an org's agents' as
    /// `--agents` takes them (`lead:claude-opus-4-5,coder:ollama:qwen`).
    pub(crate) fn models(&self) -> String {
        match self.agent_models.is_empty() {
            true => self.model_name.clone(),
            false => self
                .agent_models
                .iter()
                .map(|(agent, model)| format!("{agent}:{model}"))
                .collect::<Vec<_>>()
                .join(","),
        }
    }

    /// The same for people: `model M`, or `models lead M, coder N`.
    pub(crate) fn models_shown(&self) -> String {
        match self.agent_models.is_empty() {
            true => format!("model {}", self.model_name),
            false => format!(
                "models {}",
                self.agent_models
                    .iter()
                    .map(|(agent, model)| format!("{agent} {model}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// The review mode when none is given: ask at a terminal, else only save.
fn default_review() -> ReviewMode {
    if std::io::stdin().is_terminal() && std::io::stdout().is_terminal() {
        ReviewMode::Ask
    } else {
        ReviewMode::Never
    }
}

/// The project folder: `project`, or the current directory; canonical.
pub fn resolve_project(project: Option<&Path>) -> Result<PathBuf> {
    let dir = match project {
        Some(dir) => dir.to_path_buf(),
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    let canonical = dir
        .canonicalize()
        .with_context(|| format!("project directory {} not found", dir.display()))?;
    if !canonical.is_dir() {
        bail!(
            "{} is not a directory: -C takes the project's folder",
            dir.display()
        );
    }
    Ok(canonical)
}

/// The retry settings of the configuration (`retry.*`, also set by
/// `AH_RETRY_ATTEMPTS`, `AH_RETRY_BASE_MS`, `AH_STREAM_IDLE_SECS`).
pub fn retry_policy(settings: &RetrySettings) -> RetryPolicy {
    RetryPolicy {
        max_attempts: settings.attempts,
        base_delay: Duration::from_millis(settings.base_ms),
        idle_timeout: Duration::from_secs(settings.idle_secs),
        ..RetryPolicy::default()
    }
}
