//! The provider registry: which model servers ah can talk to, as data.
//!
//! Each [`ProviderEntry`] says which API a server speaks, where it is, which
//! environment variable holds its key (none for local servers), and how its
//! models edit files. The built-in entries are `anthropic`, `openai`,
//! `ollama`, `lmstudio`, `vllm` and `openrouter`; a configuration file can
//! add or replace entries with [`Registry::insert`]. Any entry's base URL can
//! be moved with `AH_<NAME>_BASE_URL` (e.g. `AH_OLLAMA_BASE_URL`).
//!
//! `-m PROVIDER:MODEL` picks a model of a provider; the name is split at the
//! first colon only when what precedes it is a registered provider, so
//! `ollama:qwen2.5-coder:7b` is the model `qwen2.5-coder:7b` of `ollama`.
//! Any other name (`opus`, `claude-sonnet-4-5-20250929`) is an Anthropic model.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::anthropic::{self, AnthropicClient};
use super::auth::Credentials;
use super::models::{self, EditFormat, ModelInfo, ToolProtocol};
use super::openai::OpenAiClient;
use super::retry::RetryPolicy;
use super::{LlmError, Provider};

/// The wire protocol a provider speaks; configuration names it
/// `anthropic` or `openai-chat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ApiKind {
    /// Anthropic Messages (`POST {base}/v1/messages`).
    #[serde(rename = "anthropic")]
    Anthropic,
    /// OpenAI Chat Completions (`POST {base}/chat/completions`).
    #[serde(rename = "openai-chat")]
    OpenAi,
}

impl ApiKind {
    /// The edit format models of this API are trained on.
    pub fn edit_format(self) -> EditFormat {
        match self {
            ApiKind::Anthropic => EditFormat::Edit,
            ApiKind::OpenAi => EditFormat::ApplyPatch,
        }
    }
}

/// How an OpenAI-compatible server wants the output limit named: OpenAI's
/// own API refuses `max_tokens` for its reasoning models, while some local
/// servers know only `max_tokens`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputLimitField {
    MaxTokens,
    MaxCompletionTokens,
}

impl OutputLimitField {
    pub fn as_str(self) -> &'static str {
        match self {
            OutputLimitField::MaxTokens => "max_tokens",
            OutputLimitField::MaxCompletionTokens => "max_completion_tokens",
        }
    }
}

/// One model server ah can talk to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderEntry {
    /// What `-m NAME:MODEL` calls it; lowercase.
    pub name: String,
    pub api: ApiKind,
    /// Default endpoint: the origin for Anthropic (`https://api.anthropic.com`),
    /// the URL up to `/chat/completions` for OpenAI-compatible servers.
    pub base_url: String,
    /// The variable holding the API key; `None` sends no key (local servers).
    pub key_env: Option<String>,
    /// A variable that moves the base URL besides `AH_<NAME>_BASE_URL`
    /// (`ANTHROPIC_BASE_URL`, `OPENAI_BASE_URL`, as their own tools use).
    pub base_url_env: Option<String>,
    /// The file-editing tool its models get.
    pub edit_format: EditFormat,
    /// How the output limit is named in the request (OpenAI-compatible only).
    pub output_limit_field: OutputLimitField,
    /// Whether replies go through the stream sanitizer (OpenAI-compatible
    /// only): local servers' models leak chat-template tokens into the text.
    pub sanitize: bool,
    /// How its models call tools.
    pub tool_protocol: ToolProtocol,
}

impl ProviderEntry {
    fn builtin(
        name: &str,
        api: ApiKind,
        base_url: &str,
        key_env: Option<&str>,
        base_url_env: Option<&str>,
    ) -> ProviderEntry {
        ProviderEntry {
            name: name.to_string(),
            api,
            base_url: base_url.to_string(),
            key_env: key_env.map(str::to_string),
            base_url_env: base_url_env.map(str::to_string),
            edit_format: api.edit_format(),
            output_limit_field: OutputLimitField::MaxTokens,
            // OpenAI's own API never leaks template tokens; the servers
            // that run open models do.
            sanitize: api == ApiKind::OpenAi,
            tool_protocol: ToolProtocol::Native,
        }
    }

    /// `AH_<NAME>_BASE_URL`: the name upper-cased, anything but letters and
    /// digits as `_`.
    pub fn base_url_variable(&self) -> String {
        let name: String = self
            .name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_uppercase()
                } else {
                    '_'
                }
            })
            .collect();
        format!("AH_{name}_BASE_URL")
    }

    /// The base URL after the environment's overrides: `AH_<NAME>_BASE_URL`,
    /// then [`ProviderEntry::base_url_env`], then the default.
    pub fn effective_base_url(&self, env: &dyn Fn(&str) -> Option<String>) -> String {
        let set = |name: &str| {
            env(name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        set(&self.base_url_variable())
            .or_else(|| self.base_url_env.as_deref().and_then(set))
            .unwrap_or_else(|| self.base_url.clone())
    }
}

/// A model picked from the registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    pub provider: ProviderEntry,
    pub model: ModelInfo,
}

impl Selection {
    /// How the model is named to people: the id alone for Anthropic (as
    /// before there were providers), else `provider:id`.
    pub fn display_name(&self) -> String {
        match self.provider.api {
            ApiKind::Anthropic if self.provider.name == "anthropic" => self.model.id.clone(),
            _ => format!("{}:{}", self.provider.name, self.model.id),
        }
    }

    /// A client for the provider, configured from the process environment.
    pub fn connect(&self, retry: RetryPolicy) -> Result<Box<dyn Provider>, LlmError> {
        self.connect_with(
            retry,
            &|name| std::env::var(name).ok(),
            std::env::var_os("HOME").map(PathBuf::from),
        )
    }

    /// [`Selection::connect`] with the environment passed in.
    pub fn connect_with(
        &self,
        retry: RetryPolicy,
        env: &dyn Fn(&str) -> Option<String>,
        home: Option<PathBuf>,
    ) -> Result<Box<dyn Provider>, LlmError> {
        let entry = &self.provider;
        let base_url = entry.effective_base_url(env);
        let key = entry.key_env.as_deref().map(|name| (name, env(name)));
        match entry.api {
            ApiKind::Anthropic => {
                let credentials = Credentials::load(key.and_then(|(_, value)| value), home)?;
                credentials.register_secret();
                Ok(Box::new(AnthropicClient::new(
                    &base_url,
                    &credentials,
                    retry,
                )?))
            }
            ApiKind::OpenAi => {
                let key = match key {
                    None => None,
                    Some((name, value)) => Some(
                        value
                            .map(|v| v.trim().to_string())
                            .filter(|v| !v.is_empty())
                            .ok_or_else(|| LlmError::MissingKey {
                                provider: entry.name.clone(),
                                variable: name.to_string(),
                            })?,
                    ),
                };
                if let Some(key) = &key {
                    ah_base::redact::register(key);
                }
                Ok(Box::new(
                    OpenAiClient::new(&base_url, key.as_deref(), entry.output_limit_field, retry)?
                        .sanitized(entry.sanitize),
                ))
            }
        }
    }
}

/// Why a model name cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectError {
    #[error("model {0:?} names the provider but no model: write PROVIDER:MODEL, e.g. {1}:MODEL-ID")]
    NoModel(String, String),
    #[error("no provider {0:?} is registered, so model {1:?} cannot be used")]
    UnknownProvider(String, String),
}

/// The providers ah knows, by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registry {
    entries: Vec<ProviderEntry>,
}

impl Registry {
    /// The built-in providers.
    pub fn builtin() -> Registry {
        use ApiKind::{Anthropic, OpenAi};
        let mut openai = ProviderEntry::builtin(
            "openai",
            OpenAi,
            "https://api.openai.com/v1",
            Some("OPENAI_API_KEY"),
            Some("OPENAI_BASE_URL"),
        );
        openai.output_limit_field = OutputLimitField::MaxCompletionTokens;
        openai.sanitize = false;
        Registry {
            entries: vec![
                ProviderEntry::builtin(
                    "anthropic",
                    Anthropic,
                    anthropic::DEFAULT_BASE_URL,
                    Some("ANTHROPIC_API_KEY"),
                    Some("ANTHROPIC_BASE_URL"),
                ),
                openai,
                ProviderEntry::builtin("ollama", OpenAi, "http://localhost:11434/v1", None, None),
                ProviderEntry::builtin("lmstudio", OpenAi, "http://localhost:1234/v1", None, None),
                ProviderEntry::builtin("vllm", OpenAi, "http://localhost:8000/v1", None, None),
                ProviderEntry::builtin(
                    "openrouter",
                    OpenAi,
                    "https://openrouter.ai/api/v1",
                    Some("OPENROUTER_API_KEY"),
                    None,
                ),
            ],
        }
    }

    /// Adds `entry`, replacing any entry of the same name.
    pub fn insert(&mut self, entry: ProviderEntry) {
        match self.entries.iter_mut().find(|e| e.name == entry.name) {
            Some(existing) => *existing = entry,
            None => self.entries.push(entry),
        }
    }

    pub fn get(&self, name: &str) -> Option<&ProviderEntry> {
        self.entries.iter().find(|e| e.name == name)
    }

    /// Picks the model `name`: `PROVIDER:MODEL` when the part before the
    /// first colon is a registered provider, else an Anthropic model (alias
    /// or id).
    pub fn select(&self, name: &str) -> Result<Selection, SelectError> {
        let name = name.trim();
        match name.split_once(':') {
            Some((prefix, model)) if self.get(prefix).is_some() => self.select_of(prefix, model),
            _ => self.select_of("anthropic", name),
        }
    }

    /// Picks the model `model` (alias or id) of the provider named
    /// `provider`.
    pub fn select_of(&self, provider: &str, model: &str) -> Result<Selection, SelectError> {
        let model = model.trim();
        let Some(entry) = self.get(provider) else {
            return Err(SelectError::UnknownProvider(
                provider.to_string(),
                model.to_string(),
            ));
        };
        if model.is_empty() {
            return Err(SelectError::NoModel(
                format!("{provider}:"),
                provider.to_string(),
            ));
        }
        let mut info = models::resolve(entry.api, model);
        info.edit_format = entry.edit_format;
        info.tool_protocol = entry.tool_protocol;
        Ok(Selection {
            provider: entry.clone(),
            model: info,
        })
    }
}

#[cfg(test)]
mod tests;
