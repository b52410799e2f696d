//! `-m MODEL` to a model and a connected provider, through the registry of
//! `llm::providers`: `opus`, `claude-…` or `PROVIDER:MODEL`.

use anyhow::Result;

use super::task::UsageError;
use crate::llm::models;
use crate::llm::providers::{Registry, Selection};

/// The session `context` key holding the model of its last run, as `-m`
/// takes it (`claude-…`, `openai:gpt-4.1`).
pub(super) const SESSION_MODEL: &str = "model";

/// The model named by `name`, else by `AH_MODEL`, else the default. A name
/// that picks a provider but no model is a usage error.
pub(super) fn select(name: Option<&str>) -> Result<Selection> {
    let name = name.map_or_else(models::default_model_name, str::to_string);
    Registry::builtin()
        .select(&name)
        .map_err(|e| UsageError(e.to_string()).into())
}
