//! The settings a config file can hold, with their defaults. Every table
//! rejects unknown keys, so a typo is an error naming the file and line
//! instead of a setting that silently does nothing.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::mcp::McpSettings;
use super::providers::{ProviderSettings, registry};
use crate::agent::compact::DEFAULT_RESERVE;
use crate::agent::loop_detect::DEFAULT_WINDOW;
use crate::run::ReviewMode;
use ah_llm::models::{EditFormat, ToolProtocol};
use ah_llm::prices::Price;
use ah_sandbox::BackendKind;
use ah_sandbox::cleanup::Cleanup;
use ah_sandbox::egress::NetworkMode;
use ah_sandbox::podman::DEFAULT_IMAGE;
use ah_tools::OutputLimits;

/// Everything ah reads from config files, `AH_*` variables and `-c`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// The model: an alias (built in or from `[models]`) or a full id.
    pub model: String,
    pub backend: BackendKind,
    /// Model servers: `[providers.NAME]`, over the built-in ones key by key.
    pub providers: BTreeMap<String, ProviderSettings>,
    /// Custom model aliases: `[models.NAME]` with `id` and, optionally, its
    /// provider, context window, output limit and edit format.
    pub models: BTreeMap<String, ModelAlias>,
    pub sandbox: SandboxSettings,
    pub review: ReviewSettings,
    pub tools: ToolSettings,
    pub agent: AgentSettings,
    pub retry: RetrySettings,
    pub network: NetworkSettings,
    pub work: WorkSettings,
    /// MCP servers started in the sandbox: `[mcp.NAME]`.
    pub mcp: BTreeMap<String, McpSettings>,
    /// What a model's tokens cost, over ah's list prices:
    /// `[prices."MODEL"]`. Only the user's own layers set them (the
    /// project's file is not heard: `super::load`).
    pub prices: BTreeMap<String, Price>,
}

/// `ah work`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorkSettings {
    /// Most do rounds: the first and the fixes after failed checks.
    pub max_rounds: u32,
}

impl Default for WorkSettings {
    fn default() -> WorkSettings {
        WorkSettings {
            max_rounds: crate::work::DEFAULT_MAX_ROUNDS,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelAlias {
    /// Required once all layers are merged (a project file may change only
    /// the window of an alias the global file defines).
    pub id: Option<String>,
    /// A provider's name: `id` is then a model of that provider. Unset: `id`
    /// is read like `-m` (`opus`, `claude-…`, `PROVIDER:MODEL`).
    pub provider: Option<String>,
    pub context_window: Option<u64>,
    pub max_output_tokens: Option<u32>,
    /// `edit` or `apply_patch`; unset: the provider's.
    pub edit_format: Option<EditFormat>,
    /// `native` or `text`; unset: the provider's.
    pub tool_protocol: Option<ToolProtocol>,
    /// Whether the model takes images (a picture `read` or an MCP server
    /// sends); unset: true for Claude and the OpenAI models ah knows.
    pub images: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxSettings {
    pub image: String,
    /// `runc`, `crun` or a path; unset: runc when installed.
    pub runtime: Option<String>,
    pub memory: String,
    /// What the run directory may take on disk, e.g. `10G`.
    pub disk_budget: String,
    pub pids_limit: u32,
    /// Refuse to run when a limit asked for cannot be enforced by a cgroup
    /// here (rootless podman on cgroup v1, `--backend none`).
    pub strict_limits: bool,
    /// Open files inside the sandbox (lowered to the host's hard limit).
    pub nofile: Option<u64>,
    /// Processes per user inside the sandbox (lowered likewise).
    pub nproc: Option<u64>,
    /// Host variables passed into the sandbox (secrets never are); adds to
    /// the policy's `[sandbox] env` and `--env`.
    pub env: Vec<String>,
    /// `detached` (the sandbox is removed by a process of its own while ah
    /// ends) or `wait` (the run waits for its removal).
    pub cleanup: Cleanup,
    /// Where sandboxes run: `podman`, `podman-remote` or `none` (the
    /// top-level `backend` key says the same; this one wins).
    pub engine: Option<BackendKind>,
    /// The remote engine's connection (a name of `podman system
    /// connection`); unset: `CONTAINER_HOST`, else podman's default.
    pub connection: Option<String>,
}

/// The sandbox's network (podman backend).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NetworkSettings {
    /// `none`, `proxy` or `full`; unset: none.
    pub mode: Option<NetworkMode>,
    /// `HOST:PORT` rules the proxy lets through; adds to the policy's
    /// `[network] allow` and `--allow-host`.
    pub allow: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReviewSettings {
    /// Unset: ask at a terminal, else never.
    pub mode: Option<ReviewMode>,
    /// `--review auto` thresholds; unset: the write policy's.
    pub max_lines: Option<u64>,
    pub max_files: Option<u64>,
    /// Bytes of patch text, in all and per file.
    pub max_bytes: Option<u64>,
    /// The program that shows the patch at `--review ask`, a diff pager
    /// that colours it itself (e.g. `delta`); taken from the user's own
    /// configuration only, never from the project's file.
    pub pager: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolSettings {
    /// Seconds a `bash` call may run when the model names no timeout.
    pub bash_timeout: u64,
    pub output: OutputSettings,
}

/// How much of each tool's output the model gets (characters, or lines for
/// `bash_lines`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OutputSettings {
    pub read: usize,
    pub bash: usize,
    pub bash_lines: usize,
    pub edit: usize,
    pub write: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentSettings {
    pub compact_reserve: u64,
    pub loop_window: usize,
    pub max_tools: Option<u32>,
    /// MiB; larger added files are not copied out as artifacts.
    pub max_artifact_size: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetrySettings {
    pub attempts: u32,
    pub base_ms: u64,
    pub idle_secs: u64,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            model: ah_llm::models::DEFAULT_MODEL.to_string(),
            backend: BackendKind::Podman,
            providers: BTreeMap::new(),
            models: BTreeMap::new(),
            sandbox: SandboxSettings::default(),
            review: ReviewSettings::default(),
            tools: ToolSettings::default(),
            agent: AgentSettings::default(),
            retry: RetrySettings::default(),
            network: NetworkSettings::default(),
            work: WorkSettings::default(),
            mcp: BTreeMap::new(),
            prices: BTreeMap::new(),
        }
    }
}

impl Default for SandboxSettings {
    fn default() -> SandboxSettings {
        SandboxSettings {
            image: DEFAULT_IMAGE.to_string(),
            runtime: None,
            memory: "4g".to_string(),
            disk_budget: "10G".to_string(),
            pids_limit: 1024,
            strict_limits: false,
            nofile: None,
            nproc: None,
            env: Vec::new(),
            cleanup: Cleanup::default(),
            engine: None,
            connection: None,
        }
    }
}

impl Default for ToolSettings {
    fn default() -> ToolSettings {
        ToolSettings {
            bash_timeout: ah_tools::bash::DEFAULT_TIMEOUT,
            output: OutputSettings::default(),
        }
    }
}

impl Default for OutputSettings {
    fn default() -> OutputSettings {
        let limits = OutputLimits::default();
        OutputSettings {
            read: limits.read,
            bash: limits.bash,
            bash_lines: limits.bash_lines,
            edit: limits.edit,
            write: limits.write,
        }
    }
}

impl Default for AgentSettings {
    fn default() -> AgentSettings {
        AgentSettings {
            compact_reserve: DEFAULT_RESERVE,
            loop_window: DEFAULT_WINDOW,
            max_tools: None,
            max_artifact_size: 10,
        }
    }
}

impl Default for RetrySettings {
    fn default() -> RetrySettings {
        RetrySettings {
            attempts: 5,
            base_ms: 1000,
            idle_secs: 60,
        }
    }
}

impl Config {
    /// Checks values the types allow but ah cannot use. Each problem names
    /// its key; the caller adds where the value came from.
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut problems = Vec::new();
        let mut check = |key: &str, bad: bool, why: String| {
            if bad {
                problems.push((key.to_string(), why));
            }
        };
        if let Err(why) = ah_sandbox::disk::parse_size(&self.sandbox.disk_budget) {
            check("sandbox.disk_budget", true, why);
        }
        let max = ah_tools::bash::MAX_TIMEOUT;
        let timeout = self.tools.bash_timeout;
        check(
            "tools.bash_timeout",
            timeout == 0 || timeout > max,
            format!("{timeout} is outside 1..={max} seconds"),
        );
        let output = &self.tools.output;
        for (key, value) in [
            ("read", output.read),
            ("bash", output.bash),
            ("edit", output.edit),
            ("write", output.write),
        ] {
            check(
                &format!("tools.output.{key}"),
                value < OutputLimits::MIN_CHARS,
                format!(
                    "{value} is too small: the cut marker needs at least {} characters",
                    OutputLimits::MIN_CHARS
                ),
            );
        }
        check(
            "tools.output.bash_lines",
            output.bash_lines < OutputLimits::MIN_LINES,
            format!(
                "{} is below {} lines",
                output.bash_lines,
                OutputLimits::MIN_LINES
            ),
        );
        check(
            "work.max_rounds",
            self.work.max_rounds == 0,
            "0 rounds would never change anything; use at least 1".to_string(),
        );
        check(
            "retry.attempts",
            self.retry.attempts == 0,
            "0 attempts would never call the model; use 1 for no retries".to_string(),
        );
        for (name, alias) in &self.models {
            check(
                &format!("models.{name}.id"),
                alias.id.as_deref().is_none_or(|id| id.trim().is_empty()),
                "the alias has no model id: add `id = \"…\"`".to_string(),
            );
        }
        for (model, price) in &self.prices {
            if let Some(field) = price.invalid_field() {
                problems.push((
                    format!("prices.{model}.{field}"),
                    "not a price: write US dollars per million tokens, 0 or more".to_string(),
                ));
            }
        }
        problems.extend(super::mcp::problems(&self.mcp));
        match registry(&self.providers) {
            Err((key, why)) => problems.push((key, why)),
            Ok(known) => {
                for (name, alias) in &self.models {
                    if let Some(provider) = &alias.provider
                        && known.get(provider).is_none()
                    {
                        problems.push((
                            format!("models.{name}.provider"),
                            format!("no provider {provider:?}: add a [providers.{provider}] table"),
                        ));
                    }
                }
            }
        }
        problems
    }
}
