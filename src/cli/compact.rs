//! `ah compact`: summarises a session's conversation on demand, as a run
//! does when it nears the context window, and says how much smaller the
//! next request is.

use std::path::Path;

use anyhow::Result;

use super::EXIT_OK;
use super::args::SessionArgs;
use super::display::Display;
use ah_core::agent::compact::{DEFAULT_RESERVE, compact_session};
use ah_core::agent::prompt::{self, Workspace};
use ah_core::agent::{AgentConfig, Event};
use ah_core::run::resolve::open_existing;
use ah_core::run::resolve_project;
use ah_core::run::retry_policy;
use ah_llm::Role;
use ah_session::Session;

/// Compacts the session the flags name, else the project's most recent
/// one. The summary is written by `model`, else the model (and provider) of
/// the session's last run, else the model of its latest answer.
pub async fn compact(
    project: Option<&Path>,
    which: &SessionArgs,
    model: Option<&str>,
    overrides: &[String],
) -> Result<i32> {
    let project = resolve_project(project)?;
    let files = ah_core::config::ProjectFiles::of_project(&project)?;
    let loaded = ah_core::config::load(&files, overrides)?;
    let ah_dir = project.join(".ah");
    let mut session = open_existing(&ah_dir, &which.choice())?;
    // Held until compaction ends; dropping it on any return releases it.
    let _lock = ah_core::run::queue::claim_exclusive(&session, false)?;
    let name = match model {
        Some(name) => name.to_string(),
        None => match session.context(ah_core::run::SESSION_MODEL)? {
            Some(name) => name,
            None => last_model(&session)?.unwrap_or_else(|| loaded.config.model.clone()),
        },
    };
    let selection = ah_core::run::select_model(&name, &loaded.config)?;
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
    let mut display = Display::new(super::screen::Screen::new());
    let mut on_event = |event: &Event| display.show(event);
    match compact_session(&config, provider.as_ref(), &mut session, &mut on_event).await? {
        None => println!(
            "nothing to compact: session {} holds only its most recent messages",
            session.id()
        ),
        Some(done) => println!(
            "compacted session {}: the next request ~{} tokens before, ~{} after (estimated; a summary of {} characters and the {} most recent messages)",
            session.id(),
            done.tokens_before,
            done.tokens_after,
            done.summary_chars,
            done.kept_messages
        ),
    }
    Ok(EXIT_OK)
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
