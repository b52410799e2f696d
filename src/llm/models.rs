//! The model table: short aliases (`sonnet`, `opus`, `haiku`) to full ids, and
//! each model's context window and output limit, so the agent can size requests
//! and decide when to compact.

/// What ah knows about one model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelInfo {
    /// The full model id sent to the API.
    pub id: String,
    /// Tokens the model accepts in one request (input plus output).
    pub context_window: u64,
    /// Largest `max_tokens` the model accepts.
    pub max_output_tokens: u32,
}

/// Window assumed for a model id that is not in the table.
const UNKNOWN_CONTEXT_WINDOW: u64 = 200_000;
/// Output limit assumed for a model id that is not in the table.
const UNKNOWN_MAX_OUTPUT_TOKENS: u32 = 32_000;

/// The model used when neither the command line nor the configuration
/// names one.
pub const DEFAULT_MODEL: &str = "opus";

struct Entry {
    alias: &'static str,
    id: &'static str,
    context_window: u64,
    max_output_tokens: u32,
}

const MODELS: &[Entry] = &[
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

/// Resolves an alias or a full model id. Ids that are not in the table are
/// passed through unchanged (new models work before ah knows them) with a
/// conservative window and output limit.
pub fn resolve(name: &str) -> ModelInfo {
    let name = name.trim();
    match MODELS.iter().find(|m| m.alias == name || m.id == name) {
        Some(m) => ModelInfo {
            id: m.id.to_string(),
            context_window: m.context_window,
            max_output_tokens: m.max_output_tokens,
        },
        None => ModelInfo {
            id: name.to_string(),
            context_window: UNKNOWN_CONTEXT_WINDOW,
            max_output_tokens: UNKNOWN_MAX_OUTPUT_TOKENS,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_resolve_to_full_ids() {
        assert_eq!(resolve("sonnet").id, "claude-sonnet-4-5-20250929");
        assert_eq!(resolve("opus").id, "claude-opus-4-5-20251101");
        assert_eq!(resolve("haiku").id, "claude-haiku-4-5-20251001");
        for alias in ["sonnet", "opus", "haiku"] {
            let info = resolve(alias);
            assert_eq!(info.context_window, 200_000);
            assert_eq!(info.max_output_tokens, 64_000);
        }
    }

    #[test]
    fn known_full_id_resolves_to_its_entry() {
        assert_eq!(resolve("claude-haiku-4-5-20251001"), resolve("haiku"));
    }

    #[test]
    fn unknown_id_is_passed_through_with_conservative_limits() {
        let info = resolve("claude-foo");
        assert_eq!(
            info,
            ModelInfo {
                id: "claude-foo".into(),
                context_window: 200_000,
                max_output_tokens: 32_000,
            }
        );
    }
}
