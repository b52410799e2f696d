//! The precedence table, key-by-key merging, provenance, and errors that
//! name the file and line.

use std::fs;

use super::*;
use ah_llm::models::{EditFormat, ToolProtocol};
use ah_llm::providers::{ApiKind, Registry};

struct Files {
    _dir: tempfile::TempDir,
    global: PathBuf,
    project: ProjectFiles,
}

fn files(global: &str, project: &str) -> Files {
    let dir = tempfile::tempdir().unwrap();
    let global_path = dir.path().join("global.toml");
    let project_dir = dir.path().canonicalize().unwrap().join("project");
    fs::create_dir_all(project_dir.join(".ah")).unwrap();
    if !global.is_empty() {
        fs::write(&global_path, global).unwrap();
    }
    if !project.is_empty() {
        fs::write(project_dir.join(PROJECT_FILE), project).unwrap();
    }
    Files {
        _dir: dir,
        global: global_path,
        project: ProjectFiles::of_project(&project_dir).unwrap(),
    }
}

impl Files {
    /// The project's configuration file.
    fn project_file(&self) -> PathBuf {
        self.project.project().join(PROJECT_FILE)
    }
}

fn load(files: &Files, env: &[(&str, &str)], overrides: &[&str]) -> Result<Loaded> {
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    load_from(Some(&files.global), &files.project, &env, &overrides)
}

#[test]
fn precedence_override_env_project_global_default() {
    // Each row: which layers set sandbox.memory, and who must win.
    // (global file, project file, AH_MEMORY, -c value, wanted, its source)
    type Row<'a> = (
        &'a str,
        &'a str,
        Option<&'a str>,
        Option<&'a str>,
        &'a str,
        &'a str,
    );
    let cases: &[Row] = &[
        ("", "", None, None, "4g", "default"),
        ("[sandbox]\nmemory = \"1g\"", "", None, None, "1g", "global"),
        (
            "[sandbox]\nmemory = \"1g\"",
            "[sandbox]\nmemory = \"2g\"",
            None,
            None,
            "2g",
            "project",
        ),
        (
            "[sandbox]\nmemory = \"1g\"",
            "[sandbox]\nmemory = \"2g\"",
            Some("3g"),
            None,
            "3g",
            "env",
        ),
        (
            "",
            "[sandbox]\nmemory = \"2g\"",
            Some("3g"),
            Some("5g"),
            "5g",
            "-c",
        ),
        (
            "[sandbox]\nmemory = \"1g\"",
            "",
            None,
            Some("5g"),
            "5g",
            "-c",
        ),
    ];
    for (global, project, env, over, want, from) in cases {
        let f = files(global, project);
        let env: Vec<(&str, &str)> = env.iter().map(|v| ("AH_MEMORY", *v)).collect();
        let over: Vec<String> = over.iter().map(|v| format!("sandbox.memory={v}")).collect();
        let over: Vec<&str> = over.iter().map(String::as_str).collect();
        let loaded = load(&f, &env, &over).unwrap();
        assert_eq!(loaded.config.sandbox.memory, *want, "{from}");
        let source = loaded.source("sandbox.memory").to_string();
        let expected = match *from {
            "default" => "default".to_string(),
            "global" => f.global.display().to_string(),
            "project" => f.project_file().display().to_string(),
            "env" => "env AH_MEMORY".to_string(),
            _ => format!("-c sandbox.memory={want}"),
        };
        assert_eq!(source, expected);
    }
}

#[test]
fn tables_merge_key_by_key() {
    let f = files(
        "model = \"fast\"\n[models.fast]\nid = \"claude-haiku-4-5\"\ncontext_window = 100000\n\
         [tools.output]\nread = 1000\nbash = 2000\n",
        "[models.fast]\ncontext_window = 50000\n[tools.output]\nbash = 3000\n",
    );
    let loaded = load(&f, &[], &["tools.output.edit=500"]).unwrap();
    let config = &loaded.config;
    let fast = &config.models["fast"];
    assert_eq!(fast.id.as_deref(), Some("claude-haiku-4-5"));
    assert_eq!(fast.context_window, Some(50000));
    assert_eq!(config.tools.output.read, 1000);
    assert_eq!(config.tools.output.bash, 3000);
    assert_eq!(config.tools.output.edit, 500);
    assert_eq!(
        config.tools.output.write, 1000,
        "untouched keys keep defaults"
    );
    assert_eq!(
        loaded.source("models.fast.id"),
        Source::File(f.global.clone())
    );
    assert_eq!(
        loaded.source("models.fast.context_window"),
        Source::File(f.project_file())
    );
}

#[test]
fn values_are_typed_with_strings_as_fallback() {
    let f = files("", "");
    let loaded = load(
        &f,
        &[("AH_MODEL", "claude-x-1"), ("AH_RETRY_ATTEMPTS", "2")],
        &["review.mode=auto", "agent.max_tools=7", "model=123"],
    )
    .unwrap();
    assert_eq!(
        loaded.config.model, "123",
        "-c beats env; a number is a fine name"
    );
    assert_eq!(loaded.config.retry.attempts, 2);
    assert_eq!(loaded.config.agent.max_tools, Some(7));
    assert_eq!(
        loaded.config.review.mode,
        Some(crate::run::ReviewMode::Auto)
    );
}

#[test]
fn unknown_keys_and_wrong_types_name_the_file_and_line() {
    let f = files("model = \"opus\"\n\n[sandbox]\nmemroy = \"8g\"\n", "");
    let err = load(&f, &[], &[]).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!("{}:4: unknown field `memroy`", f.global.display())),
        "{err}"
    );
    let f = files("", "[agent]\nloop_window = \"ten\"\n");
    let err = load(&f, &[], &[]).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!("{}:2:", f.project_file().display())),
        "{err}"
    );
    assert!(err.contains("invalid type"), "{err}");
    let f = files("", "model = \n");
    let err = load(&f, &[], &[]).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!("{}:1:", f.project_file().display())),
        "{err}"
    );
}

#[test]
fn bad_overrides_and_env_values_say_where_they_came_from() {
    let f = files("", "");
    let err = load(&f, &[], &["sandbox.nope=1"]).unwrap_err().to_string();
    assert!(
        err.starts_with("-c sandbox.nope=1: unknown field `nope`"),
        "{err}"
    );
    let err = load(&f, &[("AH_LOOP_WINDOW", "many")], &[])
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("environment variable AH_LOOP_WINDOW:"),
        "{err}"
    );
    let err = load(&f, &[], &["memory"]).unwrap_err().to_string();
    assert!(err.contains("expected KEY=VALUE"), "{err}");
    let err = load(&f, &[], &["tools.bash_timeout=900"])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(
            "tools.bash_timeout: 900 is outside 1..=600 seconds (set by -c tools.bash_timeout=900)"
        ),
        "{err}"
    );
    let f = files("", "[models.x]\ncontext_window = 5\n");
    let err = load(&f, &[], &[]).unwrap_err().to_string();
    assert!(
        err.contains("models.x.id: the alias has no model id"),
        "{err}"
    );
}

#[test]
fn show_lists_every_key_with_its_source() {
    let f = files("[sandbox]\npids_limit = 64\n", "");
    let loaded = load(&f, &[], &["backend=none"]).unwrap();
    let text = show(&loaded).unwrap();
    let line = |key: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{key} = ")))
            .unwrap_or_else(|| panic!("{key} missing:\n{text}"))
            .to_string()
    };
    assert!(line("sandbox.pids_limit").ends_with(&format!("# {}", f.global.display())));
    assert!(line("backend").contains("\"none\"") && line("backend").ends_with("# -c backend=none"));
    assert!(line("model").ends_with("# default"));
    assert!(line("review.mode").contains("(not set)"));
}

#[test]
fn provider_tables_add_and_override_built_ins_key_by_key() {
    let f = files(
        "[providers.gpu]\napi = \"openai-chat\"\nbase_url = \"http://gpu:8000/v1\"\n\
         api_key_env = \"GPU_KEY\"\n[providers.ollama]\nbase_url = \"http://box:11434/v1\"\n",
        "[providers.gpu]\nedit_format = \"edit\"\nsanitize = false\n\
         [providers.old]\napi = \"openai-chat\"\nbase_url = \"http://old/v1\"\n\
         tool_protocol = \"text\"\n\
         [models.coder]\nprovider = \"gpu\"\nid = \"qwen3-coder\"\ncontext_window = 65536\n\
         tool_protocol = \"text\"\n",
    );
    let loaded = load(&f, &[], &["providers.openai.api_key_env="]).unwrap();
    let registry = registry(&loaded.config.providers).unwrap();
    let gpu = registry.get("gpu").unwrap();
    assert_eq!(gpu.api, ApiKind::OpenAi);
    assert_eq!(gpu.base_url, "http://gpu:8000/v1");
    assert_eq!(gpu.key_env.as_deref(), Some("GPU_KEY"));
    assert_eq!(gpu.edit_format, EditFormat::Edit, "the project file's key");
    assert!(!gpu.sanitize);
    let old = registry.get("old").unwrap();
    assert!(
        old.sanitize,
        "a configured OpenAI-compatible server is sanitized"
    );
    assert_eq!(old.tool_protocol, ToolProtocol::Text);
    assert_eq!(
        loaded.config.models["coder"].tool_protocol,
        Some(ToolProtocol::Text)
    );
    let ollama = registry.get("ollama").unwrap();
    assert_eq!(ollama.base_url, "http://box:11434/v1");
    assert_eq!(ollama.edit_format, EditFormat::ApplyPatch, "kept");
    assert_eq!(
        registry.get("openai").unwrap().key_env,
        None,
        "\"\" is no key"
    );
    assert_eq!(
        registry.get("anthropic"),
        Registry::builtin().get("anthropic")
    );
    let text = show(&loaded).unwrap();
    for line in [
        "providers.gpu.api = \"openai-chat\"",
        "providers.gpu.edit_format = \"edit\"",
        "models.coder.provider = \"gpu\"",
    ] {
        assert!(text.lines().any(|l| l.starts_with(line)), "{line}:\n{text}");
    }
}

#[test]
fn bad_provider_tables_name_the_file_and_line_or_the_key() {
    let f = files(
        "model = \"opus\"\n[providers.gpu]\napi = \"openai\"\nbase_url = \"http://gpu/v1\"\n",
        "",
    );
    let err = load(&f, &[], &[]).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!(
            "{}:3: unknown variant `openai`",
            f.global.display()
        )),
        "{err}"
    );
    let f = files(
        "",
        "\n[providers.gpu]\nbase_url = \"http://gpu/v1\"\nkey = \"X\"\n",
    );
    let err = load(&f, &[], &[]).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!(
            "{}:4: unknown field `key`",
            f.project_file().display()
        )),
        "{err}"
    );
    let f = files("", "[providers.gpu]\nbase_url = \"http://gpu/v1\"\n");
    let err = load(&f, &[], &[]).unwrap_err().to_string();
    assert!(
        err.contains(&format!(
            "providers.gpu: gpu is not a built-in provider, so it needs `api = \"anthropic\"` or \
             `api = \"openai-chat\"` and `base_url = \"…\"` (set by {})",
            f.project_file().display()
        )),
        "{err}"
    );
    let f = files(
        "[providers.GPU]\napi = \"anthropic\"\nbase_url = \"gpu\"\n",
        "",
    );
    let err = load(&f, &[], &[]).unwrap_err().to_string();
    assert!(err.contains("\"GPU\" cannot name a provider"), "{err}");
    let f = files(
        "[providers.gpu]\napi = \"anthropic\"\nbase_url = \"gpu\"\n",
        "",
    );
    let err = load(&f, &[], &[]).unwrap_err().to_string();
    assert!(err.contains("base_url \"gpu\" is not an http"), "{err}");
    let f = files("[models.x]\nid = \"m\"\nprovider = \"nowhere\"\n", "");
    let err = load(&f, &[], &[]).unwrap_err().to_string();
    assert!(
        err.contains("models.x.provider: no provider \"nowhere\": add a [providers.nowhere] table"),
        "{err}"
    );
}

#[test]
fn network_settings_are_typed() {
    let f = files(
        "[network]\nmode = \"proxy\"\nallow = [\"crates.io:443\"]\n[sandbox]\nenv = [\"CI\"]\n",
        "",
    );
    let loaded = load(&f, &[], &[]).unwrap();
    assert_eq!(
        loaded.config.network.mode,
        Some(ah_sandbox::egress::NetworkMode::Proxy)
    );
    assert_eq!(loaded.config.network.allow, ["crates.io:443"]);
    assert_eq!(loaded.config.sandbox.env, ["CI"]);
    let f = files("", "[network]\nmode = \"open\"\n");
    let err = load(&f, &[], &[]).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!("{}:2:", f.project_file().display())),
        "{err}"
    );
}

#[test]
fn prices_come_from_the_users_layers_and_the_projects_are_named_as_ignored() {
    const OPUS: &str = "claude-opus-4-5-20251101";
    let user = format!(
        "[prices.\"{OPUS}\"]\ninput = 4\noutput = 20.0\ncache_read = 0.4\ncache_write = 5.0\n"
    );
    let project = "[prices.\"local\"]\ninput = 0.0\noutput = 0.0\ncache_read = 0.0\n\
                   cache_write = 0.0\n[sandbox]\nmemory = \"2g\"\n";
    let f = files(&user, project);
    let loaded = load(&f, &[], &[]).unwrap();
    assert_eq!(loaded.config.prices[OPUS].input, 4.0);
    assert!(!loaded.config.prices.contains_key("local"));
    // The rest of the project's file is taken as ever.
    assert_eq!(loaded.config.sandbox.memory, "2g");
    let given = "prices.m={input=1,output=2,cache_read=0.1,cache_write=1.25}";
    let with_c = load(&f, &[], &[given]).unwrap();
    assert_eq!(with_c.config.prices["m"].cache_write, 1.25);
    let shown = show(&loaded).unwrap();
    let line = shown
        .lines()
        .find(|l| l.starts_with("prices.local.output"))
        .unwrap();
    assert!(
        line.contains(&f.project_file().display().to_string()),
        "{line}"
    );
    assert!(
        line.contains("ignored: prices come only from your own"),
        "{line}"
    );
    assert!(
        shown.contains(&format!("prices.{OPUS}.input = 4")),
        "{shown}"
    );
    let bad = files(
        "[prices.m]\ninput = -1\noutput = 1\ncache_read = 1\ncache_write = 1\n",
        "",
    );
    let err = load(&bad, &[], &[]).unwrap_err().to_string();
    assert!(err.contains("prices.m.input: not a price"), "{err}");
    let partial = files("[prices.m]\ninput = 1\n", "");
    let err = load(&partial, &[], &[]).unwrap_err().to_string();
    assert!(err.contains("missing field `output`"), "{err}");
}
