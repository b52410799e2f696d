//! The scheduler's state, kept in the session's context (`org_state`) so
//! that a continued session goes on where it stopped: ticks so far, the
//! idle streak, the last agent that ran and the one addressed last, and the
//! open `@@user` question. Choosing the next agent is a pure function of it
//! and of who has mail: the same answers give the same schedule.

use serde::{Deserialize, Serialize};

/// The context key of the state.
pub const STATE_KEY: &str = "org_state";
/// The context key of the roster (names in order), which marks an org
/// session.
pub const ROSTER_KEY: &str = "org_agents";

/// Where the scheduler stands.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schedule {
    /// The session's root message: the task.
    pub root: Option<String>,
    /// Ticks run so far, in every run of the session.
    pub ticks: u32,
    /// Ticks in a row without a tool call or a file change.
    pub idle: u32,
    /// The agent of the last tick.
    pub last: Option<String>,
    /// The agent whose tick began and did not end (a crash, Ctrl+C): its
    /// turn goes on first.
    pub running: Option<String>,
    /// The agent the last routed message named first, or the one the user
    /// just answered: it runs next.
    pub addressed: Option<String>,
    /// An agent's question to the user, not answered yet.
    pub question: Option<Question>,
}

/// An `@@user` question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Question {
    pub agent: String,
    pub text: String,
    /// The message that asked.
    pub message: String,
}

impl Schedule {
    /// The agent of the next tick: the one addressed last when it has
    /// mail, else the first with mail after the last one to run, in roster
    /// order (the first agent when none has run). `None`: nobody has mail.
    pub fn next<'a>(
        &self,
        roster: &'a [String],
        has_mail: &dyn Fn(&str) -> bool,
    ) -> Option<&'a str> {
        if let Some(addressed) = &self.addressed
            && let Some(name) = roster.iter().find(|name| *name == addressed)
            && has_mail(name)
        {
            return Some(name);
        }
        let start = match &self.last {
            Some(last) => roster.iter().position(|n| n == last).map_or(0, |i| i + 1),
            None => 0,
        };
        (0..roster.len())
            .map(|offset| roster[(start + offset) % roster.len()].as_str())
            .find(|name| has_mail(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roster() -> Vec<String> {
        ["lead", "coder", "tester"].map(String::from).to_vec()
    }

    #[test]
    fn first_tick_is_the_first_agents() {
        let all = |_: &str| true;
        assert_eq!(Schedule::default().next(&roster(), &all), Some("lead"));
    }

    #[test]
    fn the_addressed_agent_runs_next_when_it_has_mail() {
        let schedule = Schedule {
            last: Some("lead".into()),
            addressed: Some("tester".into()),
            ..Schedule::default()
        };
        assert_eq!(schedule.next(&roster(), &|_| true), Some("tester"));
        // Without mail for it, round-robin after the last.
        assert_eq!(schedule.next(&roster(), &|n| n != "tester"), Some("coder"));
    }

    #[test]
    fn round_robin_wraps_over_agents_with_mail() {
        let schedule = Schedule {
            last: Some("tester".into()),
            ..Schedule::default()
        };
        assert_eq!(schedule.next(&roster(), &|n| n != "lead"), Some("coder"));
        assert_eq!(schedule.next(&roster(), &|n| n == "tester"), Some("tester"));
        assert_eq!(schedule.next(&roster(), &|_| false), None);
    }
}
