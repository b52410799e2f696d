//! The hidden subcommands ah runs inside its own sandbox: `ah
//! __egress-listen` hands the egress proxy's listening port to the host
//! (see `ah_sandbox::egress::handoff`), and `ah __sandbox-agent` is the
//! command channel's agent (see `ah_sandbox::channel::agent`).

use std::ffi::OsString;
use std::path::Path;

use ah_sandbox::channel::agent;
use ah_sandbox::egress::handoff::{LISTEN_COMMAND, hand_over};

/// `ah __egress-listen SOCKET PORT` and `ah __sandbox-agent`, which the
/// podman backend runs inside the sandbox: not commands of ah's interface
/// (no help, no completion), so they are recognised before the arguments
/// are parsed. `None` when the arguments are anything else.
pub(super) fn sandbox_helper(args: impl Iterator<Item = OsString>) -> Option<i32> {
    let args: Vec<OsString> = args.skip(1).collect();
    if args.first()? == agent::COMMAND {
        if args.len() != 1 {
            eprintln!(
                "ah: usage: ah {} (run by ah inside its sandbox)",
                agent::COMMAND
            );
            return Some(super::EXIT_USAGE);
        }
        return Some(agent::main());
    }
    if args.first()? != LISTEN_COMMAND {
        return None;
    }
    let port = args
        .get(2)
        .and_then(|p| p.to_str())
        .and_then(|p| p.parse().ok());
    let (Some(socket), Some(port), 3) = (args.get(1), port, args.len()) else {
        eprintln!("ah: usage: ah {LISTEN_COMMAND} SOCKET PORT (run by ah inside its sandbox)");
        return Some(super::EXIT_USAGE);
    };
    match hand_over(Path::new(socket), port) {
        Ok(()) => Some(super::EXIT_OK),
        Err(err) => {
            eprintln!("ah: could not hand the proxy port to the host: {err}");
            Some(super::EXIT_ERROR)
        }
    }
}
