//! The work loop: plan → do → check → act on one run, with fix rounds.
//!
//! Every phase is one [`run_agent`] loop with its own system prompt, tools
//! and step rules on the same [`Run`] (one work copy, one shadow repo, one
//! patch). Plan and check see `/work` read-only; do changes it; act decides
//! with a structured `verdict`: `done` ends the session, `fix` starts another
//! do round with the findings (up to `max_rounds`), `friction` has the
//! friction phase write down what blocked the work and stops. A phase that
//! ends without its file is reminded once, then the session fails.
//!
//! In the session, the issue is the root message and each phase is a branch
//! under it: its first message is the phase's brief, which quotes the files
//! of the earlier phases (phases share files, not conversation). Every
//! message a phase adds follows that phase's own last message, never the
//! session's newest one: several work loops (the attempts of `ah work -N`)
//! can share one root and one session. The
//! session's events (`phase_start`, `phase_end`, `work_end`) and
//! the run's `phases/work.json` say which branch is which.

mod brief;
pub mod phase;
mod record;
pub mod tools;

use serde::Serialize;
use std::path::PathBuf;

use crate::agent::prompt;
use crate::agent::{
    AbortSignal, AgentConfig, AgentError, EndReason, Event, Inbox, record_event, run_agent,
};
use crate::config::ProjectFiles;
use ah_llm::models::ModelInfo;
use ah_llm::{Block, Provider, Role};
use ah_record::run::Run;
use ah_session::{BlockRecord, MessageMeta, Session, SessionError};
use brief::Handoff;
pub use phase::Phase;
pub use record::{PhaseRecord, WorkRecord};
pub use tools::Decision;
use tools::PhaseTool;

/// The default most do rounds (the first and its fixes).
pub const DEFAULT_MAX_ROUNDS: u32 = 3;

/// What a work session needs besides its collaborators.
#[derive(Debug, Clone)]
pub struct WorkConfig {
    pub issue: String,
    pub model: ModelInfo,
    /// The run's system prompt (ah's, the project's instructions, skills);
    /// each phase adds its own part.
    pub system: String,
    /// The project's files, for prompt overrides.
    pub files: ProjectFiles,
    /// Most do rounds, at least 1.
    pub max_rounds: u32,
    /// Tool calls per phase.
    pub max_tools: Option<u32>,
    pub loop_window: usize,
    pub compact_reserve: u64,
}

/// Why a work session could not go on.
#[derive(Debug, thiserror::Error)]
pub enum WorkError {
    #[error(transparent)]
    Agent(#[from] AgentError),
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error("{0}")]
    Prompt(std::io::Error),
    #[error("could not write {}: {source}; check that the run directory is writable", path.display())]
    Record {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// How a work session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "end", rename_all = "snake_case")]
pub enum WorkEnd {
    /// The act phase said `done`.
    Done,
    /// The act phase said `friction`; the friction phase wrote its note.
    Friction,
    /// The last round's verdict was still `fix`.
    MaxRounds,
    /// A phase ended twice without its file (or verdict).
    MissingOutput { phase: Phase },
    /// A phase's agent loop stopped before its end (abort, tool limit, loop
    /// detection, a poisoned run, a refusal).
    Stopped { phase: Phase, reason: EndReason },
}

/// The loop's collaborators, borrowed for the whole session.
pub struct Worker<'a> {
    pub config: &'a WorkConfig,
    /// The session message holding the issue ([`store_issue`]).
    pub root: &'a str,
    pub provider: &'a dyn Provider,
    pub session: &'a mut Session,
    pub run: &'a mut Run,
    pub abort: &'a mut AbortSignal,
    /// Steering and follow-ups from other terminals, delivered to the
    /// running phase.
    pub inbox: &'a dyn Inbox,
    pub on_event: &'a mut (dyn FnMut(&Event) + Send),
}

/// How one phase went.
enum PhaseOutcome {
    Written,
    Missing,
    Stopped(EndReason),
}

/// Stores the issue as a new root message of `session`: the message every
/// phase of a work loop branches from; its id.
pub fn store_issue(session: &mut Session, issue: &str) -> Result<String, WorkError> {
    let root = session.append(
        None,
        Role::User,
        &[BlockRecord::from(Block::Text {
            text: issue.to_string(),
        })],
        &MessageMeta::default(),
    )?;
    Ok(root.id)
}

impl Worker<'_> {
    /// Runs the session from the issue to its end; the run's patch holds
    /// whatever the do rounds changed.
    pub async fn run(mut self) -> Result<WorkRecord, WorkError> {
        let root = self.root;
        let mut record = WorkRecord::new(&self.config.issue, self.config.max_rounds, root);
        let end = self.rounds(root, &mut record).await;
        let end = match end {
            Ok(end) => end,
            Err(err) => {
                // What the phases did is kept for a look, even on failure;
                // the error that stopped the session is the one to report.
                let _ = record.save(&self.phases_dir());
                return Err(err);
            }
        };
        record.end = Some(end);
        record.save(&self.phases_dir())?;
        self.announce(
            None,
            Event::WorkEnd {
                end,
                rounds: record.rounds,
            },
        );
        Ok(record)
    }

    async fn rounds(&mut self, root: &str, record: &mut WorkRecord) -> Result<WorkEnd, WorkError> {
        let max_rounds = self.config.max_rounds.max(1);
        let fix = phase::fix_prompt(&self.config.files).map_err(WorkError::Prompt)?;
        let mut handoff = Handoff::default();
        if let Some(end) = self
            .phase(Phase::Plan, 1, root, &handoff, &fix, record)
            .await?
        {
            return Ok(end);
        }
        handoff.plan = Some(self.read_output(Phase::Plan, 1)?);
        for round in 1..=max_rounds {
            record.rounds = round;
            for phase in [Phase::Do, Phase::Check, Phase::Act] {
                if let Some(end) = self
                    .phase(phase, round, root, &handoff, &fix, record)
                    .await?
                {
                    return Ok(end);
                }
                let output = self.read_output(phase, round)?;
                match phase {
                    Phase::Do => handoff.done = Some(output),
                    Phase::Check => handoff.check = Some(output),
                    _ => {
                        let verdict =
                            serde_json::from_str(&output).map_err(|e| WorkError::Record {
                                path: self.phases_dir().join(phase.output(round)),
                                source: e.into(),
                            })?;
                        handoff.verdict = Some(verdict);
                    }
                }
            }
            match handoff.verdict.as_ref().map(|v| v.decision) {
                Some(Decision::Done) => return Ok(WorkEnd::Done),
                Some(Decision::Friction) => {
                    let friction = self
                        .phase(Phase::Friction, round, root, &handoff, &fix, record)
                        .await?;
                    return Ok(friction.unwrap_or(WorkEnd::Friction));
                }
                Some(Decision::Fix) | None => {}
            }
        }
        Ok(WorkEnd::MaxRounds)
    }

    /// Runs one phase (with one reminder when it forgets its file); `Some`
    /// when the session ends here.
    async fn phase(
        &mut self,
        phase: Phase,
        round: u32,
        root: &str,
        handoff: &Handoff,
        fix: &str,
        record: &mut WorkRecord,
    ) -> Result<Option<WorkEnd>, WorkError> {
        let output = self.phases_dir().join(phase.output(round));
        if let Some(dir) = output.parent() {
            std::fs::create_dir_all(dir).map_err(|source| WorkError::Record {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let tool = PhaseTool::new(phase, output.clone());
        self.run
            .set_rules(phase.rules().with_host_tool(tool.host()));
        let written = || tool.written();
        let text = brief::brief(phase, round, self.config.max_rounds.max(1), handoff, fix);
        let first = self.session.append(
            Some(root),
            Role::User,
            &[BlockRecord::from(Block::Text { text })],
            &MessageMeta::default(),
        )?;
        self.announce(
            Some(&first.id),
            Event::PhaseStart {
                phase,
                round,
                message: first.id.clone(),
            },
        );
        let mut entry = PhaseRecord::new(phase, round, &first.id);
        let (mut outcome, mut head) = self.agent(phase, first.id.clone(), &written).await?;
        if matches!(outcome, PhaseOutcome::Missing) {
            entry.reminded = true;
            let reminder = self.session.append(
                Some(&head),
                Role::User,
                &[BlockRecord::from(Block::Text {
                    text: phase.reminder(),
                })],
                &MessageMeta::default(),
            )?;
            self.announce(Some(&reminder.id), Event::Reminder { phase, round });
            (outcome, head) = self.agent(phase, reminder.id, &written).await?;
        }
        if let PhaseTool::Verdict(verdict) = &tool
            && let Some(verdict) = verdict.verdict()
        {
            record::write_json(&output, &verdict)?;
            self.announce(
                None,
                Event::Verdict {
                    round,
                    decision: verdict.decision,
                    summary: verdict.summary.clone(),
                },
            );
            entry.decision = Some(verdict.decision);
        }
        let file = written().then(|| phase.output(round));
        entry.last_message = Some(head.clone());
        entry.file = file.clone();
        self.announce(Some(&head), Event::PhaseEnd { phase, round, file });
        record.phases.push(entry);
        record.save(&self.phases_dir())?;
        Ok(match outcome {
            PhaseOutcome::Written => None,
            PhaseOutcome::Missing => Some(WorkEnd::MissingOutput { phase }),
            PhaseOutcome::Stopped(reason) => Some(WorkEnd::Stopped { phase, reason }),
        })
    }

    /// One agent loop of `phase` from `head`; how it went and where its
    /// branch ends.
    async fn agent(
        &mut self,
        phase: Phase,
        head: String,
        written: &dyn Fn() -> bool,
    ) -> Result<(PhaseOutcome, String), WorkError> {
        let config = self.agent_config(phase)?;
        let summary = run_agent(
            &config,
            self.provider,
            self.session,
            self.run,
            head,
            self.abort,
            self.inbox,
            &mut *self.on_event,
        )
        .await?;
        let outcome = match summary.reason {
            // The limit reached by the call that wrote the file still
            // leaves the phase its output.
            EndReason::Done | EndReason::ToolLimit if written() => PhaseOutcome::Written,
            EndReason::Done => PhaseOutcome::Missing,
            reason => PhaseOutcome::Stopped(reason),
        };
        Ok((outcome, summary.head))
    }

    fn agent_config(&self, phase: Phase) -> Result<AgentConfig, WorkError> {
        let config = self.config;
        let own = phase.prompt(&config.files).map_err(WorkError::Prompt)?;
        Ok(AgentConfig {
            model: config.model.clone(),
            system: format!("{}\n\n{own}", config.system),
            tools: self.run.tool_specs(config.model.edit_format),
            max_tools: config.max_tools,
            loop_window: config.loop_window,
            thinking_budget: None,
            compact_reserve: config.compact_reserve,
            compact_prompt: prompt::compact_prompt(&config.files).map_err(WorkError::Prompt)?,
        })
    }

    fn phases_dir(&self) -> PathBuf {
        self.run.dir().phases_dir()
    }

    /// The file a phase wrote, read back for the next phases.
    fn read_output(&self, phase: Phase, round: u32) -> Result<String, WorkError> {
        let path = self.phases_dir().join(phase.output(round));
        std::fs::read_to_string(&path).map_err(|source| WorkError::Record { path, source })
    }

    /// Hands a work event to the consumer and keeps it in the session's log
    /// (a failed insert only loses the log entry, as for the agent's events).
    fn announce(&mut self, message: Option<&str>, event: Event) {
        record_event(self.session, message, &event);
        (self.on_event)(&event);
    }
}
