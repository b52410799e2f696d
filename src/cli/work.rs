//! `ah work ISSUE.md` (or `--issue TEXT`): one work session, plan → do →
//! check → act with fix rounds (see `ah_core::work`), in one run with its own
//! session database `.ah/work-<ulid>.db`. The run starts and ends as any
//! run does (see `lifecycle`): one work copy, one patch, one review.

use std::path::Path;
use std::time::SystemTime;

use anyhow::{Context, Result, anyhow};
use ulid::Ulid;

use super::args::RunArgs;
use super::lifecycle::{
    Ending, RunEnd, SignalWatch, Started, close_intake, finish_run, leave_session, start_run,
};
use super::live::Controls;
use super::output::Output;
use super::queue::claim_exclusive;
use super::task::{RunSetup, UsageError, settle};
use super::{EXIT_ERROR, EXIT_LIMIT};
use ah_core::agent::event::SessionState;
use ah_core::agent::prompt;
use ah_core::agent::{EndReason, set_state};
use ah_core::work::{Phase, Update, WorkConfig, WorkEnd, WorkRecord, Worker};
use ah_llm::Provider;
use ah_session::Session;
use ah_session::queue::SessionLock;

/// `matches` are the `work` subcommand's, for the configuration to know
/// which options the command line gave.
pub(super) async fn work(
    mut args: RunArgs,
    matches: &clap::ArgMatches,
    issue: Option<String>,
    max_rounds: Option<u32>,
) -> Result<i32> {
    let issue = read_issue(&args, issue)?;
    let (setup, provider) = settle(&mut args, matches, issue).await?;
    let max_rounds = max_rounds.unwrap_or(args.config.work.max_rounds);
    let db = match &args.session.db {
        Some(db) => db.clone(),
        None => setup.ah_dir.join(format!("work-{}.db", Ulid::generate())),
    };
    let mut session = Session::open(&db)?;
    let lock = claim_exclusive(&session, true)?;
    session.set_context(super::model::SESSION_MODEL, &setup.model_name)?;
    let mut output = Output::new(args.json);
    let code = work_in_session(
        &args,
        &setup,
        provider.as_ref(),
        &mut session,
        &lock,
        &mut output,
        max_rounds,
    )
    .await;
    leave_session(&session, &lock, &mut output);
    code
}

/// The issue: `--issue TEXT`, or the one file named.
fn read_issue(args: &RunArgs, issue: Option<String>) -> Result<String> {
    let text = match (issue, args.prompt.as_slice()) {
        (Some(_), [_, ..]) => {
            return Err(UsageError(
                "give the issue either as a file or with --issue, not both".into(),
            )
            .into());
        }
        (Some(text), []) => text,
        (None, [file]) => std::fs::read_to_string(Path::new(file))
            .with_context(|| format!("cannot read the issue file {file}"))?,
        (None, _) => {
            return Err(UsageError(
                "no issue given: ah work ISSUE.md, or ah work --issue \"what to do\" (see ah work --help)"
                    .into(),
            )
            .into());
        }
    };
    if text.trim().is_empty() {
        return Err(UsageError("the issue is empty: say what to do".into()).into());
    }
    Ok(text)
}

async fn work_in_session(
    args: &RunArgs,
    setup: &RunSetup,
    provider: &dyn Provider,
    session: &mut Session,
    lock: &SessionLock,
    output: &mut Output,
    max_rounds: u32,
) -> Result<i32> {
    let started_at = SystemTime::now();
    let seq_before = session.last_seq()?;
    let Started {
        mut run,
        origin,
        live: _live,
    } = start_run(args, setup, session, true).await?;
    eprintln!("work session {}", session.path().display());
    let config = WorkConfig {
        // The issue as the prompt setup left it (`/` commands and
        // `--skill`s expanded).
        issue: setup.prompts.blocks.join("\n\n"),
        model: setup.model.clone(),
        system: prompt::with_withheld_note(&setup.prompts.system, run.withheld()),
        ah_dir: setup.ah_dir.clone(),
        max_rounds,
        max_tools: args.max_tools,
        loop_window: args.loop_window,
        compact_reserve: args.compact_reserve,
    };
    output.show(&set_state(session, SessionState::Processing)?);
    let (signals, mut abort) = SignalWatch::start(lock, output.screen());
    let controls = Controls::start(args.json, signals.wiring(&abort, output, session.path()));
    let worked = {
        let mut on_update = |update: Update<'_>| match update {
            Update::Agent(event) => output.show(event),
            Update::Work(event) => output.show_work(event),
        };
        Worker {
            config: &config,
            provider,
            session,
            run: &mut run,
            abort: &mut abort,
            inbox: lock,
            on_update: &mut on_update,
        }
        .run()
        .await
    };
    // The review's prompts need the keys and the terminal's own mode.
    drop(controls);
    signals.loop_over();
    let outcome = match &worked {
        Ok(_) => EndReason::Done,
        Err(_) => EndReason::Failed,
    };
    close_intake(session, lock, outcome, output)?;
    let end = match worked {
        Err(err) => RunEnd::Failed(err.into()),
        Ok(record) => run_end(&record, &args.max_tools),
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

/// What the end of the work session means for the run: only `done` (or a
/// poisoned run, which the review refuses) goes to review.
fn run_end(record: &WorkRecord, max_tools: &Option<u32>) -> RunEnd {
    let stopped = |why: String, next: &str| RunEnd::Stopped {
        why,
        next: next.to_string(),
        code: EXIT_ERROR,
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
                "the checks still failed after {} round(s)",
                record.max_rounds
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
    let (why, next, code) = match reason {
        EndReason::Aborted => return RunEnd::Aborted,
        EndReason::Done | EndReason::Poisoned | EndReason::Finalized => return RunEnd::Finished,
        EndReason::Looping => (
            format!("the model repeated itself in the {name} phase"),
            "run ah work again with a clearer issue (--loop-window 0 turns loop detection off)",
            EXIT_ERROR,
        ),
        EndReason::ToolLimit => (
            format!(
                "the {name} phase reached the tool call limit (--max-tools {})",
                max_tools.unwrap_or_default()
            ),
            "run ah work again with a higher --max-tools",
            EXIT_LIMIT,
        ),
        EndReason::DiskBudget => (
            format!("the {name} phase passed the run's disk budget"),
            "look at the patch, then raise --disk-budget and run ah work again",
            EXIT_LIMIT,
        ),
        EndReason::Stopped | EndReason::Failed => (
            format!("the model stopped in the {name} phase before finishing it"),
            "run ah work again",
            EXIT_ERROR,
        ),
    };
    RunEnd::Stopped {
        why,
        next: next.to_string(),
        code,
    }
}
