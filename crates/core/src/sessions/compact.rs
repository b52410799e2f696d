//! `ah compact`: a session's conversation summarised on demand, as a run
//! does when it nears the context window, with the model and provider the
//! session used (in an org, those of the agent whose conversation it is)
//! and its lock held meanwhile.

use std::path::Path;

use anyhow::{Result, anyhow};

use crate::agent::compact::{Compaction, DEFAULT_RESERVE, compact_session};
use crate::agent::prompt::{self, Workspace};
use crate::agent::{AgentConfig, Event};
use crate::config::{self, ProjectFiles};
use crate::org::roster::listed;
use crate::org::schedule::ROSTER_KEY;
use crate::run::resolve::open_existing;
use crate::run::{SESSION_MODEL, SessionChoice, queue, retry_policy, select_model};
use ah_llm::Role;
use ah_session::Session;

/// What `ah compact` did to which session.
pub struct Compacted {
    /// The session's id.
    pub session: String,
    /// In an org, the agent whose conversation was compacted.
    pub agent: Option<String>,
    /// The compaction, or `None` when the session holds only its most
    /// recent messages.
    pub compaction: Option<Compaction>,
}

/// Compacts the session `which` names in `project`, else the project's
/// most recent one: the conversation up to its head (in an org, the head's
/// agent's conversation, and the summary is that agent's message). The
/// summary is written by `model`, else (see `writer`) the model and
/// provider the conversation used. `on_event` sees the compaction's events
/// as a run's would.
pub async fn compact(
    project: &Path,
    which: &SessionChoice,
    model: Option<&str>,
    overrides: &[String],
    on_event: &mut (dyn FnMut(&Event) + Send),
) -> Result<Compacted> {
    let files = ProjectFiles::of_project(project)?;
    let loaded = config::load(&files, overrides)?;
    let mut session = open_existing(&project.join(".ah"), which)?;
    // Held until compaction ends; dropping it on any return releases it.
    let _lock = queue::claim_exclusive(&session, false)?;
    let (name, agent) = writer(&session, model, &loaded.config.model)?;
    let selection = select_model(&name, &loaded.config)?;
    let config = AgentConfig {
        model: selection.model.clone(),
        system: prompt::system_prompt(&files, Workspace::Container)?,
        tools: ah_tools::specs(selection.model.edit_format),
        max_tools: None,
        thinking_budget: None,
        compact_reserve: DEFAULT_RESERVE,
        loop_window: 0,
        compact_prompt: prompt::compact_prompt(&files)?,
    };
    let provider = selection.connect(retry_policy(&loaded.config.retry))?;
    session.set_author(agent.as_deref());
    let compaction = compact_session(&config, provider.as_ref(), &mut session, on_event).await?;
    Ok(Compacted {
        session: session.id(),
        agent,
        compaction,
    })
}

/// The model that writes the summary, and the org agent whose conversation
/// it goes on: `model` when given; in an org, the model of the agent whose
/// conversation holds the head, as its roster gives it; else the model of
/// the session's last run, else that of its latest answer, else
/// `configured`. An org whose head's agent cannot be told is an error that
/// says to name the model.
fn writer(
    session: &Session,
    model: Option<&str>,
    configured: &str,
) -> Result<(String, Option<String>)> {
    let Some(roster) = session.context(ROSTER_KEY)? else {
        let name = match model {
            Some(name) => name.to_string(),
            None => match session.context(SESSION_MODEL)? {
                Some(name) => name,
                None => last_model(session)?.unwrap_or_else(|| configured.to_string()),
            },
        };
        return Ok((name, None));
    };
    let head = match session.head()? {
        Some(head) => session.path_to(&head)?.pop(),
        None => None,
    };
    let agent = head.as_ref().and_then(|head| head.agent.clone());
    if let Some(name) = model {
        return Ok((name.to_string(), agent));
    }
    let id = session.id();
    let Some(agent) = agent else {
        let at = head.map_or_else(|| "nothing".to_string(), |head| format!("@{}", head.seq));
        return Err(anyhow!(
            "session {id} is an org session, but its head ({at}) is in no agent's \
             conversation, so which agent's model should summarise it cannot be told: name one \
             with `ah compact -S {id} -m MODEL`"
        ));
    };
    let agents = listed(&roster);
    match agents.iter().find(|(name, _)| *name == agent) {
        Some((_, Some(model))) => Ok((model.to_string(), Some(agent))),
        _ => Err(anyhow!(
            "session {id} is an org session whose head is {agent}'s, but its agents ({}) give \
             {agent} no model: name one with `ah compact -S {id} -m MODEL`",
            agents
                .iter()
                .map(|(name, _)| *name)
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// The model of the session's latest answer on the path to its head.
fn last_model(session: &Session) -> Result<Option<String>> {
    let Some(head) = session.head()? else {
        return Ok(None);
    };
    Ok(session
        .path_to(&head)?
        .into_iter()
        .rev()
        .filter(|message| message.role == Role::Assistant)
        .find_map(|message| message.meta.model))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ah_llm::Block;
    use ah_session::{BlockRecord, MessageMeta};

    fn say(session: &mut Session, parent: Option<&str>, role: Role) -> String {
        let text = BlockRecord::from(Block::Text { text: "x".into() });
        session
            .append(parent, role, &[text], &MessageMeta::default())
            .unwrap()
            .id
    }

    #[test]
    fn an_org_is_summarised_by_the_model_of_the_heads_agent() {
        let dir = tempfile::tempdir().unwrap();
        let mut session = Session::create(dir.path()).unwrap();
        session
            .set_context(ROSTER_KEY, "lead:opus,coder:openai:gpt-4o")
            .unwrap();
        session
            .set_context(SESSION_MODEL, "lead:claude-x,coder:openai:gpt-4o")
            .unwrap();
        let root = say(&mut session, None, Role::User);
        // The task alone: no agent's conversation to tell.
        let err = writer(&session, None, "opus").unwrap_err().to_string();
        assert!(err.contains("in no agent's conversation"), "{err}");
        assert!(err.contains("-m MODEL"), "{err}");
        // `-m` decides without an agent.
        let named = writer(&session, Some("haiku"), "opus").unwrap();
        assert_eq!(named, ("haiku".to_string(), None));

        session.set_author(Some("coder"));
        say(&mut session, Some(&root), Role::Assistant);
        let coder = writer(&session, None, "opus").unwrap();
        assert_eq!(coder, ("openai:gpt-4o".to_string(), Some("coder".into())));

        session.set_author(Some("ghost"));
        say(&mut session, Some(&root), Role::Assistant);
        let err = writer(&session, None, "opus").unwrap_err().to_string();
        assert!(err.contains("give ghost no model"), "{err}");
    }

    #[test]
    fn a_single_agent_session_keeps_its_last_runs_model() {
        let dir = tempfile::tempdir().unwrap();
        let mut session = Session::create(dir.path()).unwrap();
        assert_eq!(
            writer(&session, None, "opus").unwrap(),
            ("opus".to_string(), None)
        );
        say(&mut session, None, Role::User);
        session
            .set_context(SESSION_MODEL, "openai:gpt-4.1")
            .unwrap();
        assert_eq!(
            writer(&session, None, "opus").unwrap(),
            ("openai:gpt-4.1".to_string(), None)
        );
    }
}
