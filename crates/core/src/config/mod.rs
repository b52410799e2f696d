//! Configuration: TOML files, `AH_*` variables and `-c key=value`, merged
//! in that order of strength under the command-line flags:
//! flags > `-c` > environment > project `.ah/config.toml` > global
//! `$XDG_CONFIG_HOME/ah/config.toml` (else `~/.config/ah/config.toml`) >
//! defaults. Tables merge key by key; a value (arrays included) replaces
//! the weaker one. Every key remembers where its value came from, for
//! `ah config` and for error messages.

mod fill;
mod layers;
pub mod mcp;
pub mod own_files;
mod providers;
mod report;
pub(crate) mod settings;
pub mod tools;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

pub use fill::fill;
pub use own_files::ProjectFiles;
pub use providers::registry;
pub use report::{Offered, Report, Server, report};
pub use settings::{Config, RetrySettings};

use crate::agent::instructions::global_dir;

/// Where a value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Default,
    File(PathBuf),
    Env(String),
    Override(String),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Default => write!(f, "default"),
            Source::File(path) => write!(f, "{}", path.display()),
            Source::Env(name) => write!(f, "env {name}"),
            Source::Override(text) => write!(f, "-c {text}"),
        }
    }
}

impl Source {
    /// Where a value came from, as the model may be told: a file of the
    /// project (under `project`) by its path there, anything else by a
    /// neutral name (the user's file, a variable or `-c` could name a path
    /// of the host's).
    pub fn for_model(&self, project: &Path) -> String {
        match self {
            Source::File(path) => match path.strip_prefix(project) {
                Ok(rel) => rel.display().to_string(),
                Err(_) => "the user's configuration file".to_string(),
            },
            Source::Env(_) => "an environment variable of the user's".to_string(),
            Source::Override(_) => "a -c option of the user's".to_string(),
            Source::Default => "ah's defaults".to_string(),
        }
    }
}

/// The merged configuration and where each key's value came from (dotted
/// key paths such as `sandbox.memory`; keys left at their default are not
/// listed).
#[derive(Debug, Clone)]
pub struct Loaded {
    pub config: Config,
    pub sources: BTreeMap<String, Source>,
    /// The files that exist and were read, weakest first.
    pub files: Vec<PathBuf>,
    /// The configuration without the project's file: what the user's own
    /// layers make it, to tell what the project's file changes.
    pub user: Config,
    /// What the project's file sets and ah does not take, as `(dotted key,
    /// value, the file)`: its `[prices]`. A price decides what ah says a run
    /// cost; a cloned repository must not lower it.
    pub ignored: Vec<(String, String, Source)>,
}

impl Loaded {
    /// Where `key` got its value.
    pub fn source(&self, key: &str) -> Source {
        self.sources.get(key).cloned().unwrap_or(Source::Default)
    }
}

/// The global config file's path, if a config folder can be told.
pub fn global_file() -> Option<PathBuf> {
    global_dir().map(|dir| dir.join("config.toml"))
}

/// The project's configuration file, relative to the project.
pub const PROJECT_FILE: &str = ".ah/config.toml";

/// The table only the user's own layers may set.
const PRICES: &str = "prices";

/// Why the project's prices are not taken, and what to do instead.
pub const IGNORED_PRICES: &str = "ignored: prices come only from your own configuration \
     (the global config file, AH_* or -c), so a project cannot change what ah says a run costs";

/// Loads the configuration for the project (`project`, whose files are
/// read as [`own_files`] reads them) with the `-c` overrides given.
pub fn load(project: &ProjectFiles, overrides: &[String]) -> Result<Loaded> {
    let env: Vec<(String, String)> = std::env::vars().collect();
    load_from(global_file().as_deref(), project, &env, overrides)
}

/// [`load`] with the global file and the environment passed in.
fn load_from(
    global: Option<&Path>,
    project: &ProjectFiles,
    env: &[(String, String)],
    overrides: &[String],
) -> Result<Loaded> {
    let mut merged = layers::Merged::defaults()?;
    let mut user = layers::Merged::defaults()?;
    let mut files = Vec::new();
    let global_text = match global {
        Some(path) => own_files::read_user(path, own_files::CONFIG_CAP)
            .map_err(|why| anyhow::anyhow!("config file {why}"))?
            .map(|text| (path.to_path_buf(), text)),
        None => None,
    };
    let project_text = project
        .read(Path::new(PROJECT_FILE), own_files::CONFIG_CAP)
        .map_err(|why| anyhow::anyhow!("config file {why}"))?
        .map(|text| (project.project().join(PROJECT_FILE), text));
    if let Some((file, text)) = &global_text {
        let table = layers::parse_file(file, text)?;
        user.apply(table.clone(), &Source::File(file.clone()));
        merged.apply(table, &Source::File(file.clone()));
        files.push(file.clone());
    }
    let mut ignored = Vec::new();
    if let Some((file, text)) = &project_text {
        let mut table = layers::parse_file(file, text)?;
        if let Some(prices) = table.remove(PRICES) {
            layers::flatten(PRICES, &prices, &mut |key, value| {
                ignored.push((
                    key.to_string(),
                    value.to_string(),
                    Source::File(file.clone()),
                ));
            });
        }
        merged.apply(table, &Source::File(file.clone()));
        files.push(file.clone());
    }
    let mut stronger = Vec::new();
    for (name, key, value) in layers::env_values(env) {
        let table = layers::single(&key, &value, &format!("environment variable {name}"))?;
        stronger.push((table, Source::Env(name)));
    }
    for text in overrides {
        let Some((key, value)) = text.split_once('=') else {
            bail!("-c {text:?}: expected KEY=VALUE, e.g. -c sandbox.memory=8g");
        };
        let table = layers::single(key.trim(), value.trim(), &format!("-c {text}"))?;
        stronger.push((table, Source::Override(text.clone())));
    }
    for (table, source) in stronger {
        user.apply(table.clone(), &source);
        merged.apply(table, &source);
    }
    let (config, sources) = merged.finish()?;
    let (user, _) = user.finish()?;
    let problems = config.problems();
    if !problems.is_empty() {
        let lines: Vec<String> = problems
            .iter()
            .map(|(key, why)| {
                // A table's problem names the layer that set one of its keys.
                let from = sources
                    .get(key)
                    .or_else(|| {
                        let prefix = format!("{key}.");
                        sources
                            .iter()
                            .find(|(known, _)| known.starts_with(&prefix))
                            .map(|(_, source)| source)
                    })
                    .cloned()
                    .unwrap_or(Source::Default);
                format!("{key}: {why} (set by {from})")
            })
            .collect();
        bail!("bad configuration:\n  {}", lines.join("\n  "));
    }
    Ok(Loaded {
        config,
        sources,
        files,
        user,
        ignored,
    })
}

/// `ah config`: every key with its value and where it came from.
pub fn show(loaded: &Loaded) -> Result<String> {
    let table = toml::Table::try_from(&loaded.config)?;
    let mut lines = Vec::new();
    layers::flatten("", &toml::Value::Table(table), &mut |key, value| {
        lines.push((key.to_string(), value.to_string(), loaded.source(key), ""));
    });
    for unset in layers::UNSET_KEYS {
        if !lines.iter().any(|(key, ..)| key == unset) {
            lines.push((unset.to_string(), "(not set)".into(), Source::Default, ""));
        }
    }
    for (key, value, source) in &loaded.ignored {
        lines.push((key.clone(), value.clone(), source.clone(), IGNORED_PRICES));
    }
    lines.sort_by(|a, b| a.0.cmp(&b.0));
    let width = lines
        .iter()
        .map(|(key, value, ..)| key.len() + value.len() + 3)
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for (key, value, source, note) in lines {
        let setting = format!("{key} = {value}");
        let note = match note {
            "" => String::new(),
            note => format!(": {note}"),
        };
        out.push_str(&format!("{setting:<width$}  # {source}{note}\n"));
    }
    Ok(out)
}
