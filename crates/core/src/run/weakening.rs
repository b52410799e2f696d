//! Names, at the start of every run, each setting from the project's own
//! files (`.ah/config.toml`, `.ah/policy.toml`) that weakens the sandbox,
//! the review or where the API key goes. The model cannot write `.ah/`, but
//! a cloned repository or an earlier compromise can ship those files, and a
//! user must not learn of them from the damage. A setting counts only when
//! the project's file changes the outcome: the same value from the command
//! line, `-c`, `AH_*` or the user's own files is the user's choice. A
//! limit counts when the project's file makes it looser than the user's own
//! configuration (or the defaults) would, and no flag set it ([`limits`]
//! says which keys are limits, and why the others are not).

mod limits;

use super::{ReviewMode, RunOptions};
use crate::config::Config;
use crate::config::mcp::McpSettings;
use ah_record::policy::{PROJECT_POLICY_FILE, Policy};
use ah_sandbox::BackendKind;
use ah_sandbox::egress::NetworkMode;
use ah_tools::mcp::McpServer;

/// The project's configuration file, relative to the project root.
const PROJECT_CONFIG_FILE: &str = ".ah/config.toml";

/// Which settings the command line gave (those win over any file).
#[derive(Debug, Clone, Default)]
pub(super) struct CommandLineWins {
    backend: bool,
    review: bool,
    network: bool,
    /// The keys of the limits it gave.
    limits: Vec<&'static str>,
}

impl CommandLineWins {
    /// What the command line gave `args`, read before the configuration
    /// fills in the rest.
    pub(super) fn of(args: &RunOptions) -> CommandLineWins {
        CommandLineWins {
            backend: args.given.backend,
            review: args.review.is_some(),
            network: args.sandbox.network.is_some(),
            limits: limits::given(args),
        }
    }
}

/// The run's settings, and what they would be without the project's files.
pub(super) struct Settings<'a> {
    pub config: &'a Config,
    pub user_config: &'a Config,
    pub policy: &'a Policy,
    pub user_policy: &'a Policy,
    pub given: CommandLineWins,
    /// The MCP servers as the run starts them, with the variables each
    /// actually gets (the refused ones left out).
    pub mcp_servers: &'a [McpServer],
}

/// The line for stderr, or `None` when the project's files weaken nothing.
pub(super) fn warning(settings: &Settings<'_>) -> Option<String> {
    let mut items = config_items(settings);
    items.extend(limit_items(settings));
    items.extend(policy_items(settings.policy, settings.user_policy));
    items.extend(review_items(settings));
    if items.is_empty() {
        return None;
    }
    let named: Vec<String> = items
        .iter()
        .map(|(what, file)| format!("{what} ({file})"))
        .collect();
    Some(format!(
        "ah: project settings weaken the sandbox: {}",
        named.join(", ")
    ))
}

/// The line naming each setting of the project's file that ah ignores
/// (whatever its value: a project must not choose a program the host runs
/// outside the sandbox), or `None`.
pub(super) fn ignored(settings: &Settings<'_>) -> Option<String> {
    let (config, user) = (settings.config, settings.user_config);
    let mut lines = Vec::new();
    if config.review.pager != user.review.pager {
        lines.push(format!(
            "ah: project setting ignored: review.pager ({PROJECT_CONFIG_FILE}): only your own \
             configuration, GIT_PAGER, PAGER or your own git configuration choose the program \
             that shows the patch"
        ));
    }
    let remote = |c: &Config| c.sandbox.engine.unwrap_or(c.backend) == BackendKind::PodmanRemote;
    if (remote(config) && !remote(user)) || config.sandbox.connection != user.sandbox.connection {
        lines.push(format!(
            "ah: project setting ignored: sandbox.engine or sandbox.connection \
             ({PROJECT_CONFIG_FILE}): only your own configuration, --engine or --connection send \
             the project to another machine"
        ));
    }
    (!lines.is_empty()).then(|| lines.join("\n"))
}

/// Takes the remote engine and its connection only from the command line
/// and the user's own configuration (see [`ignored`]): a project must not
/// choose the machine its files are sent to.
pub(super) fn engine_of_user(args: &mut RunOptions, user: &Config) {
    let users = user.sandbox.engine.unwrap_or(user.backend);
    if !args.given.backend && args.backend == BackendKind::PodmanRemote && users != args.backend {
        args.backend = users;
    }
    if !args.given.connection {
        args.sandbox.connection = user.sandbox.connection.clone();
    }
}

type Item = (String, &'static str);

fn config_items(settings: &Settings<'_>) -> Vec<Item> {
    let (config, user, given) = (settings.config, settings.user_config, &settings.given);
    let mut items = Vec::new();
    let mut name = |what: String| items.push((what, PROJECT_CONFIG_FILE));
    if !given.backend && config.backend == BackendKind::None && user.backend != config.backend {
        name("backend=none".into());
    }
    let auto = Some(ReviewMode::Auto);
    if !given.review && config.review.mode == auto && user.review.mode != auto {
        name("review=auto".into());
    }
    let full = Some(NetworkMode::Full);
    if !given.network && config.network.mode == full && user.network.mode != full {
        name("network=full".into());
    }
    if let Some(rules) = added(&config.network.allow, &user.network.allow) {
        name(format!("network allow += {rules}"));
    }
    if let Some(names) = added(&config.sandbox.env, &user.sandbox.env) {
        name(format!("sandbox env += {names}"));
    }
    if let Some(runtime) = &config.sandbox.runtime
        && user.sandbox.runtime.as_ref() != Some(runtime)
    {
        name(format!("sandbox.runtime={runtime}"));
    }
    for (provider, entry) in &config.providers {
        let mine = user.providers.get(provider);
        if let Some(url) = &entry.base_url
            && mine.and_then(|p| p.base_url.as_ref()) != Some(url)
        {
            name(format!("providers.{provider}.base_url={url}"));
        }
        if let Some(variable) = &entry.api_key_env
            && mine.and_then(|p| p.api_key_env.as_ref()) != Some(variable)
        {
            name(format!("providers.{provider}.api_key_env={variable}"));
        }
    }
    // A server the project's file starts (or changes) runs where commands
    // run, before any turn of the model's, and gets what the user gave the
    // server of that name; the variables it gets are host variables in the
    // sandbox.
    for (server, entry) in config.mcp.iter().filter(|(_, e)| e.enabled != Some(false)) {
        // A server the user turned off counts as none of theirs.
        let mine = user
            .mcp
            .get(server)
            .filter(|own| own.enabled != Some(false));
        let program = |e: &McpSettings| {
            (
                e.command.clone(),
                e.args.clone(),
                e.enabled_tools.clone(),
                e.disabled_tools.clone(),
            )
        };
        if mine.map(program) != Some(program(entry)) {
            let command = entry.command.as_deref().unwrap_or_default();
            name(format!("mcp.{server}.command={command}"));
        }
        // Only the variables it gets: a refused one never leaves the host.
        let gets: Vec<String> = settings
            .mcp_servers
            .iter()
            .filter(|started| &started.name == server)
            .flat_map(|started| started.env.iter().map(|(var, _)| var.clone()))
            .collect();
        let listed = mine.map(|own| own.env.clone()).unwrap_or_default();
        let passed: Vec<String> = entry
            .env
            .iter()
            .filter(|var| gets.contains(var))
            .cloned()
            .collect();
        if let Some(names) = added(&passed, &listed) {
            name(format!("mcp.{server} env += {names}"));
        }
    }
    items
}

fn policy_items(policy: &Policy, user: &Policy) -> Vec<Item> {
    let mut items = Vec::new();
    let mut name = |what: String| items.push((what, PROJECT_POLICY_FILE));
    if let Some(dropped) = added(&user.write().deny, &policy.write().deny) {
        name(format!("write deny list replaced, dropping {dropped}"));
    }
    let (sandbox, mine) = (policy.sandbox(), user.sandbox());
    if let Some(rules) = added(&sandbox.network_allow, &mine.network_allow) {
        name(format!("network allow += {rules}"));
    }
    if let Some(names) = added(&sandbox.env, &mine.env) {
        name(format!("sandbox env += {names}"));
    }
    items
}

/// The limits of the configuration the project's file loosens, with their
/// values: looser than the user's own configuration makes them, and not
/// given on the command line. A limit of a server only the project's file
/// has is not compared: the server itself is named.
fn limit_items(settings: &Settings<'_>) -> Vec<Item> {
    let usual = limits::limits(settings.user_config);
    limits::limits(settings.config)
        .into_iter()
        .filter(|limit| !settings.given.limits.contains(&limit.key.as_str()))
        .filter(|limit| {
            usual
                .iter()
                .any(|mine| mine.key == limit.key && limit.bound > mine.bound)
        })
        .map(|limit| {
            (
                format!("{}={}", limit.key, limit.value),
                PROJECT_CONFIG_FILE,
            )
        })
        .collect()
}

/// Raised `--review auto` limits, named after the file that raised them
/// (the configuration's values override the policy's).
fn review_items(settings: &Settings<'_>) -> Vec<Item> {
    let (review, mine) = (settings.policy.review(), settings.user_policy.review());
    let (config, user) = (&settings.config.review, &settings.user_config.review);
    let limits = [
        (
            "max_lines",
            review.max_lines,
            mine.max_lines,
            config.max_lines != user.max_lines,
        ),
        (
            "max_files",
            review.max_files,
            mine.max_files,
            config.max_files != user.max_files,
        ),
        (
            "max_bytes",
            review.max_bytes,
            mine.max_bytes,
            config.max_bytes != user.max_bytes,
        ),
    ];
    limits
        .into_iter()
        .filter(|(_, value, usual, _)| value > usual)
        .map(|(key, value, _, from_config)| {
            let file = if from_config {
                PROJECT_CONFIG_FILE
            } else {
                PROJECT_POLICY_FILE
            };
            (format!("review.{key}={value}"), file)
        })
        .collect()
}

/// The entries of `list` that `base` lacks, joined; `None` when there are none.
fn added(list: &[String], base: &[String]) -> Option<String> {
    let new: Vec<&str> = list
        .iter()
        .filter(|entry| !base.contains(entry))
        .map(String::as_str)
        .collect();
    (!new.is_empty()).then(|| new.join(" "))
}
