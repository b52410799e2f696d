//! The org's writes besides a tick's: routing a final message by its tags,
//! the user's messages into the inboxes, letters with the scheduler's
//! state, and the org's events.

use super::route::{self, Tag};
use super::schedule::{Question, ROSTER_KEY, STATE_KEY, Schedule};
use super::{Org, OrgError};
use crate::agent::{Event, record_event};
use ah_session::{Letter, MailKind};

impl Org<'_> {
    /// Routes `agent`'s final message `id` (its `text`) by its tags and
    /// records the scheduler's state with it, in one transaction.
    pub(super) fn route(
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

    /// The user's answer to the open question, at a terminal or given to
    /// the continued org: a letter to the asker, which runs next (it waits
    /// for its answer, even when its message also named another agent);
    /// the user spoke, so the idle streak starts again. Nothing when no
    /// question is open.
    pub(super) fn answer(&mut self, schedule: &mut Schedule, text: String) -> Result<(), OrgError> {
        let Some(question) = schedule.question.take() else {
            return Ok(());
        };
        schedule.idle = 0;
        schedule.addressed = Some(question.agent.clone());
        let letter = Letter {
            recipient: question.agent,
            sender: "user".into(),
            kind: MailKind::Answer,
            text,
        };
        self.post(None, &[letter], schedule)
    }

    /// Moves the user's queued messages into the inboxes: to the agent a
    /// message names first with `@@name`, else to every agent.
    pub(super) fn take_interjections(&mut self, root: &str) -> Result<(), OrgError> {
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
    pub(super) fn to_everyone(
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
    pub(super) fn post(
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

    pub(super) fn save(&mut self, schedule: &Schedule) -> Result<(), OrgError> {
        self.session.set_context(STATE_KEY, &encode(schedule)?)?;
        Ok(())
    }

    /// Hands an org event to the front-end and keeps it in the session's
    /// log (a failed insert only loses the log entry).
    pub(super) fn announce(&mut self, message: Option<&str>, event: Event) {
        record_event(self.session, message, &event);
        self.front.show(None, &event);
    }
}

pub(super) fn routed(letter: &Letter) -> Event {
    Event::Routed {
        from: letter.sender.clone(),
        to: letter.recipient.clone(),
        kind: letter.kind.as_str().to_string(),
    }
}

pub(super) fn encode(schedule: &Schedule) -> Result<String, OrgError> {
    serde_json::to_string(schedule).map_err(|err| OrgError::State(err.to_string()))
}
