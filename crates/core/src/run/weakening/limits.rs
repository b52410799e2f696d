//! The limits a configuration sets on a run, each read as one number that
//! grows as the limit loosens, so that what the project's file makes of a
//! limit can be compared, key by key, with what the user's own
//! configuration would make of it ([`limits`]), and the command line's
//! flags, which win over both, known ([`given`]).
//!
//! Every key of the configuration, and why it is here or not:
//! - limits, here: `sandbox.memory`, `pids_limit`, `disk_budget`, `nofile`,
//!   `nproc` and `strict_limits` (what the sandbox and the run may use), each server's
//!   `mcp.NAME.timeout` and `startup_timeout` (how long a server may take),
//!   `tools.output.*` (how much of the
//!   sandbox's output reaches the model), `agent.max_tools`,
//!   `agent.loop_window` and `work.max_rounds` (how much the model may do
//!   before it is stopped), `agent.max_artifact_size` (what the run copies
//!   out to the host);
//! - named on their own by the caller: `backend`, `network.*`,
//!   `sandbox.env`, `sandbox.runtime`, `providers.NAME.base_url` and
//!   `api_key_env`, `review.*`, and a server the project's file starts or
//!   changes;
//! - weakening nothing: `model` and `[models]` (which model answers, not
//!   what it may do; where the requests go is its provider's `base_url`),
//!   the providers' `api`, `edit_format`, `tool_protocol` and `sanitize` (how
//!   ah speaks with the model: every call it makes still runs in the sandbox
//!   under the policy), `sandbox.image` (never pulled: a local image, run
//!   inside the same boundary with ah's init, agent and limits),
//!   `tools.bash_timeout` (only the default of a call's `timeout`: the model
//!   may ask for up to bash's hard limit of 600 s whatever it is),
//!   `agent.compact_reserve` (when the conversation is summarised) and
//!   `retry.*` (how ah waits for the provider).

use crate::config::Config;
use crate::run::{OutputLimit, RunOptions, UlimitKind};
use ah_sandbox::limits::memory_bytes;
use ah_sandbox::podman::Ulimits;

/// The bound of a limit that does not bound anything (or cannot be read,
/// which counts as the loosest).
const NONE: u128 = u128::MAX;

/// One limit of a configuration.
pub(super) struct Limit {
    /// Its dotted key, as `ah config` shows it.
    pub key: String,
    /// Larger is looser; [`NONE`] for no limit at all.
    pub bound: u128,
    /// Its value as the configuration gives it.
    pub value: String,
}

fn limit(key: &str, bound: u128, value: impl ToString) -> Limit {
    Limit {
        key: key.to_string(),
        bound,
        value: value.to_string(),
    }
}

/// Every limit `config` sets.
pub(super) fn limits(config: &Config) -> Vec<Limit> {
    let sandbox = &config.sandbox;
    let output = &config.tools.output;
    let agent = &config.agent;
    let ulimit = |value: Option<u64>, wanted: u64| value.unwrap_or(wanted);
    let nofile = ulimit(sandbox.nofile, Ulimits::WANTED.nofile);
    let nproc = ulimit(sandbox.nproc, Ulimits::WANTED.nproc);
    let mut all = vec![
        limit(
            "sandbox.memory",
            memory_bytes(&sandbox.memory).map_or(NONE, u128::from),
            &sandbox.memory,
        ),
        // Refusing a run whose limits cannot hold is the tighter setting.
        limit(
            "sandbox.strict_limits",
            if sandbox.strict_limits { 1 } else { 2 },
            sandbox.strict_limits,
        ),
        limit(
            "sandbox.pids_limit",
            zero_is_none(sandbox.pids_limit.into()),
            sandbox.pids_limit,
        ),
        limit(
            "sandbox.disk_budget",
            ah_sandbox::disk::parse_size(&sandbox.disk_budget).map_or(NONE, u128::from),
            &sandbox.disk_budget,
        ),
        limit("sandbox.nofile", nofile.into(), nofile),
        limit("sandbox.nproc", nproc.into(), nproc),
        limit("tools.output.read", output.read as u128, output.read),
        limit("tools.output.bash", output.bash as u128, output.bash),
        limit(
            "tools.output.bash_lines",
            output.bash_lines as u128,
            output.bash_lines,
        ),
        limit("tools.output.edit", output.edit as u128, output.edit),
        limit("tools.output.write", output.write as u128, output.write),
        limit(
            "agent.max_tools",
            agent.max_tools.map_or(NONE, u128::from),
            agent
                .max_tools
                .map_or("none".to_string(), |n| n.to_string()),
        ),
        // A window of 0 turns loop detection off; one of 1 finds nothing.
        limit(
            "agent.loop_window",
            match agent.loop_window {
                0 | 1 => NONE,
                n => n as u128,
            },
            agent.loop_window,
        ),
        limit(
            "agent.max_artifact_size",
            agent.max_artifact_size.into(),
            agent.max_artifact_size,
        ),
        limit(
            "work.max_rounds",
            config.work.max_rounds.into(),
            config.work.max_rounds,
        ),
    ];
    for (name, server) in &config.mcp {
        let startup = server.startup_timeout();
        let call = server.timeout(config);
        all.push(limit(
            &format!("mcp.{name}.startup_timeout"),
            startup.into(),
            startup,
        ));
        all.push(limit(&format!("mcp.{name}.timeout"), call.into(), call));
    }
    all
}

/// The keys of the limits the command line gave `args` (before the
/// configuration fills the rest in): theirs win over every file.
pub(super) fn given(args: &RunOptions) -> Vec<&'static str> {
    let flags = args.given;
    let mut keys: Vec<&'static str> = [
        ("sandbox.memory", flags.memory),
        ("sandbox.pids_limit", flags.pids_limit),
        ("sandbox.disk_budget", args.sandbox.disk_budget.is_some()),
        ("sandbox.strict_limits", args.sandbox.strict_limits),
        ("agent.max_tools", args.max_tools.is_some()),
        ("agent.loop_window", flags.loop_window),
        ("agent.max_artifact_size", flags.max_artifact_size),
    ]
    .into_iter()
    .filter_map(|(key, given)| given.then_some(key))
    .collect();
    keys.extend(args.output_limits.iter().map(|(tool, _)| match tool {
        OutputLimit::Read => "tools.output.read",
        OutputLimit::Bash => "tools.output.bash",
        OutputLimit::BashLines => "tools.output.bash_lines",
        OutputLimit::Edit => "tools.output.edit",
        OutputLimit::Write => "tools.output.write",
    }));
    keys.extend(args.sandbox.ulimits.iter().map(|(kind, _)| match kind {
        UlimitKind::Nofile => "sandbox.nofile",
        UlimitKind::Nproc => "sandbox.nproc",
    }));
    keys
}

/// 0 sets no limit (podman's `--pids-limit`).
fn zero_is_none(n: u128) -> u128 {
    if n == 0 { NONE } else { n }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_limit_of_the_defaults_is_read() {
        let all = limits(&Config::default());
        let memory = all.iter().find(|l| l.key == "sandbox.memory").unwrap();
        assert_eq!((memory.bound, memory.value.as_str()), (4 << 30, "4g"));
        let tools = all.iter().find(|l| l.key == "agent.max_tools").unwrap();
        assert_eq!(tools.bound, NONE);
        assert!(all.iter().all(|l| l.bound > 0), "no limit reads as 0");
    }
}
