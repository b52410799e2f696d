//! The model tables: short aliases (`sonnet`, `opus`, `haiku`) to full ids, and
//! each model's context window and output limit, so the agent can size requests
//! and decide when to compact; one table per API kind. Their prices are
//! beside, in `prices.rs`.

use serde::{Deserialize, Serialize};

use super::providers::ApiKind;

/// How the model edits files: which tool it is offered besides read, write
/// and bash. A property of the provider entry (and so of each model), so
/// configuration can override it (`edit`, `apply_patch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EditFormat {
    /// `edit`: replace an exact string (what Claude models are trained on).
    Edit,
    /// `apply_patch`: a V4A patch (what OpenAI models are trained on).
    ApplyPatch,
}

/// How the model calls tools. A property of the provider entry (and so of
/// each model), so configuration can override it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolProtocol {
    /// The API's own tool calls: tools are sent with the request.
    #[default]
    Native,
    /// For models without tool calling: no tools are sent; the system
    /// prompt describes `##file:PATH` and `##run` blocks, which ah reads
    /// from the reply's text.
    Text,
}

impl ToolProtocol {
    /// `native` or `text`, as written in settings.
    pub fn parse(value: &str) -> Option<ToolProtocol> {
        match value.trim().to_ascii_lowercase().as_str() {
            "native" => Some(ToolProtocol::Native),
            "text" => Some(ToolProtocol::Text),
            _ => None,
        }
    }
}

/// What ah knows about one model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelInfo {
    /// The full model id sent to the API.
    pub id: String,
    /// Tokens the model accepts in one request (input plus output).
    pub context_window: u64,
    /// Largest `max_tokens` the model accepts.
    pub max_output_tokens: u32,
    /// The file-editing tool the model is offered.
    pub edit_format: EditFormat,
    /// How the model calls tools.
    pub tool_protocol: ToolProtocol,
    /// Whether the model takes images (a `read` of a picture): Claude and
    /// the OpenAI models ah knows; not a model it does not know (a local
    /// server's).
    pub images: bool,
}

/// Window assumed for a Claude model id that is not in the table: every
/// current Claude model has at least this much.
const UNKNOWN_CONTEXT_WINDOW: u64 = 200_000;
/// Output limit assumed for a Claude model id that is not in the table.
const UNKNOWN_MAX_OUTPUT_TOKENS: u32 = 32_000;
/// Window assumed for a model behind an OpenAI-compatible API that is not in
/// the table, typically one a local server (Ollama, LM Studio, vLLM) runs:
/// 32k is what common local coding models (Qwen2.5-Coder, Llama 3.x served
/// with their default settings) accept, so ah compacts before such a server
/// would refuse or silently cut the prompt. A bigger model just compacts
/// early.
const UNKNOWN_OPENAI_CONTEXT_WINDOW: u64 = 32_768;
/// Output limit assumed for such a model: a quarter of that window.
const UNKNOWN_OPENAI_MAX_OUTPUT_TOKENS: u32 = 8_192;

/// The model used when neither the command line nor the configuration
/// names one.
pub const DEFAULT_MODEL: &str = "opus";

struct Entry {
    alias: &'static str,
    id: &'static str,
    context_window: u64,
    max_output_tokens: u32,
}

const CLAUDE_MODELS: &[Entry] = &[
    Entry {
        alias: "sonnet",
        id: "claude-sonnet-4-5-20250929",
        context_window: 200_000,
        max_output_tokens: 64_000,
    },
    Entry {
        alias: "opus",
        id: "claude-opus-4-5-20251101",
        context_window: 200_000,
        max_output_tokens: 64_000,
    },
    Entry {
        alias: "haiku",
        id: "claude-haiku-4-5-20251001",
        context_window: 200_000,
        max_output_tokens: 64_000,
    },
];

/// OpenAI models ah knows (no aliases: their ids are short already).
const OPENAI_MODELS: &[Entry] = &[
    Entry {
        alias: "",
        id: "gpt-4o",
        context_window: 128_000,
        max_output_tokens: 16_384,
    },
    Entry {
        alias: "",
        id: "gpt-4o-mini",
        context_window: 128_000,
        max_output_tokens: 16_384,
    },
    Entry {
        alias: "",
        id: "gpt-4.1",
        context_window: 1_047_576,
        max_output_tokens: 32_768,
    },
    Entry {
        alias: "",
        id: "gpt-4.1-mini",
        context_window: 1_047_576,
        max_output_tokens: 32_768,
    },
    Entry {
        alias: "",
        id: "o3",
        context_window: 200_000,
        max_output_tokens: 100_000,
    },
    Entry {
        alias: "",
        id: "o4-mini",
        context_window: 200_000,
        max_output_tokens: 100_000,
    },
];

/// Resolves an alias or a full model id of a provider speaking `api`. Ids
/// that are not in the table are passed through unchanged (new models work
/// before ah knows them) with a conservative window and output limit. The
/// edit format is the API's usual one; the provider entry may override it.
pub fn resolve(api: ApiKind, name: &str) -> ModelInfo {
    let name = name.trim();
    let (table, window, output) = match api {
        ApiKind::Anthropic => (
            CLAUDE_MODELS,
            UNKNOWN_CONTEXT_WINDOW,
            UNKNOWN_MAX_OUTPUT_TOKENS,
        ),
        ApiKind::OpenAi => (
            OPENAI_MODELS,
            UNKNOWN_OPENAI_CONTEXT_WINDOW,
            UNKNOWN_OPENAI_MAX_OUTPUT_TOKENS,
        ),
    };
    let found = table
        .iter()
        .find(|m| (!m.alias.is_empty() && m.alias == name) || m.id == name);
    let (id, context_window, max_output_tokens) = match found {
        Some(m) => (m.id, m.context_window, m.max_output_tokens),
        None => (name, window, output),
    };
    ModelInfo {
        id: id.to_string(),
        context_window,
        max_output_tokens,
        edit_format: api.edit_format(),
        tool_protocol: ToolProtocol::Native,
        images: api == ApiKind::Anthropic || found.is_some(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claude(name: &str) -> ModelInfo {
        resolve(ApiKind::Anthropic, name)
    }

    #[test]
    fn aliases_resolve_to_full_ids() {
        assert_eq!(claude("sonnet").id, "claude-sonnet-4-5-20250929");
        assert_eq!(claude("opus").id, "claude-opus-4-5-20251101");
        assert_eq!(claude("haiku").id, "claude-haiku-4-5-20251001");
        for alias in ["sonnet", "opus", "haiku"] {
            let info = claude(alias);
            assert_eq!(info.context_window, 200_000);
            assert_eq!(info.max_output_tokens, 64_000);
            assert_eq!(info.edit_format, EditFormat::Edit);
        }
    }

    #[test]
    fn known_full_id_resolves_to_its_entry() {
        assert_eq!(claude("claude-haiku-4-5-20251001"), claude("haiku"));
    }

    #[test]
    fn unknown_id_is_passed_through_with_conservative_limits() {
        assert_eq!(
            claude("claude-foo"),
            ModelInfo {
                id: "claude-foo".into(),
                context_window: 200_000,
                max_output_tokens: 32_000,
                edit_format: EditFormat::Edit,
                tool_protocol: ToolProtocol::Native,
                images: true,
            }
        );
        assert_eq!(
            resolve(ApiKind::OpenAi, "qwen2.5-coder:7b"),
            ModelInfo {
                id: "qwen2.5-coder:7b".into(),
                context_window: 32_768,
                max_output_tokens: 8_192,
                edit_format: EditFormat::ApplyPatch,
                tool_protocol: ToolProtocol::Native,
                images: false,
            }
        );
    }

    #[test]
    fn openai_models_have_their_own_table_and_no_claude_aliases() {
        let info = resolve(ApiKind::OpenAi, "gpt-4.1");
        assert_eq!(info.context_window, 1_047_576);
        assert_eq!(info.edit_format, EditFormat::ApplyPatch);
        // "opus" means nothing to an OpenAI-compatible server: passed through.
        assert_eq!(resolve(ApiKind::OpenAi, "opus").id, "opus");
        assert_eq!(claude("gpt-4o").context_window, 200_000);
    }

    #[test]
    fn tool_protocols_are_named_native_and_text() {
        assert_eq!(ToolProtocol::parse(" Text "), Some(ToolProtocol::Text));
        assert_eq!(ToolProtocol::parse("native"), Some(ToolProtocol::Native));
        assert_eq!(ToolProtocol::parse("json"), None);
    }
}
