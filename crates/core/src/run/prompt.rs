//! What the model is told at the start of a run, settled before anything is
//! copied: the system prompt with the project's instruction files and its
//! skills, and the user's prompt with `/` commands and `--skill`s expanded.
//! Warnings (a skipped skill, cut instructions) go to stderr; an unknown
//! command or skill is a usage error.

use anyhow::{Context, Result};

use super::{Front, UsageError};
use crate::agent::instructions::{self, Skills, SlashError, load_project_docs};
use crate::agent::prompt::{self, Workspace};
use crate::config::ProjectFiles;
use ah_record::safe_text::terminal_safe;

/// The system prompt and the user message's text blocks.
#[derive(Clone)]
pub(crate) struct PromptSetup {
    pub system: String,
    pub blocks: Vec<String>,
}

/// Builds the run's prompts for `task` in the project of `files`.
pub(crate) fn prepare(
    files: &ProjectFiles,
    workspace: Workspace,
    task: &str,
    skill_names: &[String],
    front: &mut dyn Front,
) -> Result<PromptSetup> {
    let global = instructions::global_dir();
    let skills = Skills::discover(files, global.as_deref());
    let docs = load_project_docs(files);
    for warning in skills.warnings.iter().chain(&docs.warnings) {
        // They quote the project's files, which earlier runs may have written.
        front.notice(&format!("warning: {}", terminal_safe(warning)));
    }
    let mut blocks = Vec::new();
    for name in skill_names {
        blocks.push(skills.load(name).map_err(usage)?);
    }
    let expansion = instructions::expand(task, files, global.as_deref(), &skills).map_err(usage)?;
    if let Some(used) = &expansion.used {
        front.notice(&format!("prompt from {used}"));
    }
    blocks.extend(expansion.blocks);
    let mut system =
        prompt::system_prompt(files, workspace).context("cannot build the system prompt")?;
    if !docs.text.is_empty() {
        system.push_str(
            "\n\n# Project instructions\nThe project's own notes for agents (AGENTS.md or \
             CLAUDE.md files, outermost folder first). Follow them where they do not conflict \
             with the rules above.\n\n",
        );
        system.push_str(&docs.text);
    }
    if let Some(section) = skills.prompt_section() {
        system.push_str("\n\n");
        system.push_str(&section);
    }
    Ok(PromptSetup { system, blocks })
}

/// Unknown commands and skills are mistakes on the command line; a file
/// that cannot be read is not.
fn usage(err: SlashError) -> anyhow::Error {
    match err {
        SlashError::UnknownCommand { .. } | SlashError::UnknownSkill { .. } => {
            UsageError::Message(err.to_string()).into()
        }
        other => other.into(),
    }
}
