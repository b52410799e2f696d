//! Puts the configuration under the command line: every run setting the
//! user did not give as a flag takes its configured value. Flags that can be
//! repeated (`--output-limit`, `--ulimit`) keep their place on top: the
//! configured values go first, so a flag for the same key wins.

use super::Config;
use crate::run::{OutputLimit, RunOptions, UlimitKind};

/// Fills `args` from `config` wherever the user gave no value.
pub fn fill(args: &mut RunOptions, config: &Config) {
    let given = args.given;
    if !given.backend {
        args.backend = config.sandbox.engine.unwrap_or(config.backend);
    }
    args.image
        .get_or_insert_with(|| config.sandbox.image.clone());
    args.model.get_or_insert_with(|| config.model.clone());
    if args.review.is_none() {
        args.review = config.review.mode;
    }
    if args.max_tools.is_none() {
        args.max_tools = config.agent.max_tools;
    }
    if !given.loop_window {
        args.loop_window = config.agent.loop_window;
    }
    if !given.compact_reserve {
        args.compact_reserve = config.agent.compact_reserve;
    }
    if !given.max_artifact_size {
        args.max_artifact_size = config.agent.max_artifact_size;
    }
    args.bash_timeout.get_or_insert(config.tools.bash_timeout);
    let output = &config.tools.output;
    let mut limits = vec![
        (OutputLimit::Read, output.read),
        (OutputLimit::Bash, output.bash),
        (OutputLimit::BashLines, output.bash_lines),
        (OutputLimit::Edit, output.edit),
        (OutputLimit::Write, output.write),
    ];
    limits.append(&mut args.output_limits);
    args.output_limits = limits;

    let sandbox = &mut args.sandbox;
    if sandbox.runtime.is_none() {
        sandbox.runtime = config.sandbox.runtime.clone();
    }
    if !given.memory {
        sandbox.memory = config.sandbox.memory.clone();
    }
    if sandbox.disk_budget.is_none() {
        sandbox.disk_budget = ah_sandbox::disk::parse_size(&config.sandbox.disk_budget).ok();
    }
    if !given.pids_limit {
        sandbox.pids_limit = config.sandbox.pids_limit;
    }
    sandbox.cleanup = config.sandbox.cleanup;
    // `--strict-limits` can only tighten: a file cannot turn it off.
    sandbox.strict_limits |= config.sandbox.strict_limits;
    let mut ulimits: Vec<(UlimitKind, u64)> = [
        config.sandbox.nofile.map(|n| (UlimitKind::Nofile, n)),
        config.sandbox.nproc.map(|n| (UlimitKind::Nproc, n)),
    ]
    .into_iter()
    .flatten()
    .collect();
    ulimits.append(&mut sandbox.ulimits);
    sandbox.ulimits = ulimits;
    // The network settings mean something only in the podman sandbox; the
    // same flags are refused with `--backend none`, configured values are
    // not (they are the user's defaults for sandboxed runs).
    if args.backend.is_podman() {
        if sandbox.network.is_none() {
            sandbox.network = config.network.mode;
        }
        let mut allow = config.network.allow.clone();
        allow.append(&mut sandbox.allow_hosts);
        sandbox.allow_hosts = allow;
        let mut env = config.sandbox.env.clone();
        env.append(&mut sandbox.env);
        sandbox.env = env;
    }
    args.config = config.clone();
}
