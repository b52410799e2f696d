//! `ah batch TASKS.jsonl`: many tasks, each a run (or the attempts of
//! one, judged by its check) in a new session of its project, at most `-j`
//! at once across projects, their results appended to a results file as
//! each ends. The same command again skips the tasks that have a result
//! and runs the others (a killed batch's task runs again, its old run kept
//! in its folder). Each task's patch is saved; a task whose review is
//! `auto` is applied afterwards by the auto-review rules, and two tasks of
//! one project never apply at the same time. Nobody is asked anything.

mod results;
mod tasks;

use std::any::Any;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use futures_util::StreamExt;
use tokio::sync::Mutex;

use results::{Results, TaskResult};
use tasks::{Task, Work};

use crate::event::{Event, RunEvent};
use crate::run::{
    AttemptOptions, Choice, Console, Engine, Front, LiveControls, Outcome, PatchToChoose,
    ReviewFront, ReviewMode, RunOptions, Tone, best_of, run,
};
use crate::runs::{Reopened, reopen_as};
use ah_sandbox::image::BuildOptions;
use ah_session::Tokens;

/// Where each line of the batch's progress goes (the front-end's stderr).
pub type Say = Arc<dyn Fn(&str) + Send + Sync>;

/// What `ah batch` was asked.
pub struct BatchOptions {
    pub tasks: PathBuf,
    /// The results file (default: the tasks file's name with
    /// `.results.jsonl`).
    pub out: Option<PathBuf>,
    /// At most this many tasks at once.
    pub jobs: usize,
    /// The options every task's run starts from (backend, image, limits…).
    pub base: RunOptions,
}

/// How the batch went.
#[derive(Debug, Default)]
pub struct Summary {
    pub done: usize,
    /// Ended without their patch going in (saved, stopped, no attempt
    /// passed, aborted).
    pub not_done: usize,
    pub errored: usize,
    /// Had a result from an earlier batch.
    pub skipped: usize,
    pub tokens: Tokens,
    /// What the tasks run here cost (`None`: a model had no price).
    pub cost_usd: Option<f64>,
    pub wall: Duration,
    pub results: PathBuf,
}

/// Runs the batch; an error before any task started when the tasks file
/// or the results file is not usable.
pub async fn batch(options: BatchOptions, say: Say) -> Result<Summary> {
    let started = Instant::now();
    let tasks = tasks::read(&options.tasks)?;
    let out = options
        .out
        .clone()
        .unwrap_or_else(|| options.tasks.with_extension("results.jsonl"));
    let (mut results, finished) = Results::open(&out)?;
    let (pending, skipped): (Vec<Task>, Vec<Task>) =
        tasks.into_iter().partition(|t| !finished.contains(&t.id));
    if !skipped.is_empty() {
        say(&format!(
            "{} task(s) have a result in {} already: skipped",
            skipped.len(),
            out.display()
        ));
    }
    let applies = project_locks(&pending);
    let mut summary = Summary {
        cost_usd: Some(0.0),
        skipped: skipped.len(),
        results: out.clone(),
        ..Summary::default()
    };
    let jobs = options.jobs.max(1);
    let mut running = futures_util::stream::iter(pending.iter())
        .map(|task| one(task, &options.base, &applies, say.clone()))
        .buffer_unordered(jobs);
    while let Some(result) = running.next().await {
        say(&line(&result));
        match result.status.as_str() {
            "done" => summary.done += 1,
            "error" | "failed" => summary.errored += 1,
            _ => summary.not_done += 1,
        }
        summary.tokens.input_tokens += result.tokens.input_tokens;
        summary.tokens.output_tokens += result.tokens.output_tokens;
        summary.cost_usd = summary.cost_usd.zip(result.cost_usd).map(|(a, b)| a + b);
        results.append(&result)?;
    }
    summary.wall = started.elapsed();
    Ok(summary)
}

/// One lock per project: its tasks apply one at a time.
fn project_locks(tasks: &[Task]) -> HashMap<PathBuf, Arc<Mutex<()>>> {
    tasks
        .iter()
        .map(|task| (key(&task.project), Arc::new(Mutex::new(()))))
        .collect()
}

fn key(project: &Path) -> PathBuf {
    std::fs::canonicalize(project).unwrap_or_else(|_| project.to_path_buf())
}

/// The line said when a task ends.
fn line(result: &TaskResult) -> String {
    let tail = match &result.error {
        Some(error) => format!(": {error}"),
        None => format!(
            ", {} file(s) +{} -{}{}",
            result.files,
            result.added,
            result.removed,
            if result.applied { ", applied" } else { "" }
        ),
    };
    format!(
        "task {}: {} in {:.1} s{tail}",
        result.id,
        result.status,
        result.duration_ms as f64 / 1000.0
    )
}

/// Runs one task to its result.
async fn one(
    task: &Task,
    base: &RunOptions,
    applies: &HashMap<PathBuf, Arc<Mutex<()>>>,
    say: Say,
) -> TaskResult {
    let started = Instant::now();
    let mut front = Quiet::new(&task.id, say);
    let mut options = base.clone();
    options.project = Some(task.project.clone());
    options.model = task.model.clone().or(options.model);
    options.review = Some(ReviewMode::Never);
    options.new_session = true;
    options.json = true;
    let engine = match &task.work {
        Work::Prompt(prompt) => {
            options.prompt = vec![prompt.clone()];
            Engine::Agent
        }
        Work::Issue(issue) => Engine::Work {
            issue: Some(issue.clone()),
            max_rounds: None,
        },
    };
    let outcome = if task.attempts > 1 || task.check.is_some() {
        let how = AttemptOptions {
            count: task.attempts as usize,
            jobs: task.attempts as usize,
            check: task.check.clone(),
            check_timeout: ah_tools::bash::MAX_TIMEOUT,
            first: false,
        };
        best_of(options, engine, how, &mut front).await
    } else {
        run(options, engine, &mut front).await
    };
    let mut result = front.result(task);
    match outcome {
        Ok(outcome) => {
            result.status = status(outcome).to_string();
            result.exit_code = outcome.exit_code();
            if task.check.is_some() {
                result.check_passed = Some(outcome != Outcome::NonePassed);
            }
        }
        Err(err) => {
            result.status = "error".to_string();
            result.exit_code = 1;
            result.error = Some(format!("{err:#}"));
        }
    }
    if task.auto && result.status == "done" && result.files > 0 {
        let lock = applies.get(&key(&task.project)).cloned();
        let _turn = match &lock {
            Some(lock) => Some(lock.lock().await),
            None => None,
        };
        apply_auto(task, &mut result, &mut front);
    }
    result.duration_ms = started.elapsed().as_millis() as u64;
    result
}

/// The task's chosen run, reviewed by the auto-review rules.
fn apply_auto(task: &Task, result: &mut TaskResult, front: &mut Quiet) {
    let Some(run) = front.chosen.clone() else {
        return;
    };
    match reopen_as(&task.project, Some(&run), ReviewMode::Auto, front) {
        Ok(Reopened::Done(outcome)) => {
            result.applied = outcome == Outcome::Done;
            if !result.applied {
                result.status = status(outcome).to_string();
                result.exit_code = outcome.exit_code();
            }
        }
        Ok(Reopened::Revise { .. }) => {}
        Err(err) => {
            result.status = "error".to_string();
            result.exit_code = 1;
            result.error = Some(format!("the auto review failed: {err:#}"));
        }
    }
}

fn status(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Done => "done",
        Outcome::NotApplied => "not_applied",
        Outcome::Failed => "failed",
        Outcome::Aborted => "aborted",
        Outcome::Stopped(_) => "stopped",
        Outcome::NonePassed => "none_passed",
        Outcome::Queued { .. } => "queued",
    }
}

/// A task's front-end: nobody to ask, nothing shown but its start; it
/// keeps what the result needs from the events.
struct Quiet {
    id: String,
    say: Say,
    runs: Vec<String>,
    /// The run whose review came last (the winner of attempts).
    chosen: Option<String>,
    patch: Option<String>,
    ends: HashMap<String, (usize, u64, u64)>,
    tokens: Tokens,
    /// What every run of the task cost (`None` once one had no price).
    cost: Option<f64>,
}

impl Quiet {
    fn new(id: &str, say: Say) -> Quiet {
        Quiet {
            id: id.to_string(),
            say,
            runs: Vec::new(),
            chosen: None,
            patch: None,
            ends: HashMap::new(),
            tokens: Tokens::default(),
            cost: Some(0.0),
        }
    }

    fn result(&self, task: &Task) -> TaskResult {
        let (files, added, removed) = self
            .chosen
            .as_ref()
            .and_then(|run| self.ends.get(run))
            .copied()
            .unwrap_or_default();
        TaskResult {
            id: task.id.clone(),
            runs: self.runs.clone(),
            patch: self.patch.clone(),
            files,
            added,
            removed,
            tokens: self.tokens,
            cost_usd: self.cost,
            ..TaskResult::default()
        }
    }
}

#[async_trait::async_trait(?Send)]
impl Front for Quiet {
    fn show(&mut self, event: &RunEvent<'_>) {
        match event.event {
            Event::AgentStart { .. } if !self.runs.iter().any(|r| r == event.run) => {
                self.runs.push(event.run.to_string());
                (self.say)(&format!("task {}: run {} started", self.id, event.run));
            }
            Event::ReviewDone { patch, .. } => {
                self.chosen = Some(event.run.to_string());
                self.patch = Some(patch.clone());
            }
            Event::RunEnd {
                usage,
                cost_usd,
                files,
                added,
                removed,
                ..
            } => {
                self.tokens.input_tokens += usage.input_tokens;
                self.tokens.output_tokens += usage.output_tokens;
                self.cost = self.cost.zip(*cost_usd).map(|(sum, cost)| sum + cost);
                self.ends
                    .insert(event.run.to_string(), (*files, *added, *removed));
            }
            _ => {}
        }
    }

    async fn ask_user(&mut self, _agent: &str, _question: &str, _later: &str) -> Option<String> {
        None
    }

    fn notice(&mut self, _line: &str) {}

    fn console(&self) -> Arc<dyn Console> {
        Arc::new(Silent)
    }

    fn live(&mut self, _controls: LiveControls) -> Option<Box<dyn Any>> {
        None
    }

    async fn build_image(&mut self, _options: &BuildOptions) -> Result<()> {
        bail!("the sandbox image is missing: build it before the batch (ah image build)")
    }
}

impl ReviewFront for Quiet {
    fn choose(&mut self, _patch: &PatchToChoose<'_>) -> Result<Choice> {
        Ok(Choice::NobodyToAsk)
    }

    fn say(&mut self, _tone: Tone, _lead: &str, _rest: &str) {}
}

/// The signal watch's voice in a batch: the batch says what it does.
struct Silent;

impl Console for Silent {
    fn say(&self, _line: &str) {}
    fn restore_terminal(&self) {}
}
