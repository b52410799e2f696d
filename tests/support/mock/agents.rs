//! Per-agent scripts, for `ah org` runs where several agents share one mock.
//!
//! ah puts "You are the agent `NAME`" in the system prompt of every request
//! an org agent makes. Once the server has any agent script (from
//! [`MockServer::start_agents`] or [`MockServer::push_for`]), a request with
//! that marker takes the next turn of `NAME`'s own script, so the agents'
//! turns need not be interleaved in the order their requests happen to
//! arrive; a request without it takes the next shared turn. A request naming
//! an agent with no script left, or none at all (a misspelt name), is
//! refused the way an exhausted shared script is, naming the agent. A server
//! from [`MockServer::start`] has no agent scripts and ignores the marker.

use std::collections::{BTreeMap, VecDeque};

use serde_json::Value;

use super::{MockServer, Turn};

/// What precedes the agent's name, which is closed by a backtick.
const MARKER: &str = "You are the agent `";

/// Every agent's script, by agent name.
#[derive(Default)]
pub(super) struct Agents {
    scripts: BTreeMap<String, Script>,
}

/// One agent's turns not yet used, and how many it was ever given.
#[derive(Default)]
struct Script {
    turns: VecDeque<Turn>,
    scripted: usize,
}

impl Agents {
    /// The agent whose script answers a request with `body`: the one its
    /// system prompt names, if the server has any agent scripts; `None` for
    /// the shared script.
    pub(super) fn owner(&self, body: &Value) -> Option<String> {
        if self.scripts.is_empty() {
            return None;
        }
        agent_in(body)
    }

    /// Takes the next turn of `agent`'s script for request `number`, or the
    /// error message saying that agent has none left.
    pub(super) fn next_turn(&mut self, agent: &str, number: usize) -> Result<Turn, String> {
        let script = self.scripts.get_mut(agent);
        let scripted = script.as_ref().map_or(0, |script| script.scripted);
        script
            .and_then(|script| script.turns.pop_front())
            .ok_or_else(|| {
                format!(
                    "mock script of agent `{agent}` exhausted: request {number} has no scripted \
                     turn ({scripted} turns were scripted for `{agent}`)"
                )
            })
    }

    fn push(&mut self, agent: &str, turn: Turn) {
        let script = self.scripts.entry(checked(agent)).or_default();
        script.scripted += 1;
        script.turns.push_back(turn);
    }

    fn pending(&self, agent: &str) -> usize {
        self.scripts
            .get(agent)
            .map_or(0, |script| script.turns.len())
    }
}

impl MockServer {
    /// Starts a server like [`MockServer::start`], with no shared turns
    /// (add them with [`MockServer::push`]) and a script of its own for each
    /// named agent: a request whose system prompt says "You are the agent
    /// `NAME`" is answered with the next turn of `NAME`'s script, whatever
    /// the other agents' requests do meanwhile.
    ///
    /// # Panics
    /// If a name is not `[A-Za-z0-9_-]+` or is given twice, or the server
    /// cannot be set up.
    pub(crate) fn start_agents(agents: Vec<(&str, Vec<Turn>)>) -> MockServer {
        let mut scripts = Agents::default();
        for (agent, turns) in agents {
            assert!(
                !scripts.scripts.contains_key(agent),
                "mock: agent `{agent}` is given twice to start_agents"
            );
            let script = scripts.scripts.entry(checked(agent)).or_default();
            script.scripted = turns.len();
            script.turns = turns.into();
        }
        MockServer::launch(Vec::new(), scripts)
    }

    /// Appends a turn to `agent`'s script while the server runs; on a server
    /// without agent scripts, this turns answering per agent on.
    ///
    /// # Panics
    /// If `agent` is not `[A-Za-z0-9_-]+`.
    pub(crate) fn push_for(&self, agent: &str, turn: Turn) {
        self.shared.lock().agents.push(agent, turn);
    }

    /// How many turns of `agent`'s script no request has used yet.
    pub(crate) fn pending_turns_for(&self, agent: &str) -> usize {
        self.shared.lock().agents.pending(agent)
    }
}

/// The agent named by the marker in the system prompt of a request body:
/// the `system` field (a string, or blocks with `text`) of the Messages API,
/// or the content (a string, or parts with `text`) of the `system` messages
/// of Chat Completions. The first well-formed marker counts.
pub(super) fn agent_in(body: &Value) -> Option<String> {
    system_texts(body).into_iter().find_map(named_in)
}

/// The texts of the system prompt of a request body: the `system` field (a
/// string, or blocks with `text`) of the Messages API, then the content (a
/// string, or parts with `text`) of the `system` messages of Chat
/// Completions.
pub(super) fn system_texts(body: &Value) -> Vec<&str> {
    let messages = body["messages"].as_array().map_or(&[][..], Vec::as_slice);
    let system_messages = messages
        .iter()
        .filter(|message| message["role"] == "system")
        .flat_map(|message| texts(&message["content"]));
    texts(&body["system"])
        .into_iter()
        .chain(system_messages)
        .collect()
}

/// A string, or the `text` of each block of an array.
fn texts(value: &Value) -> Vec<&str> {
    match value {
        Value::String(text) => vec![text.as_str()],
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|block| block["text"].as_str())
            .collect(),
        _ => Vec::new(),
    }
}

/// `NAME` of the first "You are the agent `NAME`" in `text`.
fn named_in(text: &str) -> Option<String> {
    text.match_indices(MARKER).find_map(|(at, _)| {
        let (name, _) = text[at + MARKER.len()..].split_once('`')?;
        is_agent_name(name).then(|| name.to_string())
    })
}

fn is_agent_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-')
}

/// `agent` as a script key.
///
/// # Panics
/// If no marker could name it.
fn checked(agent: &str) -> String {
    assert!(
        is_agent_name(agent),
        "mock: `{agent}` is not an agent name ([A-Za-z0-9_-]+), so no request could name it"
    );
    agent.to_string()
}
