//! `ah [OPTIONS] PROMPT`: one run from prompt to reviewed patch.
//!
//! Order matters for safety and for not losing work: everything that can be
//! checked cheaply (prompt, project, credentials, policy, sandbox) is checked
//! before the project is copied; once the agent has run, the patch is always
//! saved and the manifest written, whatever happens after.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result, bail};
use clap::parser::ValueSource;

use super::args::{ReviewMode, RunArgs};
use super::config::{self, RetrySettings};
use super::lifecycle::{
    Ending, RunEnd, SignalWatch, Started, close_intake, finish_run, leave_session, start_run,
    workspace_of,
};
use super::live::Controls;
use super::network;
use super::output::Output;
use super::prompt_setup::{self, PromptSetup};
use super::queue::{Claim, claim_exclusive, claim_for_run};
use super::resolve::{self, Target};
use super::sandbox_setup::podman_preflight;
use super::start::{Begin, enter, plan, position, split_prompt};
use super::time_travel;
use super::weakening;
use super::{EXIT_ERROR, EXIT_LIMIT};
use ah_core::agent::event::SessionState;
use ah_core::agent::loop_detect::MAX_DETECTIONS;
use ah_core::agent::prompt;
use ah_core::agent::{AgentConfig, EndReason, Event, run_agent, set_state};
use ah_llm::retry::RetryPolicy;
use ah_llm::{Block, Provider, Role, models};
use ah_record::policy::Policy;
use ah_record::safe_text::terminal_safe;
use ah_sandbox::{BackendKind, podman};
use ah_session::queue::SessionLock;
use ah_session::{BlockRecord, MessageMeta, Session};

/// A mistake on the command line (exit code 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

pub async fn run(mut args: RunArgs, matches: &clap::ArgMatches) -> Result<i32> {
    let (fork, prompt) = split_prompt(&args.prompt);
    let project = resolve_project(args.project.as_deref())?;
    let ah_dir = project.join(".ah");
    let target = resolve::resolve(&ah_dir, &args.session, args.new_session)?;
    // An existing session is opened now: whether and where the run can
    // start depends on it. A new one is created once the checks pass.
    let existing = match &target {
        Target::Existing(_) => Some(target.clone().open(&ah_dir)?),
        Target::Create { .. } => None,
    };
    let (begin, task) = plan(existing.as_ref(), fork, &prompt)?;
    let (mut setup, provider) = settle(&mut args, matches, task).await?;
    let mut session = match existing {
        Some(session) => session,
        None => target.open(&setup.ah_dir)?,
    };
    let lock = match &begin {
        // A new prompt for a busy session waits its turn there.
        Begin::Prompt => {
            let prompt = setup.prompts.blocks.join(
                "

",
            );
            match claim_for_run(&session, &prompt, args.wait).await? {
                Claim::Owner(lock) => lock,
                Claim::Queued(code) => return Ok(code),
            }
        }
        // A fork or a continuation moves the head: not under a live ah.
        Begin::Fork { .. } | Begin::Continue { .. } => claim_exclusive(&session, true)?,
    };
    enter(&session, &begin)?;
    setup.begin = begin;
    // What `ah compact` uses: the provider is not in the model id the API
    // reports.
    session.set_context(super::model::SESSION_MODEL, &setup.model_name)?;
    let mut output = Output::new(args.json);
    let code = run_in_session(
        &args,
        &setup,
        provider.as_ref(),
        &mut session,
        &lock,
        &mut output,
    )
    .await;
    leave_session(&session, &lock, &mut output);
    code
}

/// Everything checked before a session is opened or anything copied: the
/// project, its configuration (filled into `args` where the command line is
/// silent; `matches` tells which), the model and its credentials, the
/// policy, the review mode, the sandbox and the prompts. The run begins
/// with a new prompt unless the caller says otherwise.
pub(super) async fn settle(
    args: &mut RunArgs,
    matches: &clap::ArgMatches,
    task: String,
) -> Result<(RunSetup, Box<dyn Provider>)> {
    let project = resolve_project(args.project.as_deref())?;
    let loaded =
        config::load(&project, &args.overrides).map_err(|err| UsageError(format!("{err:#}")))?;
    let given = weakening::Given {
        backend: matches.value_source("backend") == Some(ValueSource::CommandLine),
        review: args.review.is_some(),
        network: args.sandbox.network.is_some(),
    };
    config::fill(args, matches, &loaded.config);
    let ah_dir = project.join(".ah");
    std::fs::create_dir_all(&ah_dir)
        .with_context(|| format!("cannot create {}", ah_dir.display()))?;
    let selection = super::model::select(
        args.model.as_deref().unwrap_or(models::DEFAULT_MODEL),
        &args.config,
    )?;
    let provider = selection.connect(retry_policy(&args.config.retry))?;
    let (policy, user_policy) = policies(&project, args, &loaded.user)?;
    let settings = weakening::Settings {
        config: &loaded.config,
        user_config: &loaded.user,
        policy: &policy,
        user_policy: &user_policy,
        given,
    };
    if let Some(line) = weakening::warning(&settings) {
        eprintln!("{}", terminal_safe(&line));
    }
    network::check_backend(args.backend, &args.sandbox)?;
    let review_mode = match (args.review, args.json) {
        (Some(mode), _) => mode,
        // JSON consumers are programs: nobody to ask.
        (None, true) => ReviewMode::Never,
        (None, false) => default_review(),
    };
    if args.json && review_mode == ReviewMode::Ask {
        return Err(UsageError(
            "--json cannot ask for a review (stdout carries the events): use --review auto or never"
                .into(),
        )
        .into());
    }
    let image = args
        .image
        .clone()
        .unwrap_or_else(|| podman::DEFAULT_IMAGE.to_string());
    if args.backend == BackendKind::Podman {
        podman_preflight(&image, args.json).await?;
    }
    let prompts = prompt_setup::prepare(
        &project,
        &ah_dir,
        workspace_of(args.backend),
        &task,
        &args.skills,
    )?;
    let setup = RunSetup {
        project,
        ah_dir,
        model_name: selection.display_name(),
        model: selection.model,
        policy,
        review_mode,
        image,
        task,
        prompts,
        begin: Begin::Prompt,
    };
    Ok((setup, provider))
}

/// The run's policy, and what it would be without the project's own
/// `.ah/policy.toml` and `.ah/config.toml` (`user`: the configuration
/// without the project's file), both built the same way otherwise.
fn policies(project: &Path, args: &RunArgs, user: &config::Config) -> Result<(Policy, Policy)> {
    let finish = |policy: Policy, limits: &config::Config| -> Result<Policy> {
        let mut policy = policy.with_sandbox_flags(&args.sandbox.allow_hosts, &args.sandbox.env)?;
        let review = &limits.review;
        policy.set_review_limits(review.max_lines, review.max_files, review.max_bytes);
        Ok(policy)
    };
    let (file, allow, deny) = (args.policy.as_deref(), &args.allow, &args.deny);
    let policy = finish(Policy::load(project, file, allow, deny)?, &args.config)?;
    let user_policy = finish(Policy::load_without_project(file, allow, deny)?, user)?;
    Ok((policy, user_policy))
}

/// What `run` settled before the session was opened.
pub(super) struct RunSetup {
    pub(super) project: PathBuf,
    pub(super) ah_dir: PathBuf,
    pub(super) model: models::ModelInfo,
    /// The model as people see it (`opus`'s id, `ollama:qwen2.5-coder:7b`).
    pub(super) model_name: String,
    pub(super) policy: Policy,
    pub(super) review_mode: ReviewMode,
    pub(super) image: String,
    pub(super) task: String,
    pub(super) prompts: PromptSetup,
    /// Where in the session tree the run starts.
    pub(super) begin: Begin,
}

/// The run proper: prepare the work copy and the sandbox, run the agent,
/// save the patch and the manifest, review.
async fn run_in_session(
    args: &RunArgs,
    setup: &RunSetup,
    provider: &dyn Provider,
    session: &mut Session,
    lock: &SessionLock,
    output: &mut Output,
) -> Result<i32> {
    let RunSetup {
        ah_dir,
        model,
        prompts,
        begin,
        ..
    } = setup;
    let started_at = SystemTime::now();
    let seq_before = session.last_seq()?;
    let Started {
        mut run,
        origin,
        live: _live,
    } = start_run(args, setup, session, false).await?;

    // A session left mid-turn by a crash gets its missing tool results first.
    let parent = position(session)?;
    let start = match (begin, parent) {
        // The turn is sent again; the model learns of files that are not
        // what the conversation says.
        (Begin::Continue { .. }, Some(from)) => match origin.continue_note() {
            Some(note) => {
                let block = BlockRecord::from(Block::Text { text: note });
                let meta = MessageMeta::default();
                session.append(Some(&from), Role::User, &[block], &meta)?.id
            }
            None => from,
        },
        (_, parent) => {
            let mut prompt_blocks: Vec<BlockRecord> = prompts
                .blocks
                .iter()
                .map(|text| BlockRecord::from(Block::Text { text: text.clone() }))
                .collect();
            if parent.is_some() {
                let note = origin.note();
                prompt_blocks.push(BlockRecord::from(Block::Text { text: note }));
            }
            let user = session.append(
                parent.as_deref(),
                Role::User,
                &prompt_blocks,
                &MessageMeta::default(),
            )?;
            user.id
        }
    };
    time_travel::started(session)?;
    let config = AgentConfig {
        model: model.clone(),
        system: prompt::with_withheld_note(&prompts.system, run.withheld()),
        tools: run.tool_specs(model.edit_format),
        max_tools: args.max_tools,
        loop_window: args.loop_window,
        thinking_budget: None,
        compact_reserve: args.compact_reserve,
        compact_prompt: prompt::compact_prompt(ah_dir)?,
    };
    output.show(&set_state(session, SessionState::Processing)?);
    let (signals, mut abort) = SignalWatch::start(lock, output.screen());
    let wiring = signals.wiring(&abort, output, session.path());
    let controls = Controls::start(args.json, wiring);
    let finished = {
        let mut on_event = |event: &Event| output.show(event);
        run_agent(
            &config,
            provider,
            session,
            &mut run,
            start,
            &mut abort,
            lock,
            &mut on_event,
        )
        .await
    };
    // The review's prompts need the keys and the terminal's own mode.
    drop(controls);
    signals.loop_over();
    let outcome = finished
        .as_ref()
        .map_or(EndReason::Failed, |summary| summary.reason);
    close_intake(session, lock, outcome, output)?;
    let end = match finished {
        Err(err) => RunEnd::Failed(err.into()),
        Ok(summary) => match summary.reason {
            EndReason::Aborted => RunEnd::Aborted,
            EndReason::Looping => RunEnd::Stopped {
                why: format!("the model repeated itself {MAX_DETECTIONS} times"),
                next: "continue with a clearer prompt (--loop-window 0 turns loop detection off)"
                    .to_string(),
                code: EXIT_ERROR,
            },
            // The model was not done: its unfinished work is not applied.
            EndReason::ToolLimit => RunEnd::Stopped {
                why: format!(
                    "the run reached the tool call limit (--max-tools {})",
                    args.max_tools.unwrap_or_default()
                ),
                next: "let the model go on from where it stopped with `ah` and no prompt \
                       (a higher --max-tools gives it more calls)"
                    .to_string(),
                code: EXIT_LIMIT,
            },
            EndReason::DiskBudget => RunEnd::Stopped {
                why: "the run's files passed its disk budget".to_string(),
                next: "look at the patch and `ah apply` it if it is what you want, or free \
                       space and raise --disk-budget and go on with `ah`"
                    .to_string(),
                code: EXIT_LIMIT,
            },
            _ => RunEnd::Finished,
        },
    };
    let ending = Ending {
        args,
        setup,
        started_at,
        seq_before,
        restored: origin.restored().cloned(),
    };
    finish_run(run, end, &ending, session, output).await
}

/// The review mode when none is given: ask at a terminal, else only save.
fn default_review() -> ReviewMode {
    if std::io::stdin().is_terminal() && std::io::stdout().is_terminal() {
        ReviewMode::Ask
    } else {
        ReviewMode::Never
    }
}

fn resolve_project(project: Option<&Path>) -> Result<PathBuf> {
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
pub(super) fn retry_policy(settings: &RetrySettings) -> RetryPolicy {
    RetryPolicy {
        max_attempts: settings.attempts,
        base_delay: Duration::from_millis(settings.base_ms),
        idle_timeout: Duration::from_secs(settings.idle_secs),
        ..RetryPolicy::default()
    }
}
