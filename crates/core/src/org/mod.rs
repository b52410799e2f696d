//! Several agents in one run (`ah org`): a scheduler in ticks, a router of
//! final messages by their tags, and an inbox per agent, on one [`Run`]
//! (one sandbox, one work copy, one patch).
//!
//! A tick is one agent's turn: its mail, drained in one transaction, opens
//! the turn as one user message ([`letters`]); the agent works as the single
//! agent does ([`run_agent`](crate::agent::run_agent): every tool call is a
//! step of the run) until it
//! ends its turn or reaches its tool budget; its final message is routed by
//! its tags ([`route`]) into the other agents' inboxes, in one transaction
//! with the scheduler's state ([`schedule`]). The next tick is the agent
//! addressed first, else the next with mail in roster order. The run ends
//! when nobody has mail (done), when an agent asks the user and nobody is
//! there to answer, on the guards (ticks, tool calls, idle ticks, loops,
//! disk) or when stopped.
//!
//! In the session, the task is the root and each agent's conversation is a
//! branch under it whose messages carry the agent's name; the mail and the
//! state are in the same file, so a crash or Ctrl+C loses no mail and the
//! continued session goes on where it stopped.

pub mod letters;
mod post;
pub mod roster;
pub mod route;
pub mod schedule;
mod tick;

use std::collections::{BTreeMap, HashSet};

use serde::Serialize;

use crate::agent::{
    AbortSignal, AgentConfig, AgentError, EndReason, Event, Inbox, close_interrupted,
};
use ah_llm::{Block, Provider, Role};
use ah_record::run::Run;
use ah_session::queue::Queued;
use ah_session::{BlockRecord, MailKind, MessageMeta, Session, SessionError};
use schedule::{STATE_KEY, Schedule};

/// The default ticks in a row without a tool call or a file change that
/// stop the run.
pub const DEFAULT_IDLE_TICKS: u32 = 6;
/// The default most ticks of a run.
pub const DEFAULT_MAX_TICKS: u32 = 100;

/// One agent, ready to run.
pub struct OrgAgent {
    pub name: String,
    /// Its loop's configuration; `max_tools` is its budget per turn; its
    /// tools are set at each tick (see `tools`).
    pub config: AgentConfig,
    /// Which of ah's tools it may use; `None`: all.
    pub tools: Option<Vec<String>>,
    pub provider: Box<dyn Provider>,
}

/// What the org needs besides its collaborators.
pub struct OrgConfig {
    /// In roster order: the first runs the first tick.
    pub agents: Vec<OrgAgent>,
    /// The roster as the session keeps it (`--agents`' form).
    pub roster: String,
    /// The most ticks of this run.
    pub max_ticks: u32,
    /// Idle ticks in a row that stop the run.
    pub idle_ticks: u32,
    /// The most tool calls of this run, all agents together.
    pub max_tools: Option<u32>,
    /// The user's words: the task of a new org, or what the user says to a
    /// continued one (the answer to an open question goes to the asker;
    /// anything else to every agent).
    pub input: Option<String>,
    /// Where the files of a continued org come from, told to each agent
    /// in its first tick of the run.
    pub files_note: Option<String>,
}

/// Why an org could not go on.
#[derive(Debug, thiserror::Error)]
pub enum OrgError {
    #[error(transparent)]
    Agent(#[from] AgentError),
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error("the session's org state is damaged ({0}); start a new org with `ah org`")]
    State(String),
    #[error("could not write {}: {source}; check that the run directory is writable", path.display())]
    Record {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
}

/// How an org run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "end", rename_all = "snake_case")]
pub enum OrgEnd {
    /// Nobody has mail and nobody asked the user.
    Done,
    /// The user ended the run (Esc): go to review.
    Finished,
    /// An agent asked the user and nobody was there to answer.
    Asked { agent: String, question: String },
    /// `idle_ticks` ticks in a row without a tool call or a file change.
    Idle { ticks: u32 },
    /// The run's tick limit.
    TickLimit { ticks: u32 },
    /// The run's tool call budget.
    ToolLimit { calls: u32 },
    /// An agent's loop stopped (abort, loops, disk budget, a poisoned run,
    /// the model's own stop).
    Stopped { agent: String, reason: EndReason },
}

/// What one agent did in this run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
    pub ticks: u32,
    pub tool_calls: u32,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// The front-end of an org: it shows the events (an agent's, with its
/// name, or the org's own) and may ask the user.
#[async_trait::async_trait(?Send)]
pub trait OrgFront: Send {
    fn show(&mut self, agent: Option<&str>, event: &Event);
    /// Asks the user `question` for `agent`; `None` when nobody can answer
    /// here (no terminal, `--json`).
    async fn ask_user(&mut self, agent: &str, question: &str) -> Option<String>;
}

/// Where the user's messages come from while the org runs (`i`, `ah
/// --steer`, `ah --followup`): taken between ticks, delivered as mail.
pub trait Interjections {
    fn take(&self) -> Result<Vec<Queued>, SessionError>;
    /// They are stored as mail (their delivery is the org's).
    fn posted(&self, ids: &[i64], root: &str) -> Result<(), SessionError>;
}

/// The agent loop's inbox in an org: none. Mail reaches an agent at the
/// start of its turn, not inside it.
pub struct NoSteering;

impl Inbox for NoSteering {
    fn take_steering(&self) -> Result<Vec<Queued>, SessionError> {
        Ok(Vec::new())
    }
    fn delivered(&self, _: &[i64], _: &str) -> Result<(), SessionError> {
        Ok(())
    }
    fn turn_ended(&self, _: &str) -> Result<Vec<Queued>, SessionError> {
        Ok(Vec::new())
    }
}

/// The org's collaborators, borrowed for the whole run.
pub struct Org<'a> {
    pub config: &'a OrgConfig,
    pub session: &'a mut Session,
    pub run: &'a mut Run,
    pub abort: &'a mut AbortSignal,
    pub interjections: &'a dyn Interjections,
    pub front: &'a mut dyn OrgFront,
}

/// How the org's run ended, and what each agent did.
#[derive(Debug, Clone)]
pub struct OrgRecord {
    pub end: OrgEnd,
    pub ticks: u32,
    pub agents: BTreeMap<String, Tally>,
}

/// A tick's outcome for the loop.
enum Ticked {
    Next,
    End(OrgEnd),
}

impl Org<'_> {
    /// Runs the org from the user's input to its end.
    pub async fn run(mut self) -> Result<OrgRecord, OrgError> {
        let mut tallies: BTreeMap<String, Tally> = self
            .config
            .agents
            .iter()
            .map(|agent| (agent.name.clone(), Tally::default()))
            .collect();
        let (root, mut schedule) = self.begin()?;
        let first_tick = schedule.ticks;
        // The agents told, in their first tick of this run, where the files
        // come from.
        let mut told = HashSet::new();
        let end = loop {
            if self.abort.is_requested() {
                break OrgEnd::Stopped {
                    agent: schedule.last.clone().unwrap_or_default(),
                    reason: EndReason::Aborted,
                };
            }
            if self.abort.is_finalizing() {
                break OrgEnd::Finished;
            }
            self.take_interjections(&root)?;
            if let Some(question) = &schedule.question {
                break OrgEnd::Asked {
                    agent: question.agent.clone(),
                    question: question.text.clone(),
                };
            }
            let names: Vec<String> = self.config.agents.iter().map(|a| a.name.clone()).collect();
            let running = schedule.running.clone();
            let next = match running {
                Some(name) => Some(name),
                None => {
                    let session = &*self.session;
                    let has_mail = |name: &str| {
                        session
                            .pending_mail(name)
                            .map(|mail| !mail.is_empty())
                            .unwrap_or(true)
                    };
                    schedule.next(&names, &has_mail).map(str::to_string)
                }
            };
            let Some(agent) = next else {
                break OrgEnd::Done;
            };
            if schedule.ticks - first_tick >= self.config.max_ticks {
                break OrgEnd::TickLimit {
                    ticks: self.config.max_ticks,
                };
            }
            let used: u32 = tallies.values().map(|t| t.tool_calls).sum();
            let left = self.config.max_tools.map(|max| max.saturating_sub(used));
            if left == Some(0) {
                break OrgEnd::ToolLimit { calls: used };
            }
            match self
                .tick(&root, &agent, &mut schedule, &mut tallies, left, &mut told)
                .await?
            {
                Ticked::Next => {}
                Ticked::End(end) => break end,
            }
        };
        let ticks = schedule.ticks - first_tick;
        let record = OrgRecord {
            end,
            ticks,
            agents: tallies,
        };
        self.announce(
            None,
            Event::OrgEnd {
                end: record.end.clone(),
                ticks,
                agents: record.agents.clone(),
            },
        );
        Ok(record)
    }

    /// A new org: the task as the root, in every agent's inbox. A continued
    /// one: the user's words to the asker of the open question, else to
    /// every agent.
    fn begin(&mut self) -> Result<(String, Schedule), OrgError> {
        let state = self.session.context(STATE_KEY)?;
        let input = self.config.input.clone();
        let Some(state) = state else {
            let task = input.unwrap_or_default();
            let root = self.session.append(
                None,
                Role::User,
                &[BlockRecord::from(Block::Text { text: task.clone() })],
                &MessageMeta::default(),
            )?;
            let schedule = Schedule {
                root: Some(root.id.clone()),
                ..Schedule::default()
            };
            let letters = self.to_everyone("user", MailKind::Task, &task, None);
            self.post(None, &letters, &schedule)?;
            return Ok((root.id, schedule));
        };
        let mut schedule: Schedule =
            serde_json::from_str(&state).map_err(|err| OrgError::State(err.to_string()))?;
        let root = schedule
            .root
            .clone()
            .ok_or_else(|| OrgError::State("it names no root message".into()))?;
        self.recover(&mut schedule)?;
        match input {
            Some(text) if schedule.question.is_some() => self.answer(&mut schedule, text)?,
            Some(text) => {
                // The user spoke: the idle streak starts again.
                schedule.idle = 0;
                let letters = self.to_everyone("user", MailKind::Interjection, &text, None);
                self.post(None, &letters, &schedule)?;
            }
            None => {}
        }
        Ok((root, schedule))
    }

    /// An agent's tick that never ended (a crash, SIGKILL): its tool calls
    /// left without results are answered "interrupted", and a final
    /// message the crash kept from its routing is routed now (each message
    /// is routed once). The agent's turn then goes on first.
    fn recover(&mut self, schedule: &mut Schedule) -> Result<(), OrgError> {
        let Some(agent) = schedule.running.clone() else {
            return Ok(());
        };
        let Some(head) = self.session.agent_head(&agent)? else {
            return Ok(());
        };
        self.session.set_head(&head)?;
        self.session.set_author(Some(&agent));
        let closed = close_interrupted(self.session);
        self.session.set_author(None);
        closed?;
        let Some(head) = self.session.agent_head(&agent)? else {
            return Ok(());
        };
        let path = self.session.path_to(&head)?;
        let Some(last) = path.last() else {
            return Ok(());
        };
        // Whatever stopped it (its end, its output limit, Esc), a final
        // message is routed: the org goes on from the other agents' side.
        let ended = last.role == Role::Assistant
            && !last
                .blocks
                .iter()
                .any(|b| matches!(b.block, Block::ToolUse { .. }));
        if ended && !self.session.is_routed(&last.id)? {
            let text = tick::final_text(&last.blocks);
            self.route(&agent, &last.id, &text, schedule, false)?;
        }
        Ok(())
    }
}
