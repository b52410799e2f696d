//! The work engine (`ah work ISSUE.md`, or `--issue TEXT`): one work
//! session, plan → do → check → act with fix rounds (see `crate::work`),
//! in one run with its own session database `.ah/work-<ulid>.db`. The run
//! starts and ends as any run does: one work copy, one patch, one review.
//! With `ah work -N`, each attempt is a work loop of its own from the one
//! issue message, in a run of its own (its check is the work loop's own:
//! an attempt whose act phase said `done` finished).

use std::path::Path;
use std::sync::Arc;

use anyhow::{Result, anyhow};
use ulid::Ulid;

use super::engine::{Driven, Engine, Entry, Loop};
use super::queue::claim_exclusive;
use super::settle::{RunSetup, run_model, settle};
use super::{Front, LockedRun, Open, RunEnd, RunOptions, RunParts, Stop, UsageError};
use crate::agent::EndReason;
use crate::agent::prompt;
use crate::config::own_files::read_user;
use crate::event::{Event, RunEvent};
use crate::work::{Phase, WorkConfig, WorkEnd, WorkRecord, Worker, store_issue};
use ah_base::count;
use ah_llm::Provider;
use ah_record::run::Run;
use ah_session::Session;

/// The work phases, as an engine of the run: the issue given (else the
/// file named in the prompt) and the most do rounds, as asked; the run's
/// model once its opening connected it.
pub(crate) struct WorkEngine {
    issue: Option<String>,
    max_rounds: Option<u32>,
    provider: Option<Arc<dyn Provider>>,
}

impl WorkEngine {
    pub(crate) fn new(issue: Option<String>, max_rounds: Option<u32>) -> WorkEngine {
        WorkEngine {
            issue,
            max_rounds,
            provider: None,
        }
    }
}

#[async_trait::async_trait(?Send)]
impl Engine for WorkEngine {
    /// Reads the issue, settles the run, and opens and locks a new work
    /// session (or `--db`).
    async fn open(&mut self, options: &mut RunOptions, front: &mut dyn Front) -> Result<Open> {
        let issue = read_issue(options, self.issue.take())?;
        let (setup, provider) = settle(options, issue, run_model, front).await?;
        self.provider = Some(Arc::from(provider));
        open_session(options, setup)
    }

    fn enter(self: Box<Self>, at: Entry<'_>) -> Result<Box<dyn Loop>> {
        // The configuration is settled by now: its value is the default.
        let max_rounds = self.max_rounds.unwrap_or(at.options.config.work.max_rounds);
        let provider = self
            .provider
            .ok_or_else(|| anyhow!("the work phases were entered into a run they did not open"))?;
        let config = enter(
            at.options, at.setup, at.session, at.run, max_rounds, at.front,
        );
        let root = store_issue(at.session, &config.issue)?;
        Ok(Box::new(WorkLoop {
            config,
            provider,
            root,
        }))
    }
}

/// The work phases in their started run: their configuration, the issue's
/// message and their model's connection (one for every attempt).
#[derive(Clone)]
struct WorkLoop {
    config: WorkConfig,
    provider: Arc<dyn Provider>,
    root: String,
}

#[async_trait::async_trait(?Send)]
impl Loop for WorkLoop {
    async fn drive(self: Box<Self>, with: RunParts<'_>) -> Driven {
        drive(*self, with).await
    }

    fn again(&self) -> Option<Box<dyn Loop>> {
        Some(Box::new(self.clone()))
    }
}

/// Opens and locks a new work session (or `--db`).
fn open_session(options: &RunOptions, setup: RunSetup) -> Result<Open> {
    let db = match &options.session.db {
        Some(db) => db.clone(),
        None => setup.ah_dir.join(format!("work-{}.db", Ulid::generate())),
    };
    let session = Session::open(&db)?;
    let lock = claim_exclusive(&session, true)?;
    Ok(Open::Run(Box::new(LockedRun {
        setup,
        session,
        lock,
    })))
}

/// The largest issue file read.
const ISSUE_CAP: u64 = 1024 * 1024;

/// The issue: `--issue TEXT`, or the one file named.
fn read_issue(args: &RunOptions, issue: Option<String>) -> Result<String> {
    let text = match (issue, args.prompt.as_slice()) {
        (Some(_), [_, ..]) => {
            return Err(UsageError::Message(
                "give the issue either as a file or with --issue, not both".into(),
            )
            .into());
        }
        (Some(text), []) => text,
        (None, [file]) => read_user(Path::new(file), ISSUE_CAP)
            .map_err(|why| anyhow!("cannot read the issue file {why}"))?
            .ok_or_else(|| anyhow!("the issue file {file} does not exist"))?,
        (None, _) => {
            return Err(UsageError::Message(
                "no issue given: ah work ISSUE.md, or ah work --issue \"what to do\" (see ah work --help)"
                    .into(),
            )
            .into());
        }
    };
    if text.trim().is_empty() {
        return Err(UsageError::Message("the issue is empty: say what to do".into()).into());
    }
    Ok(text)
}

/// The work session's configuration in its started run.
fn enter(
    options: &RunOptions,
    setup: &RunSetup,
    session: &Session,
    run: &Run,
    max_rounds: u32,
    front: &mut dyn Front,
) -> WorkConfig {
    front.notice(&format!("work session {}", session.path().display()));
    WorkConfig {
        // The issue as the prompt setup left it (`/` commands and
        // `--skill`s expanded).
        issue: setup.prompts.blocks.join("\n\n"),
        model: setup.model.clone(),
        system: prompt::with_withheld_note(&setup.prompts.system, run.withheld()),
        files: setup.files.clone(),
        max_rounds,
        max_tools: options.max_tools,
        loop_window: options.loop_window,
        compact_reserve: options.compact_reserve,
    }
}

/// Runs the phases; returns how the session's intake closes, what the end
/// of the run does and where its phases' branches end.
async fn drive(work: WorkLoop, with: RunParts<'_>) -> Driven {
    let RunParts {
        options,
        session,
        run,
        abort,
        lock,
        front,
    } = with;
    let id = run.id();
    let worked = {
        let mut on_event = |event: &Event| front.show(&RunEvent::of(&id, event));
        Worker {
            config: &work.config,
            root: &work.root,
            provider: work.provider.as_ref(),
            session,
            run,
            abort,
            inbox: lock,
            on_event: &mut on_event,
        }
        .run()
        .await
    };
    match worked {
        Err(err) => Driven::of((EndReason::Failed, RunEnd::Failed(err.into()))),
        Ok(record) => Driven {
            reason: EndReason::Done,
            end: run_end(&record, &options.max_tools),
            heads: record
                .phases
                .iter()
                .filter_map(|phase| phase.last_message.clone())
                .collect(),
        },
    }
}

/// What the end of the work session means for the run: only `done` (or a
/// poisoned run, which the review refuses) goes to review.
fn run_end(record: &WorkRecord, max_tools: &Option<u32>) -> RunEnd {
    let stopped = |why: String, next: &str| RunEnd::Stopped {
        why,
        next: next.to_string(),
        stop: Stop::Unfinished,
    };
    let Some(end) = record.end else {
        return RunEnd::Failed(anyhow!("the work session ended without an outcome"));
    };
    match end {
        WorkEnd::Done => RunEnd::Finished,
        WorkEnd::Friction => stopped(
            "the act phase found friction that blocks the work".to_string(),
            "read what blocked it in the run's phases/act/friction.md",
        ),
        WorkEnd::MaxRounds => stopped(
            format!(
                "the checks still failed after {}",
                count(record.max_rounds, "round", "rounds")
            ),
            "read phases/check/ and run ah work again with a clearer issue or more --max-rounds",
        ),
        WorkEnd::MissingOutput { phase } => RunEnd::Failed(anyhow!(
            "the {} phase ended twice without {} (it was reminded once); the work session stops: \
             look at its messages in the work session database, or run ah work again",
            phase.as_str(),
            phase.report_name()
        )),
        WorkEnd::Stopped { reason, phase } => stopped_phase(phase, reason, max_tools),
    }
}

fn stopped_phase(phase: Phase, reason: EndReason, max_tools: &Option<u32>) -> RunEnd {
    let name = phase.as_str();
    let (why, next, stop) = match reason {
        EndReason::Aborted => return RunEnd::Aborted,
        EndReason::Done | EndReason::Poisoned | EndReason::Finalized => return RunEnd::Finished,
        EndReason::Looping => (
            format!("the model repeated itself in the {name} phase"),
            "run ah work again with a clearer issue (--loop-window 0 turns loop detection off)",
            Stop::Unfinished,
        ),
        EndReason::ToolLimit => (
            format!(
                "the {name} phase reached the tool call limit (--max-tools {})",
                max_tools.unwrap_or_default()
            ),
            "run ah work again with a higher --max-tools",
            Stop::Limit,
        ),
        EndReason::DiskBudget => (
            format!("the {name} phase passed the run's disk budget"),
            "look at the patch, then raise --disk-budget and run ah work again",
            Stop::Limit,
        ),
        EndReason::Stopped | EndReason::Failed => (
            format!("the model stopped in the {name} phase before finishing it"),
            "run ah work again",
            Stop::Unfinished,
        ),
    };
    RunEnd::Stopped {
        why,
        next: next.to_string(),
        stop,
    }
}
