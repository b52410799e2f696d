//! `ah compact`: a session's conversation summarised on demand, as a run
//! does when it nears the context window, with the model and provider the
//! session used and its lock held meanwhile.

use std::path::Path;

use anyhow::Result;

use crate::agent::compact::{Compaction, DEFAULT_RESERVE, compact_session};
use crate::agent::prompt::{self, Workspace};
use crate::agent::{AgentConfig, Event};
use crate::config::{self, ProjectFiles};
use crate::run::resolve::open_existing;
use crate::run::{SESSION_MODEL, SessionChoice, queue, retry_policy, select_model};
use ah_llm::Role;
use ah_session::Session;

/// What `ah compact` did to which session.
pub struct Compacted {
    /// The session's id.
    pub session: String,
    /// The compaction, or `None` when the session holds only its most
    /// recent messages.
    pub compaction: Option<Compaction>,
}

/// Compacts the session `which` names in `project`, else the project's
/// most recent one. The summary is written by `model`, else the model (and
/// provider) of the session's last run, else the model of its latest
/// answer, else the configured model. `on_event` sees the compaction's
/// events as a run's would.
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
    let name = match model {
        Some(name) => name.to_string(),
        None => match session.context(SESSION_MODEL)? {
            Some(name) => name,
            None => last_model(&session)?.unwrap_or_else(|| loaded.config.model.clone()),
        },
    };
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
    let compaction = compact_session(&config, provider.as_ref(), &mut session, on_event).await?;
    Ok(Compacted {
        session: session.id(),
        compaction,
    })
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
