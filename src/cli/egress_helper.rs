//! The hidden subcommands ah runs inside its own sandbox (`ah
//! __egress-listen`, `ah __sandbox-agent`, and on the host `ah
//! __sandbox-cleanup`; see `ah_core::sandbox::helper`):
//! recognised before the arguments are parsed, their end said on stderr
//! and turned into an exit code.

use std::ffi::OsString;

use ah_core::sandbox::{Helped, helper};

/// The exit code of the hidden subcommand `args` name; `None` when they
/// name none.
pub(super) fn sandbox_helper(args: impl Iterator<Item = OsString>) -> Option<i32> {
    Some(match helper(args)? {
        Helped::Done => super::EXIT_OK,
        Helped::Exit(code) => code,
        Helped::Usage(usage) => {
            eprintln!("ah: usage: {usage}");
            super::EXIT_USAGE
        }
        Helped::Failed(why) => {
            eprintln!("ah: {why}");
            super::EXIT_ERROR
        }
    })
}
