//! `[providers.NAME]`: model servers named in configuration, laid over the
//! built-in registry key by key. A built-in name (`ollama`, `openai`, …)
//! keeps every key the table does not give; a new name needs `api` and
//! `base_url`, and sends no key unless `api_key_env` names its variable.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use ah_llm::models::{EditFormat, ToolProtocol};
use ah_llm::providers::{ApiKind, OutputLimitField, ProviderEntry, Registry};

/// One `[providers.NAME]` table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderSettings {
    /// `anthropic` or `openai-chat`.
    pub api: Option<ApiKind>,
    /// The origin for `anthropic`, the URL up to `/chat/completions` for
    /// `openai-chat`.
    pub base_url: Option<String>,
    /// The environment variable holding the API key; `""` sends none.
    pub api_key_env: Option<String>,
    /// The file-editing tool its models get; unset: the API's usual one.
    pub edit_format: Option<EditFormat>,
    /// `native` (the API's tool calls) or `text` (`##file:`/`##run` blocks,
    /// for models without tool calling); unset: native.
    pub tool_protocol: Option<ToolProtocol>,
    /// Remove leaked chat-template tokens (`<|channel|>`, …) from the
    /// streamed text; unset: on for OpenAI-compatible servers other than
    /// OpenAI's own.
    pub sanitize: Option<bool>,
}

impl ProviderSettings {
    /// The entry `name` stands for: `builtin` (the built-in entry of that
    /// name, if any) with each key given replaced, else a new entry. The
    /// error says what is missing or wrong.
    pub fn entry(
        &self,
        name: &str,
        builtin: Option<&ProviderEntry>,
    ) -> Result<ProviderEntry, String> {
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
        {
            return Err(format!(
                "{name:?} cannot name a provider: use lowercase letters, digits, `-` and `_` \
                 (it is written before the colon of -m NAME:MODEL)"
            ));
        }
        let mut entry = match (builtin, self.api, &self.base_url) {
            (Some(builtin), _, _) => builtin.clone(),
            (None, Some(api), Some(base_url)) => ProviderEntry {
                name: name.to_string(),
                api,
                base_url: base_url.clone(),
                key_env: None,
                base_url_env: None,
                edit_format: api.edit_format(),
                output_limit_field: OutputLimitField::MaxTokens,
                // A server named in configuration is usually a local one.
                sanitize: api == ApiKind::OpenAi,
                tool_protocol: ToolProtocol::Native,
            },
            (None, _, _) => {
                return Err(format!(
                    "{name} is not a built-in provider, so it needs `api = \"anthropic\"` or \
                     `api = \"openai-chat\"` and `base_url = \"…\"`"
                ));
            }
        };
        if let Some(api) = self.api {
            entry.api = api;
            entry.edit_format = api.edit_format();
        }
        if let Some(base_url) = &self.base_url {
            let base_url = base_url.trim();
            if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
                return Err(format!(
                    "base_url {base_url:?} is not an http:// or https:// URL"
                ));
            }
            entry.base_url = base_url.to_string();
        }
        if let Some(variable) = &self.api_key_env {
            let variable = variable.trim();
            entry.key_env = (!variable.is_empty()).then(|| variable.to_string());
        }
        if let Some(format) = self.edit_format {
            entry.edit_format = format;
        }
        if let Some(protocol) = self.tool_protocol {
            entry.tool_protocol = protocol;
        }
        if let Some(sanitize) = self.sanitize {
            entry.sanitize = sanitize;
        }
        Ok(entry)
    }
}

/// The built-in providers with the configured ones laid over them; an
/// error is `(key, why)` for the first table that cannot be used.
pub fn registry(
    providers: &BTreeMap<String, ProviderSettings>,
) -> Result<Registry, (String, String)> {
    let mut registry = Registry::builtin();
    for (name, settings) in providers {
        let entry = settings
            .entry(name, registry.get(name))
            .map_err(|why| (format!("providers.{name}"), why))?;
        registry.insert(entry);
    }
    Ok(registry)
}
