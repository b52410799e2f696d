//! The session commands: `ah sessions`, `ah scan`, `ah tree`,
//! `ah branches`, `ah checkout @N`, `ah branch rm @N`, `ah diff @A @B`,
//! `ah show @N`, `ah usage`. Messages are named `@N` by their `seq`.
//! Everything model-written goes through `terminal_safe` before it is
//! printed.

mod manage;
mod summary;
mod view;

use std::path::Path;

use anyhow::Result;
use clap::Subcommand;

use super::args::SessionArgs;
use ah_core::cost::Prices;
use ah_core::run::resolve_project;
use ah_core::sessions;

/// The session subcommands (flattened into `ah`'s own).
#[derive(Debug, Subcommand)]
pub(crate) enum SessionCommand {
    /// List the project's sessions, newest first: id, created, messages,
    /// tokens in/out, name and first prompt.
    Sessions {
        /// One JSON array of sessions on stdout.
        #[arg(long)]
        json: bool,
    },
    /// The current branch, root to head: one line per message.
    Scan {
        /// One JSON array of messages on stdout.
        #[arg(long)]
        json: bool,
    },
    /// The whole conversation tree: branch points, tips and the head (`>`).
    Tree,
    /// The ends of the branches: message count on the path and last text.
    Branches,
    /// Make @N the head: the next prompt continues from it, and the next
    /// run's files start from that point.
    Checkout {
        /// The message, as @N or N.
        #[arg(value_parser = parse_at)]
        at: i64,
    },
    /// Manage branches.
    Branch {
        #[command(subcommand)]
        action: BranchAction,
    },
    /// Two messages' common ancestor and what each branch adds after it.
    Diff {
        /// One message, as @N or N.
        #[arg(value_parser = parse_at)]
        a: i64,
        /// The other message.
        #[arg(value_parser = parse_at)]
        b: i64,
    },
    /// One message in full: metadata, every block, whole tool outputs.
    Show {
        /// The message, as @N or N.
        #[arg(value_parser = parse_at)]
        at: i64,
    },
    /// Tokens in and out by model for the session, and what they cost.
    Usage {
        /// Over every session of the project.
        #[arg(long)]
        all: bool,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum BranchAction {
    /// Remove @N and everything after it (blocks and events too).
    Rm {
        /// The first message of the branch, as @N or N.
        #[arg(value_parser = parse_at)]
        at: i64,
        /// Also when the head is in the branch: it moves to @N's parent.
        #[arg(long)]
        force: bool,
    },
}

/// Runs one session command; `overrides` are the `-c` settings (`ah usage`
/// reads the prices).
pub(super) fn run(
    project: Option<&Path>,
    which: &SessionArgs,
    overrides: &[String],
    command: SessionCommand,
) -> Result<i32> {
    let project = resolve_project(project)?;
    let open = || sessions::open(&project, &which.choice());
    let prices = || Prices::load(&project, overrides);
    match command {
        SessionCommand::Sessions { json } => manage::sessions(&project, json),
        SessionCommand::Usage { all: true } => manage::usage_all(&project, &prices()?),
        SessionCommand::Usage { all: false } => manage::usage(&open()?, &prices()?),
        SessionCommand::Scan { json } => view::scan(&open()?, json),
        SessionCommand::Tree => view::tree(&open()?),
        SessionCommand::Branches => view::branches(&open()?),
        SessionCommand::Diff { a, b } => view::diff(&open()?, a, b),
        SessionCommand::Show { at } => view::show(&open()?, at),
        SessionCommand::Checkout { at } => manage::checkout(&open()?, at),
        SessionCommand::Branch {
            action: BranchAction::Rm { at, force },
        } => manage::branch_rm(&mut open()?, at, force),
    }
}

/// `@N` or `N` → N.
fn parse_at(text: &str) -> Result<i64, String> {
    let digits = text.strip_prefix('@').unwrap_or(text);
    digits
        .parse::<i64>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| {
            format!("{text:?} is not a message: write @N, e.g. @3 (`ah scan` numbers them)")
        })
}
