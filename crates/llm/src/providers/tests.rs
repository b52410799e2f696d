//! The registry: how `-m` names pick a provider and a model, how the
//! environment moves base URLs, and what a missing key says.

use std::collections::HashMap;

use super::*;

fn select(name: &str) -> Selection {
    Registry::builtin()
        .select(name)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |name| map.get(name).cloned()
}

#[test]
fn plain_names_are_anthropic_models_as_before() {
    let opus = select("opus");
    assert_eq!(opus.provider.name, "anthropic");
    assert_eq!(opus.model.id, "claude-opus-4-5-20251101");
    assert_eq!(opus.model.edit_format, EditFormat::Edit);
    assert_eq!(opus.display_name(), "claude-opus-4-5-20251101");
    // An unknown prefix is part of the model id, not a provider.
    let odd = select("claude-x:beta");
    assert_eq!(odd.provider.name, "anthropic");
    assert_eq!(odd.model.id, "claude-x:beta");
}

#[test]
fn a_provider_prefix_is_split_at_the_first_colon_only() {
    let local = select("ollama:qwen2.5-coder:7b");
    assert_eq!(local.provider.name, "ollama");
    assert_eq!(local.provider.api, ApiKind::OpenAi);
    assert_eq!(local.model.id, "qwen2.5-coder:7b");
    assert_eq!(local.model.context_window, 32_768);
    assert_eq!(local.model.edit_format, EditFormat::ApplyPatch);
    assert_eq!(local.display_name(), "ollama:qwen2.5-coder:7b");

    let gpt = select("openai:gpt-4.1");
    assert_eq!(gpt.model.context_window, 1_047_576);
    assert_eq!(
        gpt.provider.output_limit_field,
        OutputLimitField::MaxCompletionTokens
    );
    assert_eq!(
        select("anthropic:sonnet").model.id,
        "claude-sonnet-4-5-20250929"
    );
    assert_eq!(
        Registry::builtin().select("openai:  "),
        Err(SelectError::NoModel("openai:".into(), "openai".into()))
    );
}

#[test]
fn builtin_entries_carry_their_endpoints_and_keys() {
    let registry = Registry::builtin();
    let expect = [
        (
            "anthropic",
            "https://api.anthropic.com",
            Some("ANTHROPIC_API_KEY"),
        ),
        (
            "openai",
            "https://api.openai.com/v1",
            Some("OPENAI_API_KEY"),
        ),
        ("ollama", "http://localhost:11434/v1", None),
        ("lmstudio", "http://localhost:1234/v1", None),
        ("vllm", "http://localhost:8000/v1", None),
        (
            "openrouter",
            "https://openrouter.ai/api/v1",
            Some("OPENROUTER_API_KEY"),
        ),
    ];
    for (name, url, key) in expect {
        let entry = registry.get(name).unwrap_or_else(|| panic!("{name}"));
        assert_eq!(entry.base_url, url, "{name}");
        assert_eq!(entry.key_env.as_deref(), key, "{name}");
    }
}

#[test]
fn base_urls_move_with_ah_variables_first_then_the_provider_own() {
    let registry = Registry::builtin();
    let openai = registry.get("openai").expect("openai");
    assert_eq!(openai.base_url_variable(), "AH_OPENAI_BASE_URL");
    assert_eq!(
        openai.effective_base_url(&env(&[])),
        "https://api.openai.com/v1"
    );
    assert_eq!(
        openai.effective_base_url(&env(&[("OPENAI_BASE_URL", "http://o/v1")])),
        "http://o/v1"
    );
    assert_eq!(
        openai.effective_base_url(&env(&[
            ("OPENAI_BASE_URL", "http://o/v1"),
            ("AH_OPENAI_BASE_URL", " http://ah/v1 "),
        ])),
        "http://ah/v1"
    );
    let ollama = registry.get("ollama").expect("ollama");
    assert_eq!(
        ollama.effective_base_url(&env(&[("AH_OLLAMA_BASE_URL", "")])),
        "http://localhost:11434/v1"
    );
}

#[test]
fn a_missing_key_names_its_variable_and_local_servers_need_none() {
    let retry = RetryPolicy::default();
    let err = select("openai:gpt-4o")
        .connect_with(retry.clone(), &env(&[]), None)
        .err()
        .expect("no key");
    assert_eq!(
        err.to_string(),
        "no API key for provider openai: set OPENAI_API_KEY"
    );
    assert!(
        select("openrouter:x/y")
            .connect_with(retry.clone(), &env(&[("OPENROUTER_API_KEY", "k")]), None)
            .is_ok()
    );
    assert!(
        select("ollama:llama3")
            .connect_with(retry.clone(), &env(&[]), None)
            .is_ok()
    );
    assert!(matches!(
        select("opus").connect_with(retry, &env(&[]), None),
        Err(LlmError::NoCredentials)
    ));
}

#[test]
fn servers_of_open_models_are_sanitized_and_the_big_apis_are_not() {
    let registry = Registry::builtin();
    let sanitized = |name: &str| registry.get(name).map(|e| e.sanitize);
    for name in ["ollama", "lmstudio", "vllm", "openrouter"] {
        assert_eq!(sanitized(name), Some(true), "{name}");
    }
    assert_eq!(sanitized("openai"), Some(false));
    assert_eq!(sanitized("anthropic"), Some(false));
}

#[test]
fn an_inserted_entry_replaces_or_extends_the_registry() {
    let mut registry = Registry::builtin();
    let mut local = registry.get("vllm").expect("vllm").clone();
    local.name = "lab".into();
    local.base_url = "http://gpu-box:9000/v1".into();
    local.edit_format = EditFormat::Edit;
    local.tool_protocol = ToolProtocol::Text;
    registry.insert(local);
    let lab = registry.select("lab:coder").expect("lab model");
    assert_eq!(lab.provider.base_url, "http://gpu-box:9000/v1");
    assert_eq!(lab.model.edit_format, EditFormat::Edit, "the entry decides");
    assert_eq!(lab.model.tool_protocol, ToolProtocol::Text);
    assert_eq!(
        select("ollama:qwen").model.tool_protocol,
        ToolProtocol::Native
    );

    let mut ollama = registry.get("ollama").expect("ollama").clone();
    ollama.base_url = "http://elsewhere:11434/v1".into();
    registry.insert(ollama);
    assert_eq!(
        registry.get("ollama").map(|e| e.base_url.as_str()),
        Some("http://elsewhere:11434/v1")
    );
    assert_eq!(
        Registry {
            entries: Vec::new()
        }
        .select("opus"),
        Err(SelectError::UnknownProvider(
            "anthropic".into(),
            "opus".into()
        ))
    );
}
