//! The hidden subcommands ah runs for itself: inside its own sandbox, `ah
//! __egress-listen SOCKET PORT` hands the egress proxy's listening port to
//! the host (see `ah_sandbox::egress::handoff`), `ah __sandbox-agent`
//! is the command channel's agent (see `ah_sandbox::channel::agent`) and
//! `ah __sandbox-init` the local container's PID 1 that starts it (see
//! `ah_sandbox::channel::init`); on
//! the host, `ah __sandbox-cleanup` removes a finished run's sandbox after
//! ah has exited (see `ah_sandbox::cleanup`). They
//! are not commands of ah's interface (no help, no completion), so the
//! front-end asks about them before it parses the arguments.

use std::ffi::OsString;
use std::path::Path;

use ah_record::rundir::sweep;
use ah_sandbox::channel::{agent, init};
use ah_sandbox::cleanup;
use ah_sandbox::egress::handoff::{LISTEN_COMMAND, hand_over};

/// How a hidden subcommand ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Helped {
    /// It did its work.
    Done,
    /// The command channel's agent ended with this exit code.
    Exit(i32),
    /// The arguments were wrong: the usage, in words.
    Usage(String),
    /// It failed: why.
    Failed(String),
}

/// Runs the hidden subcommand `args` (the program's arguments, its name
/// first) name; `None` when they name none. A program that calls it
/// answers the hidden subcommands, so from then on its own executable is
/// what a run starts as the command channel's agent, whatever the file is
/// named ([`agent::answered_here`]).
pub fn helper(args: impl Iterator<Item = OsString>) -> Option<Helped> {
    agent::answered_here();
    let args: Vec<OsString> = args.skip(1).collect();
    if args.first()? == cleanup::COMMAND {
        return Some(match cleanup::Job::from_args(&args[1..]) {
            Ok(job) => Helped::Exit(job.run(sweep::leftovers)),
            Err(usage) => Helped::Usage(usage),
        });
    }
    if args.first()? == init::COMMAND {
        return Some(match args.len() {
            1 => Helped::Exit(init::main()),
            _ => Helped::Usage(format!(
                "ah {} (the init of ah's sandbox, run by podman)",
                init::COMMAND
            )),
        });
    }
    if args.first()? == agent::COMMAND {
        let changes = match (args.len(), args.get(1)) {
            (1, _) => false,
            (2, Some(flag)) if flag == agent::CHANGES => true,
            _ => {
                return Some(Helped::Usage(format!(
                    "ah {} [{}] (run by ah inside its sandbox)",
                    agent::COMMAND,
                    agent::CHANGES
                )));
            }
        };
        return Some(Helped::Exit(agent::main(changes)));
    }
    if args.first()? != LISTEN_COMMAND {
        return None;
    }
    let port = args
        .get(2)
        .and_then(|p| p.to_str())
        .and_then(|p| p.parse().ok());
    let (Some(socket), Some(port), 3) = (args.get(1), port, args.len()) else {
        return Some(Helped::Usage(format!(
            "ah {LISTEN_COMMAND} SOCKET PORT (run by ah inside its sandbox)"
        )));
    };
    Some(match hand_over(Path::new(socket), port) {
        Ok(()) => Helped::Done,
        Err(err) => Helped::Failed(format!("could not hand the proxy port to the host: {err}")),
    })
}
