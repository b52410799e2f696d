//! The mechanics of layering: reading and checking one file, turning an
//! environment variable or a `-c` pair into a one-key table, merging tables
//! key by key while remembering which layer set each key.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result, anyhow};
use serde::Deserialize;
use toml::{Table, Value};

use super::{Config, Source};

/// Environment variables and the keys they set.
const ENV_KEYS: &[(&str, &str)] = &[
    ("AH_MODEL", "model"),
    ("AH_BACKEND", "backend"),
    ("AH_IMAGE", "sandbox.image"),
    ("AH_RUNTIME", "sandbox.runtime"),
    ("AH_MEMORY", "sandbox.memory"),
    ("AH_REVIEW", "review.mode"),
    ("AH_BASH_TIMEOUT", "tools.bash_timeout"),
    ("AH_COMPACT_RESERVE", "agent.compact_reserve"),
    ("AH_LOOP_WINDOW", "agent.loop_window"),
    ("AH_MAX_TOOLS", "agent.max_tools"),
    ("AH_RETRY_ATTEMPTS", "retry.attempts"),
    ("AH_RETRY_BASE_MS", "retry.base_ms"),
    ("AH_STREAM_IDLE_SECS", "retry.idle_secs"),
];

/// Keys that have no value unless set (shown as "(not set)").
pub(super) const UNSET_KEYS: &[&str] = &[
    "agent.max_tools",
    "network.mode",
    "review.max_bytes",
    "review.max_files",
    "review.max_lines",
    "review.mode",
    "review.pager",
    "sandbox.nofile",
    "sandbox.nproc",
    "sandbox.runtime",
];

/// The tables merged so far and who set each key.
pub(super) struct Merged {
    table: Table,
    sources: BTreeMap<String, Source>,
}

impl Merged {
    pub(super) fn defaults() -> Result<Merged> {
        Ok(Merged {
            table: Table::try_from(Config::default()).context("the default configuration")?,
            sources: BTreeMap::new(),
        })
    }

    /// Lays `layer` over what is merged: tables merge key by key, any other
    /// value replaces the weaker one.
    pub(super) fn apply(&mut self, layer: Table, source: &Source) {
        merge(&mut self.table, layer, "", source, &mut self.sources);
    }

    pub(super) fn finish(self) -> Result<(Config, BTreeMap<String, Source>)> {
        let config = Config::deserialize(Value::Table(self.table))
            .map_err(|err| anyhow!("the merged configuration is invalid: {}", err.message()))?;
        Ok((config, self.sources))
    }
}

fn merge(
    into: &mut Table,
    layer: Table,
    prefix: &str,
    source: &Source,
    sources: &mut BTreeMap<String, Source>,
) {
    for (key, value) in layer {
        let path = join(prefix, &key);
        match (into.get_mut(&key), value) {
            (Some(Value::Table(existing)), Value::Table(table)) => {
                merge(existing, table, &path, source, sources);
            }
            (_, value) => {
                sources
                    .retain(|known, _| !(known == &path || known.starts_with(&format!("{path}."))));
                flatten(&path, &value, &mut |leaf, _| {
                    sources.insert(leaf.to_string(), source.clone());
                });
                into.insert(key, value);
            }
        }
    }
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

/// Calls `leaf` for every non-table value under `value`, with its dotted key.
pub(super) fn flatten(prefix: &str, value: &Value, leaf: &mut dyn FnMut(&str, &Value)) {
    match value {
        Value::Table(table) => {
            for (key, value) in table {
                flatten(&join(prefix, key), value, leaf);
            }
        }
        value => leaf(prefix, value),
    }
}

/// Checks one config file, `path` as read (`text`). Errors name the file
/// and the line.
pub(super) fn parse_file(path: &Path, text: &str) -> Result<Table> {
    let at = |err: toml::de::Error| {
        let line = err
            .span()
            .map(|span| text[..span.start.min(text.len())].matches('\n').count() + 1);
        let place = match line {
            Some(line) => format!("{}:{line}", path.display()),
            None => path.display().to_string(),
        };
        anyhow!("{place}: {}", err.message().trim())
    };
    toml::from_str::<Config>(text).map_err(at)?;
    text.parse::<Table>().map_err(at)
}

/// The configured environment variables that are set: (name, key, value).
pub(super) fn env_values(env: &[(String, String)]) -> Vec<(String, String, String)> {
    ENV_KEYS
        .iter()
        .filter_map(|(name, key)| {
            let value = env.iter().find(|(n, _)| n == name)?.1.trim().to_string();
            (!value.is_empty()).then(|| (name.to_string(), key.to_string(), value))
        })
        .collect()
}

/// A table setting the dotted `key` to `text`, read as a TOML value (so
/// numbers, booleans and arrays work) or else as a plain string. `what`
/// names the setting's origin in errors.
pub(super) fn single(key: &str, text: &str, what: &str) -> Result<Table> {
    let parts: Vec<&str> = key.split('.').map(str::trim).collect();
    if parts.iter().any(|part| part.is_empty()) {
        return Err(anyhow!(
            "{what}: {key:?} is not a key (use dotted names like sandbox.memory)"
        ));
    }
    let as_string = Value::String(text.to_string());
    let parsed = format!("v = {text}")
        .parse::<Table>()
        .ok()
        .and_then(|mut table| table.remove("v"));
    let mut last_error = None;
    for value in parsed.into_iter().chain([as_string]) {
        let table = nest(&parts, value);
        match Config::deserialize(Value::Table(table.clone())) {
            Ok(_) => return Ok(table),
            Err(err) => {
                last_error.get_or_insert(err);
            }
        }
    }
    let message = last_error.map_or_else(String::new, |err| err.message().trim().to_string());
    Err(anyhow!("{what}: {message}"))
}

fn nest(parts: &[&str], value: Value) -> Table {
    let mut value = value;
    for part in parts.iter().skip(1).rev() {
        let mut table = Table::new();
        table.insert((*part).to_string(), value);
        value = Value::Table(table);
    }
    let mut root = Table::new();
    root.insert(parts[0].to_string(), value);
    root
}
