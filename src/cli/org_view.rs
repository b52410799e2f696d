//! How an org (`ah org`) looks at a terminal: each agent's streamed text
//! opens with its name in a colour of its own (plain when piped or under
//! `NO_COLOR`, as `console` decides), a tick is a rule naming the agent,
//! a letter is one line (`lead → coder`), and the end line gives each
//! agent's ticks, tool calls and tokens. With `--json` every agent event
//! carries the agent's name (`agent` of [`ah_core::event::RunEvent`]).

use console::{Color, style};

use ah_core::event::Event;
use ah_core::org::OrgEnd;
use ah_core::present::{count, terminal_safe};

const COLOURS: [Color; 6] = [
    Color::Cyan,
    Color::Magenta,
    Color::Yellow,
    Color::Green,
    Color::Blue,
    Color::Red,
];

/// The agents seen so far (their colours follow that order) and whether
/// the next text needs its agent's name first.
#[derive(Default)]
pub(super) struct OrgView {
    agents: Vec<String>,
    label_due: bool,
}

impl OrgView {
    /// The label to print before `event` of `agent`'s, when its text starts.
    pub(super) fn label_before(&mut self, agent: &str, event: &Event) -> Option<String> {
        match event {
            Event::TextDelta { .. } if self.label_due => {
                self.label_due = false;
                Some(self.name(agent).to_string() + ":")
            }
            Event::ApiCallStart { .. } | Event::ToolCallEnd { .. } => {
                self.label_due = true;
                None
            }
            _ => None,
        }
    }

    /// A line for an org's own event; `None` for any other event.
    pub(super) fn line(&mut self, event: &Event) -> Option<String> {
        Some(match event {
            Event::Tick {
                tick,
                agent,
                letters,
            } => {
                self.label_due = true;
                format!(
                    "{} tick {tick}: {} ({})",
                    style("──").dim(),
                    self.name(agent),
                    count(*letters, "letter", "letters")
                )
            }
            Event::Routed { from, to, kind } => {
                format!("  {} → {} ({kind})", self.name(from), self.name(to))
            }
            Event::AskUser { agent, question } => format!(
                "{} {} asks you:\n{}",
                style("?").yellow().bold(),
                self.name(agent),
                terminal_safe(question)
            ),
            Event::OrgEnd { end, ticks, agents } => {
                let each: Vec<String> = agents
                    .iter()
                    .map(|(name, tally)| {
                        format!(
                            "{} {}, {}, {}↑ {}↓ tokens",
                            self.name(name),
                            count(tally.ticks, "tick", "ticks"),
                            count(tally.tool_calls, "tool call", "tool calls"),
                            tally.input_tokens,
                            tally.output_tokens
                        )
                    })
                    .collect();
                format!(
                    "org over after {}: {}\n  {}",
                    count(*ticks, "tick", "ticks"),
                    ending(end),
                    each.join("\n  ")
                )
            }
            _ => return None,
        })
    }

    /// `agent` in its colour (`user` and `ah` plain).
    fn name(&mut self, agent: &str) -> String {
        if matches!(agent, "user" | "ah") {
            return agent.to_string();
        }
        let index = match self.agents.iter().position(|a| a == agent) {
            Some(index) => index,
            None => {
                self.agents.push(agent.to_string());
                self.agents.len() - 1
            }
        };
        style(terminal_safe(agent).to_string())
            .fg(COLOURS[index % COLOURS.len()])
            .bold()
            .to_string()
    }
}

fn ending(end: &OrgEnd) -> String {
    match end {
        OrgEnd::Done => "nobody has mail left".into(),
        OrgEnd::Finished => "finished by the user".into(),
        OrgEnd::Asked { agent, .. } => {
            format!("{} waits for the user's answer", terminal_safe(agent))
        }
        OrgEnd::Idle { ticks } => format!("{} in a row", count(*ticks, "idle tick", "idle ticks")),
        OrgEnd::TickLimit { ticks } => format!("the tick limit ({ticks})"),
        OrgEnd::ToolLimit { calls } => {
            format!("the tool call limit ({})", count(*calls, "call", "calls"))
        }
        OrgEnd::Stopped { agent, reason } => {
            format!("{} stopped ({})", terminal_safe(agent), reason.as_str())
        }
    }
}
