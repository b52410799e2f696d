//! One tick: an agent's mail opens its turn (in one transaction with the
//! scheduler's state), the agent works as the single agent does, and its
//! final message is routed; an `@@user` question is asked here.

use std::collections::{BTreeMap, HashSet};

use super::post::encode;
use super::schedule::{STATE_KEY, Schedule};
use super::{NoSteering, Org, OrgEnd, OrgError, Tally, Ticked, letters};
use crate::agent::{EndReason, Event, run_agent};
use ah_llm::Block;
use ah_record::run::StepRules;
use ah_session::{BlockRecord, Letter, MailKind};

impl Org<'_> {
    /// One agent's turn.
    pub(super) async fn tick(
        &mut self,
        root: &str,
        agent: &str,
        schedule: &mut Schedule,
        tallies: &mut BTreeMap<String, Tally>,
        left: Option<u32>,
        told: &mut HashSet<String>,
    ) -> Result<Ticked, OrgError> {
        let index = self
            .config
            .agents
            .iter()
            .position(|a| a.name == agent)
            .ok_or_else(|| OrgError::State(format!("it names an unknown agent {agent:?}")))?;
        let mail = self.session.pending_mail(agent)?;
        let parent = self.session.agent_head(agent)?;
        schedule.ticks += 1;
        schedule.running = Some(agent.to_string());
        let state = encode(schedule)?;
        let files_note = match told.insert(agent.to_string()) {
            true => self.config.files_note.as_deref(),
            false => None,
        };
        // The turn's mail and the tick's start are one transaction: a crash
        // after it goes on with this agent, which has the mail.
        let head = match (mail.is_empty() && files_note.is_none(), &parent) {
            (true, Some(parent)) => {
                self.session.set_context(STATE_KEY, &state)?;
                parent.clone()
            }
            _ => {
                let mut blocks = letters::blocks(&mail, parent.is_none());
                if let Some(note) = files_note {
                    blocks.push(BlockRecord::from(Block::Text {
                        text: note.to_string(),
                    }));
                }
                let parent = parent.as_deref().unwrap_or(root);
                self.session
                    .deliver(
                        agent,
                        Some(parent),
                        (&mail, &blocks),
                        &[(STATE_KEY, &state)],
                    )?
                    .id
            }
        };
        self.announce(
            Some(&head),
            Event::Tick {
                tick: schedule.ticks,
                agent: agent.to_string(),
                letters: mail.len(),
            },
        );
        let member = &self.config.agents[index];
        let mut config = member.config.clone();
        self.run.set_rules(match &member.tools {
            Some(tools) => {
                let names: Vec<&str> = tools.iter().map(String::as_str).collect();
                StepRules::read_write().only(&names)
            }
            None => StepRules::read_write(),
        });
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
                front.show(Some(agent), event);
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
        // A final message cut by the model's output limit (or a refusal)
        // is routed as it stands, and its agent told.
        let cut = summary.reason == EndReason::Stopped;
        match summary.reason {
            EndReason::Done | EndReason::Stopped => {}
            EndReason::ToolLimit => {
                schedule.running = None;
                schedule.last = Some(agent.to_string());
                schedule.addressed = None;
                let per_turn = member.config.max_tools;
                if left.is_some_and(|left| summary.tool_calls >= left) {
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
        if cut {
            let note = Letter {
                recipient: agent.to_string(),
                sender: "ah".into(),
                kind: MailKind::Notice,
                text: "Your last message was cut off before its end (the output limit, or \
                       the model stopped); it was delivered as it stood. Finish what you \
                       meant to say, shorter."
                    .to_string(),
            };
            self.post(None, &[note], schedule)?;
        }
        if let Some(question) = schedule.question.clone() {
            self.announce(
                Some(&question.message),
                Event::AskUser {
                    agent: question.agent.clone(),
                    question: question.text.clone(),
                },
            );
            if let Some(answer) = self.front.ask_user(&question.agent, &question.text).await {
                self.answer(schedule, answer)?;
            }
        }
        Ok(self.idle_end(schedule))
    }

    /// The idle guard after a tick.
    pub(super) fn idle_end(&self, schedule: &Schedule) -> Ticked {
        match schedule.idle >= self.config.idle_ticks.max(1) {
            true => Ticked::End(OrgEnd::Idle {
                ticks: schedule.idle,
            }),
            false => Ticked::Next,
        }
    }
}

/// The text of a final message: its text blocks, joined.
pub(super) fn final_text(blocks: &[BlockRecord]) -> String {
    blocks
        .iter()
        .filter_map(|record| match &record.block {
            Block::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}
