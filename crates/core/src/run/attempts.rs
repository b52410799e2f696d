//! Several runs of one task side by side in one process: the attempts of a
//! task ([`run_attempts`]). The task is settled and its session opened and
//! locked once, its prompt stored once; then each attempt is a run of its
//! own — its own id, run folder, sandbox, work copy, shadow repo and patch —
//! whose loop starts from the one prompt on a branch of its own, all driven
//! at once on this task. Their events reach the one front-end as they
//! happen, each with its run's id.
//!
//! The attempts are not reviewed one by one: each ends with its patch saved
//! (`never`), for whoever compares them. Nobody is asked anything while
//! they run (no live keys, no questions); a signal stops them all. An
//! attempt whose sandbox cannot start ends with that error, and its
//! messages stay in the session as a branch of their own (taking them back
//! out, as a single run does, would need the other attempts to stand still).

use std::any::Any;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::SystemTime;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};

use super::engine::{self, Driven, Entry, Loop};
use super::lifecycle::{
    Ending, Finished, Started, close_intake, finish_run, leave_session, start_run,
};
use super::settle::RunSetup;
use super::signals::SignalWatch;
use super::{
    Choice, Console, Engine, Front, LiveControls, LockedRun, Open, Outcome, PatchToChoose,
    ReviewFront, ReviewMode, RunEnd, RunOptions, RunParts, SESSION_MODEL, Tone, UsageError, enter,
    start_servers,
};
use crate::agent::{AbortSignal, EndReason, record_event, set_state};
use crate::cost::Prices;
use crate::event::{Event, RunEvent, SessionState};
use ah_record::run::{Run, StepRules};
use ah_record::rundir::CheckRecord;
use ah_sandbox::image::BuildOptions;
use ah_session::Session;
use ah_session::queue::SessionLock;

/// How a task's attempts are run and judged (`ah -N`).
#[derive(Debug, Clone, Default)]
pub struct AttemptOptions {
    pub count: usize,
    /// At most this many attempts work at once (0: all of them).
    pub jobs: usize,
    /// Run in each attempt's sandbox once its agent is done; exit code 0
    /// passes. `None`: every attempt that finished passes.
    pub check: Option<String>,
    /// Seconds the check may take (at most the bash tool's hard limit).
    pub check_timeout: u64,
    /// Stop the other attempts as soon as one passes.
    pub first: bool,
}

/// How one attempt ended.
pub struct Attempt {
    /// Its run's id.
    pub run: String,
    pub outcome: Result<Outcome>,
    /// What its check found, when one ran.
    pub check: Option<Check>,
    /// Its patch and how its run ended, when it got that far.
    pub(crate) finished: Option<Finished>,
    /// Where its branches of the session end (its messages' tokens).
    pub(crate) heads: Vec<String>,
    /// From its start to its saved patch.
    pub duration: Duration,
}

/// What an attempt's check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// `None`: killed at its timeout, or it could not run.
    pub exit_code: Option<i32>,
    /// What it printed (as the model would have seen it), in the run folder.
    pub log: PathBuf,
    pub duration_ms: u64,
}

impl Attempt {
    /// How it ended, in a word: `finished`, `stopped` (interrupted),
    /// `unfinished`, `ended` or `failed`.
    pub fn status(&self) -> &'static str {
        match &self.outcome {
            Ok(Outcome::Done) => "finished",
            Ok(Outcome::Aborted) => "stopped",
            Ok(Outcome::Stopped(_)) => "unfinished",
            Ok(_) => "ended",
            Err(_) => "failed",
        }
    }
}

impl Check {
    pub fn passed(&self) -> bool {
        self.exit_code == Some(0)
    }
}

/// The attempts of a task, with what they all share.
pub(crate) struct Tried {
    pub(crate) attempts: Vec<Attempt>,
    /// The first attempt's setup, with the review mode the user asked for.
    pub(crate) setup: RunSetup,
    pub(crate) session: Session,
    pub(crate) lock: SessionLock,
    /// The session's last `@N` before the attempts.
    pub(crate) seq_before: i64,
    /// The prices the run's configuration settled on.
    pub(crate) prices: Prices,
}

/// Runs `count` attempts of the task `options` give, driven by `engine`,
/// side by side; how each ended, in the order they were started. An error
/// when the task cannot start at all (settling, the session, the engine).
pub async fn run_attempts(
    options: RunOptions,
    engine: Engine,
    count: usize,
    front: &mut dyn Front,
) -> Result<Vec<Attempt>> {
    let how = AttemptOptions {
        count,
        ..AttemptOptions::default()
    };
    let tried = try_all(options, engine, &how, front).await?;
    leave_session(&tried.session, &tried.lock, front, &tried.ids());
    Ok(tried.attempts)
}

impl Tried {
    pub(crate) fn ids(&self) -> Vec<&str> {
        self.attempts.iter().map(|a| a.run.as_str()).collect()
    }
}

/// The attempts `how` asks for, each to its saved patch (and its check);
/// the session is left open and locked for the caller, who leaves it.
pub(crate) async fn try_all(
    mut options: RunOptions,
    engine: Engine,
    how: &AttemptOptions,
    front: &mut dyn Front,
) -> Result<Tried> {
    let count = how.count;
    if count == 0 {
        bail!(UsageError::Message("no attempts asked for".into()));
    }
    let mut engine = engine::engine(engine);
    let Open::Run(opened) = engine.open(&mut options, front).await? else {
        bail!(UsageError::Message(
            "another ah is working on this session: attempts need it to themselves".into()
        ));
    };
    let LockedRun {
        setup,
        mut session,
        lock,
    } = *opened;
    session.set_context(SESSION_MODEL, &setup.models())?;
    let setups: Vec<RunSetup> = (0..count)
        .map(|i| RunSetup {
            run_id: match i {
                0 => setup.run_id.clone(),
                _ => ulid::Ulid::generate().to_string(),
            },
            review_mode: ReviewMode::Never,
            ..setup.clone()
        })
        .collect();
    let seq_before = session.last_seq()?;
    let jobs = match how.jobs {
        0 => count,
        jobs => jobs.min(count),
    };
    let run = Side {
        options: &options,
        lock: &lock,
        started_at: SystemTime::now(),
        seq_before,
        how,
        slots: tokio::sync::Semaphore::new(jobs),
    };
    let attempts = run.all(&setups, &mut session, engine, front).await;
    let attempts = match attempts {
        Ok(attempts) => attempts,
        Err(err) => {
            let ids: Vec<&str> = setups.iter().map(|s| s.run_id.as_str()).collect();
            leave_session(&session, &lock, front, &ids);
            return Err(err);
        }
    };
    Ok(Tried {
        attempts,
        setup,
        session,
        lock,
        seq_before,
        prices: Prices::new(&options.config.prices),
    })
}

/// What every attempt shares.
struct Side<'a> {
    options: &'a RunOptions,
    lock: &'a SessionLock,
    started_at: SystemTime,
    /// The session's last `@N` before the attempts.
    seq_before: i64,
    how: &'a AttemptOptions,
    /// One permit per attempt that may work at once.
    slots: tokio::sync::Semaphore,
}

impl Side<'_> {
    /// Starts every attempt's run, enters the engine once, and drives all
    /// the loops at once.
    async fn all(
        &self,
        setups: &[RunSetup],
        session: &mut Session,
        engine: Box<dyn engine::Engine>,
        front: &mut dyn Front,
    ) -> Result<Vec<Attempt>> {
        let mut starts: Vec<Started> = Vec::with_capacity(setups.len());
        for (i, setup) in setups.iter().enumerate() {
            let attempt = Event::AttemptStart {
                attempt: i + 1,
                of: setups.len(),
            };
            record_event(session, None, &attempt);
            front.show(&RunEvent::of(&setup.run_id, &attempt));
            match start_run(self.options, setup, session, front) {
                Ok(mut started) => {
                    started.run.set_project_tools(setup.project_tools.clone());
                    starts.push(started);
                }
                Err(err) => return Err(abandon_all(starts, front, err).await),
            }
        }
        let (signals, abort) = SignalWatch::start(self.lock, front.console());
        let loops = match self.enter(setups, session, &starts, engine, front) {
            Ok(loops) => loops,
            Err(err) => {
                signals.loop_over();
                return Err(abandon_all(starts, front, err).await);
            }
        };
        let path = session.path().to_path_buf();
        let share = Share::new(front);
        let attempts = setups
            .iter()
            .zip(starts)
            .zip(loops)
            .map(|((setup, started), each)| {
                self.one(
                    setup,
                    &path,
                    (abort.clone(), &signals),
                    started,
                    each,
                    &share,
                )
            });
        let attempts = futures_util::future::join_all(attempts).await;
        signals.loop_over();
        let front = share.into_inner();
        let ids: Vec<&str> = setups.iter().map(|s| s.run_id.as_str()).collect();
        close_intake(session, self.lock, EndReason::Done, (front, &ids))?;
        Ok(attempts)
    }

    /// Enters the engine into the first attempt's run, and the other
    /// attempts' loops from the same start.
    fn enter(
        &self,
        setups: &[RunSetup],
        session: &mut Session,
        starts: &[Started],
        engine: Box<dyn engine::Engine>,
        front: &mut dyn Front,
    ) -> Result<Vec<Box<dyn Loop>>> {
        let first = &starts[0];
        let at = Entry {
            options: self.options,
            setup: &setups[0],
            session,
            run: &first.run,
            origin: &first.origin,
            front,
        };
        let entered = enter(engine, at)?;
        // The first run's state was said as it entered; the others' now.
        let processing = set_state(session, SessionState::Processing)?;
        for setup in &setups[1..] {
            front.show(&RunEvent::of(&setup.run_id, &processing));
        }
        let mut loops = Vec::with_capacity(setups.len());
        for _ in 1..setups.len() {
            let Some(again) = entered.again() else {
                bail!(UsageError::Message(
                    "this engine runs one attempt at a time".into()
                ));
            };
            loops.push(again);
        }
        loops.insert(0, entered);
        Ok(loops)
    }

    /// One attempt, from its started run to its saved patch (and its
    /// check, which stops the others when it passes and `first` says so).
    async fn one(
        &self,
        setup: &RunSetup,
        session_path: &Path,
        (mut abort, signals): (AbortSignal, &SignalWatch),
        started: Started,
        engine_loop: Box<dyn Loop>,
        share: &Share<'_>,
    ) -> Attempt {
        let mut front = share.front();
        let Started {
            mut run,
            origin,
            live,
            sandbox,
        } = started;
        let began = Instant::now();
        let mut check = None;
        let mut branches = Vec::new();
        // A handle of its own on the one session: each loop appends to its
        // own branch; the attempt's end is recorded through it too.
        let opened = Session::open(session_path);
        let mut own = None;
        let outcome = async {
            let session: &mut Session = own.insert(opened?);
            if let Err(err) = start_servers(&mut run, setup, &sandbox, &mut abort, &mut front).await
            {
                drop(run);
                sandbox.shutdown(&mut front).await;
                return Err(err.into());
            }
            // Waits for its turn; a closed semaphore never happens here.
            let _slot = self.slots.acquire().await.ok();
            let stopped = abort.is_requested();
            let with = RunParts {
                options: self.options,
                session,
                run: &mut run,
                abort: &mut abort,
                lock: self.lock,
                front: &mut front,
            };
            // Stopped while it waited (another attempt passed first): it
            // never asks the model.
            let driven = if stopped {
                Ok(Driven::of((EndReason::Aborted, RunEnd::Aborted)))
            } else {
                tokio::select! {
                    biased;
                    err = sandbox.failed() => Err(err),
                    driven = engine_loop.drive(with) => Ok(driven),
                }
            };
            if let (Ok(driven), Some(command)) = (&driven, &self.how.check)
                && matches!(driven.end, RunEnd::Finished)
            {
                let found = run_check(&mut run, command, self.how.check_timeout).await;
                let checked = Event::CheckEnd {
                    command: command.clone(),
                    exit_code: found.exit_code,
                    passed: found.passed(),
                    duration_ms: found.duration_ms,
                    log: found.log.display().to_string(),
                };
                record_event(session, None, &checked);
                front.show(&RunEvent::of(&setup.run_id, &checked));
                if found.passed() && self.how.first {
                    signals.stop_all();
                }
                check = Some(found);
            }
            let settled = match driven {
                Ok(driven) => sandbox
                    .settled(&mut front, self.options.sandbox.cleanup)
                    .await
                    .map(|()| driven),
                Err(err) => Err(err),
            };
            let Driven { end, heads, .. } = match settled {
                Ok(driven) => driven,
                Err(err) => {
                    drop(run);
                    sandbox.shutdown(&mut front).await;
                    return Err(err.into());
                }
            };
            branches = heads.clone();
            let ending = Ending {
                options: self.options,
                setup,
                started_at: self.started_at,
                seq_before: self.seq_before,
                branches: heads,
                restored: origin.restored().cloned(),
                live: &live,
                limits: sandbox.limits.clone(),
                decided: None,
                rounds: Vec::new(),
                check: check.as_ref().map(|found: &Check| CheckRecord {
                    command: self.how.check.clone().unwrap_or_default(),
                    exit_code: found.exit_code,
                    passed: found.passed(),
                    duration_ms: found.duration_ms,
                }),
            };
            finish_run(run, end, &ending, session, &mut front).await
        }
        .await;
        let (outcome, finished) = match outcome {
            Ok(finished) => (Ok(finished.outcome), Some(finished)),
            Err(err) => (Err(err), None),
        };
        let attempt = Attempt {
            run: setup.run_id.clone(),
            outcome,
            check,
            finished,
            heads: branches,
            duration: began.elapsed(),
        };
        let ended = Event::AttemptEnd {
            status: attempt.status().to_string(),
            error: attempt.outcome.as_ref().err().map(|err| format!("{err:#}")),
        };
        if let Some(session) = &own {
            record_event(session, None, &ended);
        }
        front.show(&RunEvent::of(&setup.run_id, &ended));
        attempt
    }
}

/// Runs `command` in the run's sandbox as a read-only step (what it
/// changes is undone: the attempt's patch stays the agent's), within
/// `timeout` seconds; its output goes to the run folder's `check.log`.
async fn run_check(run: &mut Run, command: &str, timeout: u64) -> Check {
    run.set_rules(StepRules::read_only());
    let timeout = timeout.clamp(1, ah_tools::bash::MAX_TIMEOUT);
    let input = serde_json::json!({"command": command, "timeout": timeout});
    let step = run.tool_step("bash", &input).await;
    let log = run.dir().path().join("check.log");
    let text = format!("$ {command}\n{}\n", step.output.content);
    // The exit code stands without its log.
    let _ = std::fs::write(&log, text);
    Check {
        exit_code: step.output.exit_code,
        log,
        duration_ms: step.duration_ms,
    }
}

/// Removes the sandboxes of the attempts started so far; `err`.
async fn abandon_all(
    starts: Vec<Started>,
    front: &mut dyn Front,
    err: anyhow::Error,
) -> anyhow::Error {
    for started in starts {
        drop(started.run);
        started.sandbox.shutdown(front).await;
    }
    err
}

/// One front-end for runs that go on side by side on one task: each call
/// reaches it at once, under a lock held only for that call (no call
/// holds it across an await, so no attempt waits on another).
struct Share<'f> {
    front: Mutex<&'f mut dyn Front>,
    console: Arc<dyn Console>,
}

impl<'f> Share<'f> {
    fn new(front: &'f mut dyn Front) -> Share<'f> {
        let console = front.console();
        Share {
            front: Mutex::new(front),
            console,
        }
    }

    /// The front-end as one attempt sees it.
    fn front(&self) -> Shared<'_, 'f> {
        Shared(self)
    }

    fn lock(&self) -> MutexGuard<'_, &'f mut dyn Front> {
        self.front.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn into_inner(self) -> &'f mut dyn Front {
        self.front
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// An attempt's view of the shared front-end: what it shows and says goes
/// through; it asks nothing (nobody answers one of several runs).
struct Shared<'s, 'f>(&'s Share<'f>);

#[async_trait::async_trait(?Send)]
impl Front for Shared<'_, '_> {
    fn show(&mut self, event: &RunEvent<'_>) {
        self.0.lock().show(event);
    }

    async fn ask_user(&mut self, _agent: &str, _question: &str, _later: &str) -> Option<String> {
        None
    }

    fn notice(&mut self, line: &str) {
        self.0.lock().notice(line);
    }

    fn console(&self) -> Arc<dyn Console> {
        Arc::clone(&self.0.console)
    }

    fn live(&mut self, _controls: LiveControls) -> Option<Box<dyn Any>> {
        None
    }

    async fn build_image(&mut self, _options: &BuildOptions) -> Result<()> {
        bail!("the sandbox image is built before attempts start, not while they run")
    }
}

impl ReviewFront for Shared<'_, '_> {
    /// Nobody is asked about one of several runs: each patch is saved.
    fn choose(&mut self, _patch: &PatchToChoose<'_>) -> Result<Choice> {
        Ok(Choice::NobodyToAsk)
    }

    fn say(&mut self, tone: Tone, lead: &str, rest: &str) {
        self.0.lock().say(tone, lead, rest);
    }
}
