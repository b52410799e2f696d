//! What `ah config` shows: the merged configuration with where each value
//! came from, the tools the model is offered and where each comes from,
//! and the MCP servers a run would start.

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::{PROJECT_FILE, ProjectFiles, global_file, load, show};
use crate::agent::instructions::global_dir;

/// A project's configuration, as `ah config` shows it.
pub struct Report {
    /// The config files read, weakest first.
    pub files: Vec<PathBuf>,
    /// Where the files would be: the user's (when a config folder can be
    /// told) and the project's.
    pub looked_for: (Option<PathBuf>, PathBuf),
    /// Every setting, `key = value  # source`, one a line.
    pub settings: String,
    /// The tools the model is offered: ah's own first, then those of tool
    /// files (which hide ah's of the same name).
    pub tools: Vec<Offered>,
    /// The configured MCP servers, by name.
    pub servers: Vec<Server>,
}

/// A tool the model is offered.
pub struct Offered {
    pub name: String,
    /// The tool file that declares it and its description's first line;
    /// `None` for ah's own.
    pub file: Option<(PathBuf, String)>,
}

/// A configured MCP server.
pub struct Server {
    pub name: String,
    /// Where its `command` was set.
    pub source: String,
    /// Whether a run starts it (`enabled = false` keeps it out).
    pub started: bool,
}

/// The configuration of `project` with the `-c` `overrides`.
pub fn report(project: &Path, overrides: &[String]) -> Result<Report> {
    let files = ProjectFiles::of_project(project)?;
    let loaded = load(&files, overrides)?;
    let declared =
        super::tools::load(&files, global_dir().as_deref()).map_err(|why| anyhow::anyhow!(why))?;
    let own = ah_tools::names()
        .into_iter()
        .filter(|name| !declared.iter().any(|tool| &tool.name == name))
        .map(|name| Offered { name, file: None });
    let from_files = declared.iter().map(|tool| Offered {
        name: tool.name.clone(),
        file: Some((
            tool.source.clone(),
            tool.description
                .lines()
                .next()
                .unwrap_or_default()
                .to_string(),
        )),
    });
    let servers = loaded
        .config
        .mcp
        .iter()
        .map(|(name, server)| Server {
            name: name.clone(),
            source: loaded.source(&format!("mcp.{name}.command")).to_string(),
            started: server.enabled != Some(false),
        })
        .collect();
    Ok(Report {
        files: loaded.files.clone(),
        looked_for: (global_file(), project.join(PROJECT_FILE)),
        settings: show(&loaded)?,
        tools: own.chain(from_files).collect(),
        servers,
    })
}
