//! `-m MODEL` to a model and a connected provider, through the registry of
//! `llm::providers`: `opus`, `claude-…` or `PROVIDER:MODEL`.

use anyhow::Result;

use super::config::Config;
use super::task::UsageError;
use crate::llm::models::ToolProtocol;
use crate::llm::providers::{Registry, Selection};

/// The session `context` key holding the model of its last run, as `-m`
/// takes it (`claude-…`, `openai:gpt-4.1`).
pub(super) const SESSION_MODEL: &str = "model";

/// The model `name` stands for: an alias from the configuration's
/// `[models]` (whose `id` may be `PROVIDER:MODEL`, and whose window and
/// output limit, when set, replace the known ones), else a built-in alias, a
/// Claude id or `PROVIDER:MODEL`. A name that picks a provider but no model
/// is a usage error. `AH_TOOL_PROTOCOL` (`native` or `text`), when set,
/// decides how the model calls tools ([`tool_protocol`]).
pub(super) fn select(name: &str, config: &Config) -> Result<Selection> {
    let alias = config.models.get(name.trim());
    let target = alias.and_then(|alias| alias.id.as_deref()).unwrap_or(name);
    let mut selection = Registry::builtin()
        .select(target)
        .map_err(|e| anyhow::Error::from(UsageError(e.to_string())))?;
    if let Some(alias) = alias {
        if let Some(window) = alias.context_window {
            selection.model.context_window = window;
        }
        if let Some(output) = alias.max_output_tokens {
            selection.model.max_output_tokens = output;
        }
    }
    if let Some(protocol) = tool_protocol(std::env::var(TOOL_PROTOCOL_VAR).ok().as_deref())? {
        selection.model.tool_protocol = protocol;
    }
    Ok(selection)
}

/// The variable that picks the tool protocol of the run's model.
const TOOL_PROTOCOL_VAR: &str = "AH_TOOL_PROTOCOL";

/// The protocol `value` of [`TOOL_PROTOCOL_VAR`] names; unset or empty
/// leaves the provider entry's; anything else is a usage error.
fn tool_protocol(value: Option<&str>) -> Result<Option<ToolProtocol>> {
    match value.map(str::trim).filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(value) => ToolProtocol::parse(value).map(Some).ok_or_else(|| {
            UsageError(format!(
                "{TOOL_PROTOCOL_VAR}={value:?} is not a tool protocol: use native (the API's \
                 tool calls) or text (##file: and ##run blocks, for models without tool calling)"
            ))
            .into()
        }),
    }
}
