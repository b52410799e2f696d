//! Several agents in one run (`ah org`): a scheduler in ticks, a router of
//! final messages by their tags, and an inbox per agent, on one [`Run`]
//! (one sandbox, one work copy, one patch).
//!
//! A tick is one agent's turn: its mail, drained in one transaction, opens
//! the turn as one user message ([`letters`]); the agent works as the single
//! agent does ([`run_agent`]: every tool call is a step of the run) until it
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
pub mod roster;
pub mod route;
pub mod schedule;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::agent::{
    AbortSignal, AgentConfig, AgentError, EndReason, Event, Inbox, close_interrupted, run_agent,
};
use ah_llm::{Block, Provider, Role};
use ah_record::run::{Run, StepRules};
use ah_session::queue::Queued;
use ah_session::{BlockRecord, Letter, MailKind, MessageMeta, Session, SessionError};
use route::Tag;
use schedule::{Question, ROSTER_KEY, STATE_KEY, Schedule};

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

/// The org's own events, besides its agents'.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum OrgEvent {
    /// Tick `tick` runs `agent`'s turn, opened by `letters` letters.
    Tick {
        tick: u32,
        agent: String,
        letters: usize,
    },
    /// A letter was posted: `kind` is `task`, `direct`, `group`, `answer`,
    /// `interjection` or `notice`.
    Routed {
        from: String,
        to: String,
        kind: String,
    },
    /// `agent` asks the user.
    AskUser { agent: String, question: String },
    /// The org is over.
    OrgEnd {
        #[serde(flatten)]
        end: OrgEnd,
        ticks: u32,
        agents: BTreeMap<String, Tally>,
    },
}

impl OrgEvent {
    /// The name stored in the session's `events.event_type`.
    pub fn name(&self) -> &'static str {
        match self {
            OrgEvent::Tick { .. } => "tick",
            OrgEvent::Routed { .. } => "routed",
            OrgEvent::AskUser { .. } => "ask_user",
            OrgEvent::OrgEnd { .. } => "org_end",
        }
    }
}

/// One thing the front-end sees, in order.
#[derive(Debug, Clone, Copy)]
pub enum OrgUpdate<'a> {
    Agent { agent: &'a str, event: &'a Event },
    Org(&'a OrgEvent),
}

/// The front-end of an org: it shows the updates and may ask the user.
#[async_trait::async_trait(?Send)]
pub trait OrgFront: Send {
    fn update(&mut self, update: OrgUpdate<'_>);
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
                .tick(&root, &agent, &mut schedule, &mut tallies, left)
                .await?
            {
                Ticked::Next => {}
                Ticked::End(end) => break end,
            }
        };
        // The next run's files are those of the latest step, whichever
        // agent's branch it is in.
        if let Some(latest) = self.session.newest_step_message()? {
            self.session.set_head(&latest)?;
        }
        let ticks = schedule.ticks - first_tick;
        let record = OrgRecord {
            end,
            ticks,
            agents: tallies,
        };
        self.announce(
            None,
            OrgEvent::OrgEnd {
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
        if let Some(text) = input {
            let letters = match schedule.question.take() {
                Some(question) => vec![Letter {
                    // The asker waits for its answer: it runs next.
                    recipient: schedule.addressed.insert(question.agent).clone(),
                    sender: "user".into(),
                    kind: MailKind::Answer,
                    text,
                }],
                None => self.to_everyone("user", MailKind::Interjection, &text, None),
            };
            self.post(None, &letters, &schedule)?;
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
        let ended = last.role == Role::Assistant
            && matches!(last.meta.stop_reason.as_deref(), Some("end_turn") | None)
            && !last
                .blocks
                .iter()
                .any(|b| matches!(b.block, Block::ToolUse { .. }));
        if ended && !self.session.is_routed(&last.id)? {
            let text = final_text(&last.blocks);
            self.route(&agent, &last.id, &text, schedule, false)?;
        }
        Ok(())
    }

    /// One agent's turn.
    async fn tick(
        &mut self,
        root: &str,
        agent: &str,
        schedule: &mut Schedule,
        tallies: &mut BTreeMap<String, Tally>,
        left: Option<u32>,
    ) -> Result<Ticked, OrgError> {
        let index = self
            .config
            .agents
            .iter()
            .position(|a| a.name == agent)
            .ok_or_else(|| OrgError::State(format!("it names an unknown agent {agent:?}")))?;
        let mail = self.session.pending_mail(agent)?;
        let parent = self
            .session
            .agent_head(agent)?
            .unwrap_or_else(|| root.to_string());
        let head = match mail.is_empty() {
            true => parent,
            false => {
                let blocks = letters::blocks(&mail);
                self.session
                    .deliver(agent, Some(&parent), &mail, &blocks)?
                    .id
            }
        };
        schedule.ticks += 1;
        schedule.running = Some(agent.to_string());
        self.save(schedule)?;
        self.announce(
            Some(&head),
            OrgEvent::Tick {
                tick: schedule.ticks,
                agent: agent.to_string(),
                letters: mail.len(),
            },
        );
        let member = &self.config.agents[index];
        let mut config = member.config.clone();
        self.run.set_rules(rules_for(member.tools.as_deref()));
        config.tools = self.run.tool_specs(config.model.edit_format);
        config.max_tools = match (config.max_tools, left) {
            (Some(own), Some(left)) => Some(own.min(left)),
            (own, left) => own.or(left),
        };
        let mut tally = Tally::default();
        let mut changed = false;
        self.session.set_author(Some(agent));
        let summary = {
            let front = &mut *self.front;
            let mut on_event = |event: &Event| {
                match event {
                    Event::ApiCallEnd { usage, .. } => {
                        tally.input_tokens += usage.input_tokens
                            + usage.cache_creation_input_tokens
                            + usage.cache_read_input_tokens;
                        tally.output_tokens += usage.output_tokens;
                    }
                    Event::ToolCallEnd { .. } => tally.tool_calls += 1,
                    Event::StepCommitted { changes, .. } if !changes.is_empty() => changed = true,
                    _ => {}
                }
                front.update(OrgUpdate::Agent { agent, event });
            };
            run_agent(
                &config,
                member.provider.as_ref(),
                self.session,
                self.run,
                head,
                self.abort,
                &NoSteering,
                &mut on_event,
            )
            .await
        };
        self.session.set_author(None);
        let summary = summary?;
        let entry = tallies.entry(agent.to_string()).or_default();
        entry.ticks += 1;
        entry.tool_calls += tally.tool_calls;
        entry.input_tokens += tally.input_tokens;
        entry.output_tokens += tally.output_tokens;
        let busy = tally.tool_calls > 0 || changed;
        schedule.idle = if busy { 0 } else { schedule.idle + 1 };
        let stopped = |reason| {
            Ok(Ticked::End(OrgEnd::Stopped {
                agent: agent.to_string(),
                reason,
            }))
        };
        match summary.reason {
            EndReason::Done => {}
            EndReason::ToolLimit => {
                schedule.running = None;
                schedule.last = Some(agent.to_string());
                schedule.addressed = None;
                let per_turn = member.config.max_tools;
                let run_spent = left.is_some_and(|left| summary.tool_calls >= left)
                    && per_turn.is_none_or(|own| left.is_some_and(|left| left < own));
                if run_spent {
                    self.save(schedule)?;
                    let calls = tallies.values().map(|t| t.tool_calls).sum();
                    return Ok(Ticked::End(OrgEnd::ToolLimit { calls }));
                }
                let note = Letter {
                    recipient: agent.to_string(),
                    sender: "ah".into(),
                    kind: MailKind::Notice,
                    text: format!(
                        "Your last turn reached your limit of {} tool calls per turn and was \
                         cut there. Go on where you left off.",
                        per_turn.unwrap_or_default()
                    ),
                };
                self.post(None, &[note], schedule)?;
                return Ok(self.idle_end(schedule));
            }
            EndReason::Finalized => return Ok(Ticked::End(OrgEnd::Finished)),
            reason => return stopped(reason),
        }
        let final_message = self
            .session
            .agent_head(agent)?
            .ok_or_else(|| OrgError::State(format!("{agent} ended its turn without a message")))?;
        let text = self
            .session
            .path_to(&final_message)?
            .last()
            .map(|message| final_text(&message.blocks))
            .unwrap_or_default();
        self.route(agent, &final_message, &text, schedule, true)?;
        if let Some(question) = schedule.question.clone() {
            self.announce(
                Some(&question.message),
                OrgEvent::AskUser {
                    agent: question.agent.clone(),
                    question: question.text.clone(),
                },
            );
            if let Some(answer) = self.front.ask_user(&question.agent, &question.text).await {
                schedule.question = None;
                schedule.addressed = Some(question.agent.clone());
                let letter = Letter {
                    recipient: question.agent.clone(),
                    sender: "user".into(),
                    kind: MailKind::Answer,
                    text: answer,
                };
                self.post(None, &[letter], schedule)?;
            }
        }
        Ok(self.idle_end(schedule))
    }

    /// The idle guard after a tick.
    fn idle_end(&self, schedule: &Schedule) -> Ticked {
        match schedule.idle >= self.config.idle_ticks.max(1) {
            true => Ticked::End(OrgEnd::Idle {
                ticks: schedule.idle,
            }),
            false => Ticked::Next,
        }
    }

    /// Routes `agent`'s final message `id` (its `text`) by its tags and
    /// records the scheduler's state with it, in one transaction.
    fn route(
        &mut self,
        agent: &str,
        id: &str,
        text: &str,
        schedule: &mut Schedule,
        announce: bool,
    ) -> Result<(), OrgError> {
        let names: Vec<&str> = self.config.agents.iter().map(|a| a.name.as_str()).collect();
        let mut letters = Vec::new();
        let mut addressed = None;
        let mut unknown = Vec::new();
        for tag in route::tags(text) {
            match tag {
                Tag::Group => {
                    letters.extend(self.to_everyone(agent, MailKind::Group, text, Some(agent)))
                }
                Tag::User => {
                    schedule.question = Some(Question {
                        agent: agent.to_string(),
                        text: text.to_string(),
                        message: id.to_string(),
                    });
                }
                Tag::Name(name) if name == agent => {}
                Tag::Name(name) if names.contains(&name.as_str()) => {
                    addressed.get_or_insert_with(|| name.clone());
                    letters.push(Letter {
                        recipient: name,
                        sender: agent.to_string(),
                        kind: MailKind::Direct,
                        text: text.to_string(),
                    });
                }
                Tag::Name(name) => unknown.push(name),
            }
        }
        // One letter per recipient: a direct tag beside `@@group` is one.
        let mut seen = Vec::new();
        letters.retain(|letter| {
            let first = !seen.contains(&letter.recipient);
            seen.push(letter.recipient.clone());
            first
        });
        if !unknown.is_empty() {
            letters.push(Letter {
                recipient: agent.to_string(),
                sender: "ah".into(),
                kind: MailKind::Notice,
                text: format!(
                    "Your last message named {}, but no agent has that name, so it reached \
                     nobody by that tag. The agents are: {}.",
                    unknown
                        .iter()
                        .map(|n| format!("@@{n}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    names.join(", ")
                ),
            });
        }
        schedule.running = None;
        schedule.last = Some(agent.to_string());
        schedule.addressed = addressed;
        let state = encode(schedule)?;
        self.session
            .post(Some(id), &letters, &[(STATE_KEY, &state)])?;
        if announce {
            for letter in &letters {
                self.announce(Some(id), routed(letter));
            }
        }
        Ok(())
    }

    /// Moves the user's queued messages into the inboxes: to the agent a
    /// message names first with `@@name`, else to every agent.
    fn take_interjections(&mut self, root: &str) -> Result<(), OrgError> {
        let queued = self.interjections.take()?;
        if queued.is_empty() {
            return Ok(());
        }
        let names: Vec<String> = self.config.agents.iter().map(|a| a.name.clone()).collect();
        let mut letters = Vec::new();
        for message in &queued {
            let named = route::tags(&message.text)
                .into_iter()
                .find_map(|tag| match tag {
                    Tag::Name(name) if names.contains(&name) => Some(name),
                    _ => None,
                });
            match named {
                Some(name) => letters.push(Letter {
                    recipient: name,
                    sender: "user".into(),
                    kind: MailKind::Interjection,
                    text: message.text.clone(),
                }),
                None => letters.extend(self.to_everyone(
                    "user",
                    MailKind::Interjection,
                    &message.text,
                    None,
                )),
            }
        }
        self.session.post(None, &letters, &[])?;
        let ids: Vec<i64> = queued.iter().map(|message| message.id).collect();
        self.interjections.posted(&ids, root)?;
        for letter in &letters {
            self.announce(None, routed(letter));
        }
        Ok(())
    }

    /// A letter from `sender` to every agent but `except`.
    fn to_everyone(
        &self,
        sender: &str,
        kind: MailKind,
        text: &str,
        except: Option<&str>,
    ) -> Vec<Letter> {
        self.config
            .agents
            .iter()
            .filter(|agent| Some(agent.name.as_str()) != except)
            .map(|agent| Letter {
                recipient: agent.name.clone(),
                sender: sender.to_string(),
                kind,
                text: text.to_string(),
            })
            .collect()
    }

    /// Posts `letters` with the scheduler's state (and the roster).
    fn post(
        &mut self,
        source: Option<&str>,
        letters: &[Letter],
        schedule: &Schedule,
    ) -> Result<(), OrgError> {
        let state = encode(schedule)?;
        self.session.post(
            source,
            letters,
            &[(STATE_KEY, &state), (ROSTER_KEY, &self.config.roster)],
        )?;
        for letter in letters {
            self.announce(None, routed(letter));
        }
        Ok(())
    }

    fn save(&mut self, schedule: &Schedule) -> Result<(), OrgError> {
        self.session.set_context(STATE_KEY, &encode(schedule)?)?;
        Ok(())
    }

    /// Hands an org event to the front-end and keeps it in the session's
    /// log (a failed insert only loses the log entry).
    fn announce(&mut self, message: Option<&str>, event: OrgEvent) {
        if let Ok(details) = serde_json::to_value(&event) {
            let _ = self.session.record_event(message, event.name(), &details);
        }
        self.front.update(OrgUpdate::Org(&event));
    }
}

/// The step rules of an agent with `tools`: naming either edit tool gives
/// the one of its model's edit format.
fn rules_for(tools: Option<&[String]>) -> StepRules {
    let Some(tools) = tools else {
        return StepRules::read_write();
    };
    let edits = ["edit", "apply_patch"];
    let mut names: Vec<&str> = tools.iter().map(String::as_str).collect();
    if names.iter().any(|name| edits.contains(name)) {
        names.extend(edits);
    }
    StepRules::read_write().only(&names)
}

fn routed(letter: &Letter) -> OrgEvent {
    OrgEvent::Routed {
        from: letter.sender.clone(),
        to: letter.recipient.clone(),
        kind: letter.kind.as_str().to_string(),
    }
}

fn encode(schedule: &Schedule) -> Result<String, OrgError> {
    serde_json::to_string(schedule).map_err(|err| OrgError::State(err.to_string()))
}

/// The text of a final message: its text blocks, joined.
fn final_text(blocks: &[BlockRecord]) -> String {
    blocks
        .iter()
        .filter_map(|record| match &record.block {
            Block::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}
