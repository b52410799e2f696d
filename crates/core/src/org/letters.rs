//! What an agent reads of the org: its mail as the user message that opens
//! its turn (each letter one text block, labelled with its sender), and
//! the part of its system prompt that names it, its peers and the routing
//! rules.

use serde_json::json;

use super::roster::AgentSpec;
use ah_session::{BlockRecord, Mail, MailKind};

/// One text block per letter, labelled; its details name the letter. In
/// an agent's first turn (`first`), its conversation starts under the task
/// itself: the task's letter only points to it.
pub fn blocks(mail: &[Mail], first: bool) -> Vec<BlockRecord> {
    mail.iter()
        .map(|letter| {
            let text = match (letter.kind, first) {
                (MailKind::Task, true) => String::new(),
                _ => format!("\n\n{}", letter.text),
            };
            let label = match letter.kind {
                MailKind::Task if first => {
                    "The task above is from the user, to every agent.".to_string()
                }
                MailKind::Task => "The task, from the user:".to_string(),
                MailKind::Direct => format!("Message from {} to you:", letter.sender),
                MailKind::Group => format!("Message from {} to the group:", letter.sender),
                MailKind::Answer => "The user's answer to your question:".to_string(),
                MailKind::Interjection => "Message from the user:".to_string(),
                MailKind::Notice => "Note from ah:".to_string(),
            };
            BlockRecord {
                details: Some(json!({
                    "org": { "from": letter.sender, "kind": letter.kind.as_str(), "mail": letter.id }
                })),
                ..BlockRecord::from(ah_llm::Block::Text {
                    text: format!("{label}{text}"),
                })
            }
        })
        .collect()
}

/// The system prompt's part for `me`: who it is, who its peers are, how
/// its final message travels, and its role.
pub fn system_section(me: &AgentSpec, roster: &[AgentSpec], models: &[String]) -> String {
    let peers: Vec<String> = roster
        .iter()
        .zip(models)
        .map(|(agent, model)| {
            let who = match agent.name == me.name {
                true => format!("{} (you)", agent.name),
                false => agent.name.clone(),
            };
            match &agent.description {
                Some(description) => format!("- {who}, model {model}: {description}"),
                None => format!("- {who}, model {model}"),
            }
        })
        .collect();
    let role = match me.role.trim() {
        "" => String::new(),
        role => format!("\n\n## Your role\n\n{role}"),
    };
    format!(
        "# Your team\n\n\
         You are the agent `{name}`, one of {count} agents working together on the user's task \
         in one shared sandbox: /work is the same folder for all of you, and every change any of \
         you makes ends up in one patch that the user reviews.\n\n\
         The agents:\n{peers}\n\n\
         ## How messages travel\n\n\
         You work in turns. Your turn opens with the messages sent to you, each labelled with \
         its sender. When you end your turn, your final message is delivered by the tags in it:\n\
         - `@@NAME` sends it to that agent (the first agent you name works next);\n\
         - `@@group` sends it to every other agent;\n\
         - `@@user` asks the user a question (only when you cannot go on without an answer).\n\
         A final message without a tag is a note for the record that nobody receives. Tags \
         inside code (backticks or fenced blocks) do not count. Address whoever must act next; \
         when your part is done and nobody needs to hear from you, end with an untagged note, \
         so the run can end.{role}",
        name = me.name,
        count = roster.len(),
        peers = peers.join("\n"),
    )
}
