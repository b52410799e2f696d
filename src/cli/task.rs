//! `ah [OPTIONS] PROMPT`: one run from prompt to reviewed patch.
//!
//! Order matters for safety and for not losing work: everything that can be
//! checked cheaply (prompt, project, credentials, policy, sandbox) is checked
//! before the project is copied; once the agent has run, the patch is always
//! saved and the manifest written, whatever happens after.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result, bail};

use super::abort::{self, EXIT_ABORTED};
use super::args::{ReviewMode, RunArgs};
use super::output::Output;
use super::review::{self, ReviewOutcome};
use super::sandbox_setup::{configure_sandbox, output_limits, podman_preflight};
use super::time_travel;
use super::{EXIT_ERROR, EXIT_NOT_APPLIED, EXIT_OK};
use crate::agent::event::SessionState;
use crate::agent::loop_detect::MAX_DETECTIONS;
use crate::agent::prompt::{self, Workspace};
use crate::agent::{
    AgentConfig, EndReason, Event, abort_channel, busy, close_interrupted, record_event, run_agent,
    set_state,
};
use crate::llm::anthropic::AnthropicClient;
use crate::llm::retry::RetryPolicy;
use crate::llm::{Block, Role, models};
use crate::sandbox::none::NoneBackend;
use crate::sandbox::policy::Policy;
use crate::sandbox::run::{Run, RunResult};
use crate::sandbox::rundir::{Manifest, ReviewRecord, RunDir};
use crate::sandbox::{Backend, BackendKind, podman};
use crate::session::{BlockRecord, MessageMeta, Session};

/// Told to the model when a session continues in a new run: its earlier
/// edits were in another work copy and reach this one only if applied.
const NEW_RUN_NOTE: &str = "[ah: this message starts a new run. The work directory is a fresh \
copy of the project as it is now: changes from earlier runs are in it only if the user applied them.]";

/// A mistake on the command line (exit code 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

pub async fn run(args: RunArgs) -> Result<i32> {
    let task = args.prompt.join(" ");
    if task.trim().is_empty() {
        return Err(UsageError(
            "no prompt given: say what to do, e.g. ah -C ~/src/repo \"make the tests pass\" (see ah --help)"
                .into(),
        )
        .into());
    }
    let project = resolve_project(args.project.as_deref())?;
    let ah_dir = project.join(".ah");
    std::fs::create_dir_all(&ah_dir)
        .with_context(|| format!("cannot create {}", ah_dir.display()))?;
    let model = models::resolve(
        &args
            .model
            .clone()
            .unwrap_or_else(models::default_model_name),
    );
    let provider = AnthropicClient::from_env(retry_policy()?)?;
    let policy = Policy::load(&project, args.policy.as_deref(), &args.allow, &args.deny)?;
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
        podman_preflight(&image).await?;
    }
    let mut session = open_session(&args, &ah_dir)?;
    refuse_if_busy(&session)?;
    let mut output = Output::new(args.json);
    let setup = RunSetup {
        project,
        ah_dir,
        model,
        policy,
        review_mode,
        image,
        task,
    };
    let code = run_in_session(&args, &setup, &provider, &mut session, &mut output).await;
    // Whatever happened, no process works on the session any more.
    if let Ok(event) = set_state(&session, SessionState::Closed) {
        output.show(&event);
    }
    code
}

/// Another live ah working on the session would fork it under its feet.
pub(super) fn refuse_if_busy(session: &Session) -> Result<()> {
    if let Some(pid) = busy(session)? {
        bail!(
            "session {} is in use by ah process {pid}: wait for it to finish, or start a new \
             session with -n",
            session.id()
        );
    }
    Ok(())
}

/// What `run` settled before the session was opened.
struct RunSetup {
    project: PathBuf,
    ah_dir: PathBuf,
    model: models::ModelInfo,
    policy: Policy,
    review_mode: ReviewMode,
    image: String,
    task: String,
}

/// The run proper: prepare the work copy and the sandbox, run the agent,
/// save the patch and the manifest, review.
async fn run_in_session(
    args: &RunArgs,
    setup: &RunSetup,
    provider: &AnthropicClient,
    session: &mut Session,
    output: &mut Output,
) -> Result<i32> {
    let RunSetup {
        project,
        ah_dir,
        model,
        policy,
        review_mode,
        image,
        task,
    } = setup;
    let review_mode = *review_mode;
    let dir = RunDir::create(ah_dir)?;
    let _live = dir.hold_live()?;
    let started_at = SystemTime::now();
    eprintln!(
        "run {} ({} backend, model {})",
        dir.id(),
        args.backend.as_str(),
        model.id
    );
    let (start, restored) =
        time_travel::prepare_files(session, args.no_restore, project, ah_dir, &dir)?;
    let backend: Box<dyn Backend> = match args.backend {
        BackendKind::None => Box::new(NoneBackend::new(dir.work_dir())),
        BackendKind::Podman => {
            let mut options =
                podman::PodmanOptions::new(&dir.id().to_string(), project, &dir.work_dir());
            options.image = image.clone();
            configure_sandbox(&mut options, &args.sandbox);
            Box::new(podman::PodmanBackend::start(&options).await?)
        }
    };
    let workspace = match args.backend {
        BackendKind::Podman => Workspace::Container,
        BackendKind::None => Workspace::Host,
    };
    let mut run = Run::attach(
        dir,
        start,
        backend,
        policy.clone(),
        args.max_artifact_size.saturating_mul(1024 * 1024),
    );
    run.set_output_limits(output_limits(&args.output_limits));

    // A session left mid-turn by a crash gets its missing tool results first.
    close_interrupted(session)?;
    let parent = session.head()?;
    let mut prompt_blocks = vec![BlockRecord::from(Block::Text { text: task.clone() })];
    if parent.is_some() {
        let note = restored
            .as_ref()
            .map_or_else(|| NEW_RUN_NOTE.to_string(), time_travel::restored_note);
        prompt_blocks.push(BlockRecord::from(Block::Text { text: note }));
    }
    let user = session.append(
        parent.as_deref(),
        Role::User,
        &prompt_blocks,
        &MessageMeta::default(),
    )?;
    time_travel::started(session)?;
    let config = AgentConfig {
        model: model.clone(),
        system: prompt::system_prompt(ah_dir, workspace)?,
        max_tools: args.max_tools,
        loop_window: args.loop_window,
        thinking_budget: None,
        compact_reserve: args.compact_reserve,
        compact_prompt: prompt::compact_prompt(ah_dir)?,
    };
    output.show(&set_state(session, SessionState::Processing)?);
    // The first SIGINT/SIGTERM asks the loop to stop; it keeps what was
    // streamed and answers every pending tool call itself.
    // Once the loop is over there is nothing to stop gracefully: a signal
    // then exits at once (the session is consistent; a leftover sandbox is
    // removed by the next run).
    let (stop, mut abort) = abort_channel();
    let loop_over = Arc::new(AtomicBool::new(false));
    let over = Arc::clone(&loop_over);
    tokio::spawn(async move {
        abort::first_signal().await;
        if over.load(Ordering::SeqCst) {
            eprintln!("interrupted after the run; its patch is in the run directory");
            std::process::exit(EXIT_ABORTED);
        }
        eprintln!(
            "\naborting: saving the patch and removing the sandbox (press Ctrl+C again to exit now)"
        );
        stop.abort();
    });
    let finished = {
        let mut on_event = |event: &Event| output.show(event);
        run_agent(
            &config,
            provider,
            session,
            &mut run,
            user.id,
            &mut abort,
            &mut on_event,
        )
        .await
    };
    loop_over.store(true, Ordering::SeqCst);
    output.show(&set_state(session, SessionState::Idle)?);

    let run_dir = run.dir().clone();
    let result = run.finish().await?;
    let mut manifest = Manifest::new(
        &run_dir.id().to_string(),
        task,
        &model.id,
        args.backend.as_str(),
    );
    manifest.image = (args.backend == BackendKind::Podman).then(|| image.clone());
    manifest.session_db = Some(session.path().display().to_string());
    manifest.restored_from = restored;
    manifest.started_at = crate::session::format_rfc3339(started_at);
    fill_manifest(&mut manifest, &result);
    for warning in &result.warnings {
        eprintln!("warning: {warning}");
    }
    manifest.save(&run_dir.manifest_path())?;

    let summary = match finished {
        Ok(summary) => summary,
        Err(err) => {
            eprintln!("patch so far saved: {}", result.patch_path.display());
            return Err(err.into());
        }
    };
    if summary.reason == EndReason::Aborted {
        eprintln!(
            "aborted; patch so far saved: {}",
            result.patch_path.display()
        );
        let record = ReviewRecord {
            mode: review_mode.as_str().to_string(),
            decision: "aborted".to_string(),
            reason: Some("the run was interrupted".to_string()),
        };
        announce(session, output, review_event(&result, &record, false));
        manifest.review = Some(record);
        manifest.save(&run_dir.manifest_path())?;
        return Ok(EXIT_ABORTED);
    }
    if summary.reason == EndReason::Looping {
        // A run that went in circles is not offered for applying: its
        // patch is kept for `ah apply` after a look.
        let why = format!("the model repeated itself {MAX_DETECTIONS} times");
        eprintln!(
            "stopped: {why}; the patch so far is saved, not applied: {}\n\
             look at it and apply it with `ah apply {}`, or continue with a clearer prompt \
             (--loop-window 0 turns loop detection off)",
            result.patch_path.display(),
            run_dir.id()
        );
        let record = ReviewRecord {
            mode: review_mode.as_str().to_string(),
            decision: "stopped".to_string(),
            reason: Some(why),
        };
        announce(session, output, review_event(&result, &record, false));
        manifest.review = Some(record);
        manifest.finished_at = Some(crate::session::format_rfc3339(SystemTime::now()));
        manifest.save(&run_dir.manifest_path())?;
        return Ok(EXIT_ERROR);
    }
    let reviewed = review::review(review_mode, project, &result, policy, task, args.no_commit)?;
    announce(
        session,
        output,
        review_event(&result, &reviewed.record, reviewed.applied),
    );
    manifest.review = Some(reviewed.record.clone());
    manifest.applied = reviewed.applied;
    manifest.finished_at = Some(crate::session::format_rfc3339(SystemTime::now()));
    manifest.save(&run_dir.manifest_path())?;
    Ok(exit_code(review_mode, &result, &reviewed))
}

/// Shows an event of the run's end and keeps it in the session's event log
/// (a failed insert only loses the log entry; the manifest has the facts).
fn announce(session: &Session, output: &mut Output, event: Event) {
    record_event(session, None, &event);
    output.show(&event);
}

/// The event that tells consumers what became of the patch.
fn review_event(result: &RunResult, record: &ReviewRecord, applied: bool) -> Event {
    Event::ReviewDone {
        patch: result.patch_path.display().to_string(),
        files: result.patch.files.len(),
        added: result.patch.added_lines,
        removed: result.patch.removed_lines,
        mode: record.mode.clone(),
        decision: record.decision.clone(),
        reason: record.reason.clone(),
        applied,
    }
}

fn exit_code(mode: ReviewMode, result: &RunResult, reviewed: &ReviewOutcome) -> i32 {
    if reviewed.failed {
        EXIT_ERROR
    } else if mode != ReviewMode::Never && !result.patch.files.is_empty() && !reviewed.applied {
        EXIT_NOT_APPLIED
    } else {
        EXIT_OK
    }
}

fn fill_manifest(manifest: &mut Manifest, result: &RunResult) {
    manifest.baseline = Some(result.baseline.clone());
    manifest.head = Some(result.head.clone());
    manifest.steps = result.steps;
    manifest.violations = result.violations.clone();
    manifest.patch = Some(result.patch.summary());
    manifest.warnings = result.warnings.clone();
    manifest.poisoned = result.poisoned.clone();
    manifest.artifacts = result
        .artifacts
        .copied
        .iter()
        .map(|c| c.path.clone())
        .collect();
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

fn open_session(args: &RunArgs, ah_dir: &Path) -> Result<Session> {
    if let Some(db) = &args.db {
        return Ok(Session::open(db)?);
    }
    if !args.new_session
        && let Some(latest) = Session::latest(ah_dir)?
    {
        return Ok(Session::open(&latest)?);
    }
    Ok(Session::create(ah_dir)?)
}

/// Retry settings, adjustable through the environment (`AH_RETRY_ATTEMPTS`,
/// `AH_RETRY_BASE_MS`, `AH_STREAM_IDLE_SECS`).
pub(super) fn retry_policy() -> Result<RetryPolicy> {
    let mut policy = RetryPolicy::default();
    if let Some(n) = env_number("AH_RETRY_ATTEMPTS")? {
        policy.max_attempts = n as u32;
    }
    if let Some(ms) = env_number("AH_RETRY_BASE_MS")? {
        policy.base_delay = Duration::from_millis(ms);
    }
    if let Some(secs) = env_number("AH_STREAM_IDLE_SECS")? {
        policy.idle_timeout = Duration::from_secs(secs);
    }
    Ok(policy)
}

fn env_number(name: &str) -> Result<Option<u64>> {
    match std::env::var(name) {
        Ok(value) => value
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| UsageError(format!("{name}={value:?} is not a whole number")).into()),
        Err(_) => Ok(None),
    }
}
