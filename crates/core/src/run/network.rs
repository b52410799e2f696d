//! The sandbox's network and environment, from the policy files and the
//! command line: which mode, what the proxy may reach, which host variables
//! go in, and what the user is told about it on every run.

use anyhow::Result;

use super::{Front, SandboxOptions, UsageError};
use ah_record::policy::Policy;
use ah_record::rundir::RunDir;
use ah_sandbox::BackendKind;
use ah_sandbox::egress::{Allowlist, NetworkMode};
use ah_sandbox::podman::{PodmanOptions, container_env};

/// The network flags mean something only for the podman backend: the
/// `none` backend runs commands on the host, with the host's network and
/// environment, and must not look restricted.
pub(crate) fn check_backend(backend: BackendKind, args: &SandboxOptions) -> Result<()> {
    if backend == BackendKind::None
        && (args.network.is_some() || !args.allow_hosts.is_empty() || !args.env.is_empty())
    {
        return Err(UsageError::Message(
            "--network, --allow-host and --env apply to the podman sandbox; --backend none runs \
             commands on the host with its network and environment"
                .into(),
        )
        .into());
    }
    Ok(())
}

/// Sets the container's network, allowlist, log and environment, and says
/// what the run may reach.
pub(crate) fn configure_network(
    options: &mut PodmanOptions,
    args: &SandboxOptions,
    policy: &Policy,
    dir: &RunDir,
    front: &mut dyn Front,
) -> Result<()> {
    let mode = args.network.unwrap_or_default();
    let rules = &policy.sandbox().network_allow;
    options.network = mode;
    options.allow = Allowlist::parse(rules)?;
    options.network_log = dir.network_log_path();
    let (env, withheld) = container_env(mode, &policy.sandbox().env, &|name| {
        std::env::var(name).ok()
    });
    options.env = env;
    for held in withheld {
        front.notice(&format!(
            "warning: {} is not passed into the sandbox: {}",
            held.name, held.why
        ));
    }
    match mode {
        NetworkMode::Full => front.notice(
            "warning: --network full: the sandbox can connect anywhere this host can, so \
             whatever it reads can leave it; use --network proxy with --allow-host to limit it",
        ),
        NetworkMode::Proxy if rules.is_empty() => front.notice(
            "note: --network proxy with no allow rule refuses every connection; add \
             --allow-host HOST:PORT or [network] allow",
        ),
        NetworkMode::Proxy => front.notice(&format!(
            "network: proxy to {} (decisions in {})",
            rules.join(", "),
            dir.network_log_path().display()
        )),
        NetworkMode::None if !rules.is_empty() => front.notice(
            "note: [network] allow has rules, but the network is off; --network proxy uses them",
        ),
        NetworkMode::None => {}
    }
    Ok(())
}
