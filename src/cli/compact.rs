//! `ah compact` at the terminal: the compaction's events as a run shows
//! them, then how much smaller the next request is. What is compacted, by
//! which model, is `ah_core::sessions::compact`'s to settle.

use std::path::Path;

use anyhow::Result;

use super::EXIT_OK;
use super::args::SessionArgs;
use super::display::{Display, kept};
use ah_core::agent::Event;
use ah_core::present::{count, terminal_safe};
use ah_core::run::resolve_project;
use ah_core::sessions;

/// Compacts the session the flags name, else the project's most recent
/// one, with `model` when given.
pub(super) async fn compact(
    project: Option<&Path>,
    which: &SessionArgs,
    model: Option<&str>,
    overrides: &[String],
) -> Result<i32> {
    let project = resolve_project(project)?;
    let mut display = Display::new(super::screen::Screen::new());
    let mut on_event = |event: &Event| display.show(event);
    let done =
        sessions::compact(&project, &which.choice(), model, overrides, &mut on_event).await?;
    // In an org, whose conversation it is.
    let whose = done.agent.map_or_else(String::new, |agent| {
        format!(" ({}'s conversation)", terminal_safe(&agent))
    });
    match done.compaction {
        None => println!(
            "nothing to compact: session {}{whose} holds only its most recent messages",
            done.session
        ),
        Some(compaction) => println!(
            "compacted session {}{whose}: the next request ~{} tokens before, ~{} after (estimated; a summary of {} and {})",
            done.session,
            compaction.tokens_before,
            compaction.tokens_after,
            count(compaction.summary_chars, "character", "characters"),
            kept(compaction.kept_messages)
        ),
    }
    Ok(EXIT_OK)
}
