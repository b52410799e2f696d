//! What the user tells the agent besides the task: project instruction files
//! (`AGENTS.md` / `CLAUDE.md`), skills (`SKILL.md` files the user can load
//! into the conversation), and `/` commands (prompt templates). All of them
//! are files on the host, read when a run starts; none is visible inside the
//! sandbox.

mod docs;
pub(crate) mod frontmatter;
mod skills;
mod slash;

use std::path::PathBuf;

pub use docs::{DOCS_CAP, ProjectDocs, load_project_docs};
pub use skills::{Skill, Skills};
pub use slash::{Expansion, SlashError, expand};

/// Where the user's own commands and skills live for every project:
/// `$XDG_CONFIG_HOME/ah`, else `~/.config/ah`. `None` when neither can be
/// told (no `HOME`).
pub fn global_dir() -> Option<PathBuf> {
    let from_env = |name| {
        std::env::var_os(name)
            .filter(|value| !value.is_empty())
            .map(PathBuf::from)
            .filter(|path| path.is_absolute())
    };
    from_env("XDG_CONFIG_HOME")
        .map(|config| config.join("ah"))
        .or_else(|| from_env("HOME").map(|home| home.join(".config").join("ah")))
}
