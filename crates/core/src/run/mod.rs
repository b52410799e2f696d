//! One run, from options to a handled patch, for every front-end: [`run`]
//! settles configuration, policy and provider (`settle`), opens and locks
//! the session, starts the run (time travel, network, and the sandbox's
//! start in the background: see `lifecycle`), runs an [`Engine`] (the
//! single agent, or the work phases) while the sandbox starts, closes the
//! session's intake and finishes (patch, manifest, artifacts, egress
//! report, review). Order matters for safety and for not losing work:
//! everything that can be checked cheaply is checked before the project is
//! copied; once the engine has run, the patch is always saved and the
//! manifest written, whatever happens after.
//!
//! What the user sees goes to the [`Front`]: events, the review, the image
//! build's progress, the live keys. The front-end maps the [`Outcome`] to
//! an exit code.

mod agent;
mod attempts;
mod begin;
mod best;
mod engine;
mod front;
mod lifecycle;
mod limits;
mod model;
mod network;
mod options;
mod org;
mod prompt;
pub mod queue;
pub mod resolve;
pub(crate) mod review;
mod revise;
pub(crate) use revise::later_message as revise_message;
mod sandbox;
mod settle;
pub mod signals;
mod weakening;
mod work;

use anyhow::Result;

use crate::agent::{AbortSignal, set_state};
use crate::event::RunEvent;
use crate::event::SessionState;
use ah_record::run::Run;
use ah_session::Session;
use ah_session::queue::SessionLock;

pub use attempts::{Attempt, AttemptOptions, Check, run_attempts};
pub use begin::split_prompt;
pub use best::best_of;
pub use front::{Console, Front, LiveControls};
pub(crate) use lifecycle::connection;
pub use model::{SESSION_MODEL, select as select_model};
pub use options::{
    BackendKind, Cleanup, NetworkMode, OnCommandLine, OutputLimit, OutputLimits, ReviewMode,
    RunOptions, SandboxOptions, SessionChoice, UlimitKind, parse_size,
};
pub use org::{OrgRequest, QUESTION_FILE};
pub use review::{
    Choice, FileToChoose, HunkDecision, Pager, Part, PatchHunks, PatchToChoose, Question,
    ReviewFront, Revise, Tone, Unit, Verdict, Whole,
};
pub use sandbox::runtime;
pub(crate) use settle::RunSetup;
pub use settle::{resolve_project, retry_policy};

use ah_record::safe_text::terminal_safe;
use engine::{Driven, Entry, Loop};
use lifecycle::{
    Ending, SandboxStart, SessionRollback, Started, close_intake, finish_run, leave_session,
    start_run,
};
use signals::SignalWatch;

/// A mistake in what was asked (exit code 2 at the command line).
#[derive(Debug, thiserror::Error)]
pub enum UsageError {
    /// What was wrong, in words.
    #[error("{0}")]
    Message(String),
    /// An error of a lower layer that is the user's mistake (a bad
    /// configuration file, an unknown model), kept with its sources.
    #[error(transparent)]
    Mistake(Box<dyn std::error::Error + Send + Sync>),
}

/// What drives a run's tools, as a front-end asks for it (each is an
/// engine of `run/engine.rs`).
#[derive(Debug, Clone)]
pub enum Engine {
    /// One agent on the task in `RunOptions::prompt`, in the project's
    /// session.
    Agent,
    /// The work phases on an issue (`issue`, or the one file named in the
    /// prompt), in a work session of its own.
    Work {
        issue: Option<String>,
        max_rounds: Option<u32>,
    },
    /// Several agents on the task (`ah org`), in a new org session or the
    /// one the options name.
    Org(OrgRequest),
}

/// How a run ended, for the front-end's exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The patch was handled as asked (applied, empty, or saved under
    /// `--review never`).
    Done,
    /// The patch was saved but not applied.
    NotApplied,
    /// Something failed after the patch was saved (an apply, say).
    Failed,
    /// The run was interrupted; the patch so far is saved.
    Aborted,
    /// The engine stopped before it was done; the patch so far is saved.
    Stopped(Stop),
    /// None of a task's attempts passed its check: nothing was applied,
    /// every attempt's patch is saved.
    NonePassed,
    /// Another ah holds the session: the prompt was queued for it (and,
    /// with `wait`, followed: `answered` says whether it was answered).
    Queued { answered: bool },
}

impl Outcome {
    /// The exit code a front-end ends with for this outcome: 0 done, 1
    /// failed (or stopped unfinished), 3 saved but not applied, 4 stopped
    /// at a limit, 5 a question nobody answered, 6 no attempt passed, 130
    /// aborted.
    pub fn exit_code(self) -> i32 {
        match self {
            Outcome::Done | Outcome::Queued { answered: true } => 0,
            Outcome::Failed | Outcome::Queued { answered: false } => 1,
            Outcome::Stopped(Stop::Unfinished) => 1,
            Outcome::NotApplied => 3,
            Outcome::Stopped(Stop::Limit) => 4,
            Outcome::Stopped(Stop::Question) => 5,
            Outcome::NonePassed => 6,
            Outcome::Aborted => signals::EXIT_ABORTED,
        }
    }
}

/// Why an engine stopped early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// A limit of the run (tool calls, disk budget).
    Limit,
    /// The model could not finish (it looped, found friction, ran out of
    /// rounds).
    Unfinished,
    /// An agent asked the user and nobody was there to answer (`ah org`).
    Question,
}

/// How the engine's part of a run ended, as the end of the run treats it.
pub(crate) enum RunEnd {
    /// Review the patch.
    Finished,
    /// Interrupted: the patch so far is saved.
    Aborted,
    /// Stopped for `why`: the patch is saved, not offered for applying;
    /// `next` says what the user can do besides `ah apply`.
    Stopped {
        why: String,
        next: String,
        stop: Stop,
    },
    /// Failed: the patch so far is saved and the error is returned.
    Failed(anyhow::Error),
}

/// Runs `engine` as `options` say; what the user sees goes to `front`.
pub async fn run(
    mut options: RunOptions,
    engine: Engine,
    front: &mut dyn Front,
) -> Result<Outcome> {
    let mut engine = engine::engine(engine);
    let opened = engine.open(&mut options, front).await?;
    let LockedRun {
        setup,
        mut session,
        lock,
    } = match opened {
        Open::Run(opened) => *opened,
        Open::Queued(outcome) => return Ok(outcome),
    };
    // What `ah compact` uses: the provider is not in the model id the API
    // reports.
    session.set_context(SESSION_MODEL, &setup.models())?;
    let outcome = run_in_session(&options, &setup, &mut session, &lock, engine, front).await;
    leave_session(&session, &lock, front, &[&setup.run_id]);
    outcome
}

/// What an engine's opening leaves for the run: or the prompt was queued.
pub(crate) enum Open {
    Run(Box<LockedRun>),
    Queued(Outcome),
}

/// A settled run with its session open and locked (the engine keeps what
/// it talks to).
pub(crate) struct LockedRun {
    pub(crate) setup: RunSetup,
    pub(crate) session: Session,
    pub(crate) lock: SessionLock,
}

/// The run proper: prepare the work copy and start the sandbox, run the
/// engine, save the patch and the manifest, review. The engine does not
/// wait for the sandbox (its first command does); a sandbox that cannot
/// start stops the engine wherever it is and ends the run with the start's
/// error, the session as it was before (see `lifecycle::SessionRollback`).
async fn run_in_session(
    options: &RunOptions,
    setup: &RunSetup,
    session: &mut Session,
    lock: &SessionLock,
    engine: Box<dyn engine::Engine>,
    front: &mut dyn Front,
) -> Result<Outcome> {
    let started_at = std::time::SystemTime::now();
    let before = SessionRollback::of(session)?;
    let Started {
        mut run,
        origin,
        live,
        sandbox,
    } = start_run(options, setup, session, front)?;
    run.set_project_tools(setup.project_tools.clone());
    let (signals, mut abort) = SignalWatch::start(lock, front.console());
    if let Err(err) = start_servers(&mut run, setup, &sandbox, &mut abort, front).await {
        signals.loop_over();
        return Err(abandon(run, sandbox, &before, session, front, err).await);
    }
    let at = Entry {
        options,
        setup,
        session,
        run: &run,
        origin: &origin,
        front,
    };
    let entered = enter(engine, at);
    let engine_loop = match entered {
        Ok(ready) => ready,
        Err(err) => {
            signals.loop_over();
            sandbox.shutdown(front).await;
            return Err(err);
        }
    };
    let mut engine_loop = engine_loop;
    let mut review = revise::HeldReview::default();
    let driven = loop {
        // A copy of the loop, to go on with when the review sends the
        // model back.
        let spare = engine_loop.again();
        let controls = front.live(signals.controls(&abort, session.path()));
        let with = RunParts {
            options,
            session,
            run: &mut run,
            abort: &mut abort,
            lock,
            front,
        };
        let engine = engine_loop.drive(with);
        // The failed start first: an engine that saw it would tell the model.
        let driven = tokio::select! {
            biased;
            err = sandbox.failed() => Err(err),
            driven = engine => Ok(driven),
        };
        // The review's prompts need the keys and the terminal's own mode.
        drop(controls);
        signals.loop_over();
        let driven = match driven {
            Ok(driven) => driven,
            Err(err) => break Err(err),
        };
        let revisable = setup.review_mode == ReviewMode::Ask
            && matches!(driven.end, RunEnd::Finished)
            && front.can_revise();
        let (Some(spare), Some(head), true) = (spare, driven.heads.last().cloned(), revisable)
        else {
            break Ok(driven);
        };
        let Some((revise, at)) = review.hold(&mut run, setup, options, front).await else {
            break Ok(driven);
        };
        let number = review.rounds.len() + 1;
        let (start, round) = revise::send_back(session, &head, &revise, number, &at)?;
        review.rounds.push(round);
        front.notice(&format!(
            "revise: the model goes on with your notes (review round {number})"
        ));
        let Some(next) = spare.continued(start) else {
            break Ok(driven);
        };
        engine_loop = next;
        signals.loop_again();
    };
    let settled = match driven {
        Ok(driven) => sandbox
            .settled(front, options.sandbox.cleanup)
            .await
            .map(|()| driven),
        Err(err) => Err(err),
    };
    let Driven { reason, end, .. } = match settled {
        Ok(driven) => driven,
        Err(err) => return Err(abandon(run, sandbox, &before, session, front, err).await),
    };
    close_intake(session, lock, reason, (front, &[&setup.run_id]))?;
    let ending = Ending {
        options,
        setup,
        started_at,
        seq_before: before.seq,
        branches: Vec::new(),
        restored: origin.restored().cloned(),
        live: &live,
        limits: sandbox.limits.clone(),
        decided: review.decided,
        rounds: review.rounds,
        check: None,
    };
    finish_run(run, end, &ending, session, front)
        .await
        .map(|finished| finished.outcome)
}

/// Starts the run's MCP servers, if it has any, and tells the user about
/// each. Their tools are offered from the first request, so the sandbox is
/// waited for here; a stop meanwhile leaves them out (the engine then
/// stops at once). The start's error when the sandbox did not start.
async fn start_servers(
    run: &mut Run,
    setup: &RunSetup,
    sandbox: &SandboxStart,
    abort: &mut crate::agent::AbortSignal,
    front: &mut dyn Front,
) -> Result<(), ah_sandbox::starting::StartError> {
    if setup.mcp_servers.is_empty() {
        return Ok(());
    }
    tokio::select! {
        biased;
        err = sandbox.failed() => return Err(err),
        () = abort.requested() => front.notice("MCP servers: not started, the run was stopped"),
        lines = run.start_mcp(setup.mcp_servers.clone()) => {
            for line in lines {
                front.notice(&terminal_safe(&line));
            }
        }
    }
    Ok(())
}

/// Ends a run whose sandbox did not start: no patch, the sandbox's remains
/// removed and the run's messages taken out of the session; the error.
async fn abandon(
    run: Run,
    sandbox: SandboxStart,
    before: &SessionRollback,
    session: &mut Session,
    front: &mut dyn Front,
    err: ah_sandbox::starting::StartError,
) -> anyhow::Error {
    drop(run);
    sandbox.shutdown(front).await;
    if let Err(undo) = before.restore(session) {
        front.notice(&format!(
            "warning: the run's messages could not be taken out of the session: {undo}"
        ));
    }
    err.into()
}

/// Enters the engine into its started run and marks the session busy.
fn enter(engine: Box<dyn engine::Engine>, at: Entry<'_>) -> Result<Box<dyn Loop>> {
    let Entry {
        options,
        setup,
        session,
        run,
        origin,
        front,
    } = at;
    let entered = engine.enter(Entry {
        options,
        setup,
        session: &mut *session,
        run,
        origin,
        front: &mut *front,
    })?;
    let processing = set_state(session, SessionState::Processing)?;
    front.show(&RunEvent::of(&setup.run_id, &processing));
    Ok(entered)
}

/// What an engine drives a started run with.
pub(crate) struct RunParts<'a> {
    pub(crate) options: &'a RunOptions,
    pub(crate) session: &'a mut Session,
    pub(crate) run: &'a mut Run,
    pub(crate) abort: &'a mut AbortSignal,
    /// The session's lock, which is also the engine's inbox.
    pub(crate) lock: &'a SessionLock,
    pub(crate) front: &'a mut dyn Front,
}
