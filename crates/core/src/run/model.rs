//! `-m MODEL` to a model and a connected provider, through the registry of
//! `llm::providers` with the configuration's `[providers]` laid over it:
//! `opus`, `claude-…`, `PROVIDER:MODEL` or a `[models]` alias.

use anyhow::Result;

use super::UsageError;
use crate::config::{self, Config};
use ah_llm::models::ToolProtocol;
use ah_llm::providers::Selection;

/// The session `context` key holding the model of its last run, as `-m`
/// takes it (`claude-…`, `openai:gpt-4.1`); an org's, each agent's as
/// `--agents` takes them (`lead:claude-…,coder:openai:gpt-4.1`).
pub const SESSION_MODEL: &str = "model";

/// The model `name` stands for: an alias from the configuration's
/// `[models]` (a model of its `provider`, else an `id` read like `-m`; its
/// window, output limit, edit format, tool protocol and whether it takes
/// images, when set, replace the known ones), else a built-in alias, a Claude id or `PROVIDER:MODEL` of a
/// built-in or configured provider. A name that picks a provider but no
/// model is a usage error. `AH_TOOL_PROTOCOL` (`native` or `text`), when
/// set, decides how the model calls tools (`tool_protocol`).
pub fn select(name: &str, config: &Config) -> Result<Selection> {
    let usage = |why: String| anyhow::Error::from(UsageError::Message(why));
    let registry =
        config::registry(&config.providers).map_err(|(key, why)| usage(format!("{key}: {why}")))?;
    let alias = config.models.get(name.trim());
    let target = alias.and_then(|alias| alias.id.as_deref()).unwrap_or(name);
    let provider = alias.and_then(|alias| alias.provider.as_deref());
    let mut selection = match provider {
        Some(provider) => registry.select_of(provider, target),
        None => registry.select(target),
    }
    .map_err(|err| UsageError::Mistake(Box::new(err)))?;
    if let Some(alias) = alias {
        if let Some(window) = alias.context_window {
            selection.model.context_window = window;
        }
        if let Some(output) = alias.max_output_tokens {
            selection.model.max_output_tokens = output;
        }
        if let Some(format) = alias.edit_format {
            selection.model.edit_format = format;
        }
        if let Some(protocol) = alias.tool_protocol {
            selection.model.tool_protocol = protocol;
        }
        if let Some(images) = alias.images {
            selection.model.images = images;
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
            UsageError::Message(format!(
                "{TOOL_PROTOCOL_VAR}={value:?} is not a tool protocol: use native (the API's \
                 tool calls) or text (##file: and ##run blocks, for models without tool calling)"
            ))
            .into()
        }),
    }
}
