//! `[mcp.NAME]`: MCP servers, started inside the run's sandbox.
//!
//! ```toml
//! [mcp.time]
//! command = "mcp-server-time"          # a program in the sandbox image
//! args = ["--local-timezone", "UTC"]
//! env = ["TZ"]                        # host variables it gets
//! enabled_tools = ["get_current_time"] # only these (all when unset)
//! disabled_tools = []                 # never these
//! startup_timeout = 30                # seconds for its start and list
//! timeout = 120                       # seconds per call (bash's default)
//! enabled = true                      # false: not started
//! ```
//!
//! A server's variables follow the sandbox's rules (not set, ah's own, or
//! holding the API key: not passed), but for one: a name that marks a
//! secret (`GITHUB_TOKEN`) is passed when the user's own configuration
//! lists it for that server, never from the project's file alone; the
//! run says so, since the model's commands in the sandbox can read it.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{Config, Loaded};
use ah_sandbox::podman::{env_refusal, is_secret_name};
use ah_tools::mcp::{McpServer, valid_server_name};

/// Seconds a server has to start and list its tools, unless set.
const STARTUP_TIMEOUT: u64 = 30;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpSettings {
    /// Required once all layers are merged.
    pub command: Option<String>,
    pub args: Vec<String>,
    pub env: Vec<String>,
    pub enabled_tools: Option<Vec<String>>,
    pub disabled_tools: Vec<String>,
    pub startup_timeout: Option<u64>,
    pub timeout: Option<u64>,
    pub enabled: Option<bool>,
}

impl McpSettings {
    /// Seconds the server has to start and list its tools.
    pub fn startup_timeout(&self) -> u64 {
        self.startup_timeout.unwrap_or(STARTUP_TIMEOUT)
    }

    /// Seconds a call may take: its own, else `config`'s bash timeout.
    pub fn timeout(&self, config: &Config) -> u64 {
        self.timeout.unwrap_or(config.tools.bash_timeout)
    }
}

/// The problems of the `[mcp]` tables, by key.
pub fn problems(servers: &BTreeMap<String, McpSettings>) -> Vec<(String, String)> {
    let max = ah_tools::bash::MAX_TIMEOUT;
    let mut problems = Vec::new();
    for (name, server) in servers {
        if !valid_server_name(name) {
            problems.push((
                format!("mcp.{name}"),
                "a server's name is 1 to 32 letters, digits, `-` or `_`, without `__`".into(),
            ));
        }
        if server
            .command
            .as_deref()
            .is_none_or(|c| c.trim().is_empty())
        {
            problems.push((
                format!("mcp.{name}.command"),
                "the server has no command: add `command = \"…\"`".into(),
            ));
        }
        for (key, value) in [
            ("startup_timeout", server.startup_timeout),
            ("timeout", server.timeout),
        ] {
            if let Some(secs) = value
                && (secs == 0 || secs > max)
            {
                problems.push((
                    format!("mcp.{name}.{key}"),
                    format!("{secs} is outside 1..={max} seconds"),
                ));
            }
        }
    }
    problems
}

/// The servers a run in `project` starts, with their variables looked up
/// by `host`, and a line for the user about each variable passed as a
/// secret or not passed at all.
pub fn servers(
    loaded: &Loaded,
    config: &Config,
    project: &Path,
    host: &dyn Fn(&str) -> Option<String>,
) -> (Vec<McpServer>, Vec<String>) {
    let mut servers = Vec::new();
    let mut lines = Vec::new();
    for (name, settings) in &config.mcp {
        let (Some(command), true) = (&settings.command, settings.enabled != Some(false)) else {
            continue;
        };
        let users = loaded.user.mcp.get(name).map(|own| own.env.as_slice());
        let mut env = Vec::new();
        for var in &settings.env {
            let secret_by_user = users.is_some_and(|own| own.contains(var));
            let value = host(var);
            let why = env_refusal(var, value.as_deref(), secret_by_user).or_else(|| {
                value
                    .as_deref()
                    .is_some_and(|v| v.contains(['\n', '\0']))
                    .then_some("its value holds a line break")
            });
            if let Some(why) = why {
                lines.push(format!("MCP server {name}: {var} is not passed: {why}"));
                continue;
            }
            if is_secret_name(var) {
                lines.push(format!(
                    "MCP server {name} gets {var}, a secret: the model's commands in the \
                     sandbox can read it too"
                ));
            }
            env.push((var.clone(), value.unwrap_or_default()));
        }
        servers.push(McpServer {
            name: name.clone(),
            command: command.clone(),
            args: settings.args.clone(),
            env,
            enabled_tools: settings.enabled_tools.clone(),
            disabled_tools: settings.disabled_tools.clone(),
            startup_timeout: settings.startup_timeout(),
            timeout: settings.timeout(config),
            declared: loaded
                .source(&format!("mcp.{name}.command"))
                .for_model(project),
        });
    }
    (servers, lines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Source;

    fn settings(env: &[&str]) -> McpSettings {
        McpSettings {
            command: Some("srv".into()),
            env: env.iter().map(|name| name.to_string()).collect(),
            ..McpSettings::default()
        }
    }

    /// The project's folder, where [`loaded`]'s file is.
    const PROJECT: &str = "/home/u/repo";

    fn loaded(project: McpSettings, user: Option<McpSettings>) -> Loaded {
        let mut config = Config::default();
        config.mcp.insert("gh".into(), project);
        let mut own = Config::default();
        if let Some(user) = user {
            own.mcp.insert("gh".into(), user);
        }
        Loaded {
            sources: BTreeMap::from([(
                "mcp.gh.command".to_string(),
                Source::File(Path::new(PROJECT).join(".ah/config.toml")),
            )]),
            config,
            files: Vec::new(),
            user: own,
            ignored: Vec::new(),
        }
    }

    fn host(name: &str) -> Option<String> {
        match name {
            "GITHUB_TOKEN" => Some("ghp_abcdefghijkl".into()),
            "RUST_LOG" => Some("debug".into()),
            "BROKEN" => Some("a\nb".into()),
            _ => None,
        }
    }

    #[test]
    fn a_secret_passes_only_when_the_user_lists_it() {
        let listed = ["GITHUB_TOKEN", "RUST_LOG", "PATH", "UNSET", "BROKEN"];
        let planted = loaded(settings(&listed), None);
        let (passed, lines) = servers(&planted, &planted.config, Path::new(PROJECT), &host);
        assert_eq!(
            passed[0].env,
            [("RUST_LOG".to_string(), "debug".to_string())]
        );
        assert_eq!(passed[0].declared, ".ah/config.toml");
        assert_eq!(lines.len(), 4, "{lines:?}");
        assert!(lines[0].contains("GITHUB_TOKEN is not passed: its name marks a secret"));
        assert!(lines[1].contains("PATH is not passed: ah sets it itself"));
        assert!(lines[3].contains("BROKEN is not passed: its value holds a line break"));

        let own = loaded(
            settings(&["GITHUB_TOKEN"]),
            Some(settings(&["GITHUB_TOKEN"])),
        );
        let (passed, lines) = servers(&own, &own.config, Path::new(PROJECT), &host);
        assert_eq!(passed[0].env[0].0, "GITHUB_TOKEN");
        // The user's own file is named, never its path.
        let mut users = loaded(settings(&[]), None);
        users.sources.insert(
            "mcp.gh.command".into(),
            Source::File("/home/u/.config/ah/config.toml".into()),
        );
        let (mine, _) = servers(&users, &users.config, Path::new(PROJECT), &host);
        assert_eq!(mine[0].declared, "the user's configuration file");
        assert!(
            lines[0].contains("gets GITHUB_TOKEN, a secret"),
            "{lines:?}"
        );
    }

    #[test]
    fn a_disabled_server_is_not_started_and_bad_tables_are_named() {
        let mut off = settings(&[]);
        off.enabled = Some(false);
        let config = loaded(off, None);
        assert!(
            servers(&config, &config.config, Path::new(PROJECT), &host)
                .0
                .is_empty()
        );
        let bad = BTreeMap::from([
            ("a__b".to_string(), settings(&[])),
            (
                "ok".to_string(),
                McpSettings {
                    timeout: Some(0),
                    ..McpSettings::default()
                },
            ),
        ]);
        let keys: Vec<String> = problems(&bad).into_iter().map(|(key, _)| key).collect();
        assert_eq!(keys, ["mcp.a__b", "mcp.ok.command", "mcp.ok.timeout"]);
    }
}
