//! Options may come before a subcommand: `ah -C ~/repo tree` is `ah tree -C
//! ~/repo`, as `git -C DIR log` is. Clap alone reads options before a
//! subcommand as the run's and, since a run takes a prompt, the
//! subcommand's name as that prompt, which starts a paid run instead of the
//! command. So before clap sees them, the options in front of a subcommand
//! are moved behind its name (behind `runs prune`, `branch rm`, `image
//! build` for the nested ones), where they mean what they mean after it: a
//! subcommand's own option or a global one, and clap refuses any other as
//! for that subcommand. A task whose whole text is a command's name goes
//! after `--` (`ah -- tree`), which this leaves alone.

use std::ffi::OsString;

use clap::{Arg, Command};

/// The command line clap is to parse, and the subcommand its first
/// positional word names, if it names one (the options before it, if any,
/// moved behind it).
#[derive(Debug, PartialEq, Eq)]
pub struct Reordered {
    pub args: Vec<OsString>,
    pub subcommand: Option<String>,
}

/// `args` (the program's name first) with the options before a subcommand
/// moved behind its name. `cmd` must be built ([`Command::build`]), so
/// that it knows how many values each option takes. Anything it cannot
/// read with certainty (an unknown option, a positional that is not a
/// subcommand, `--`) leaves `args` as they are, for clap to judge.
pub fn options_after_subcommand(cmd: &Command, args: Vec<OsString>) -> Reordered {
    let unchanged = |args| Reordered {
        args,
        subcommand: None,
    };
    let first = |args: Vec<OsString>, sub: &Command| Reordered {
        args,
        subcommand: Some(sub.get_name().to_string()),
    };
    let mut at = 1;
    let found = loop {
        let Some(token) = args.get(at).and_then(|arg| arg.to_str()) else {
            return unchanged(args);
        };
        if token == "--" {
            return unchanged(args);
        }
        let taken = if let Some(long) = token.strip_prefix("--") {
            long_option(cmd, long)
        } else if token.len() > 1
            && let Some(shorts) = token.strip_prefix('-')
        {
            short_options(cmd, shorts)
        } else {
            match cmd.find_subcommand(token) {
                Some(sub) if at > 1 => break sub,
                Some(sub) => return first(args, sub),
                None => return unchanged(args),
            }
        };
        match taken {
            Some(values) => at += 1 + values,
            None => return unchanged(args),
        }
    };
    // The nested subcommand right after it, if any (`runs prune`).
    let mut leaf = (at, found);
    while let Some(next) = args.get(leaf.0 + 1).and_then(|arg| arg.to_str())
        && let Some(sub) = leaf.1.find_subcommand(next)
    {
        leaf = (leaf.0 + 1, sub);
    }
    let name = found.get_name().to_string();
    let mut reordered = Vec::with_capacity(args.len());
    reordered.extend_from_slice(&args[..1]);
    reordered.extend_from_slice(&args[at..=leaf.0]);
    reordered.extend_from_slice(&args[1..at]);
    reordered.extend_from_slice(&args[leaf.0 + 1..]);
    Reordered {
        args: reordered,
        subcommand: Some(name),
    }
}

/// The tokens after `--NAME` or `--NAME=VALUE` that the option takes.
fn long_option(cmd: &Command, option: &str) -> Option<usize> {
    let (name, inline) = match option.split_once('=') {
        Some((name, _)) => (name, true),
        None => (option, false),
    };
    let arg = cmd
        .get_arguments()
        .find(|arg| arg.get_long() == Some(name))?;
    match values(arg)? {
        0 if inline => None,
        0 => Some(0),
        _ if inline => Some(0),
        _ => Some(1),
    }
}

/// The tokens after a cluster of short options (`-n`, `-nC DIR`, `-CDIR`)
/// that it takes: the first option taking a value takes the rest of the
/// cluster, or the next token when nothing is left.
fn short_options(cmd: &Command, cluster: &str) -> Option<usize> {
    for (at, short) in cluster.char_indices() {
        let arg = cmd
            .get_arguments()
            .find(|arg| arg.get_short() == Some(short))?;
        if values(arg)? == 1 {
            let rest = &cluster[at + short.len_utf8()..];
            return Some(usize::from(rest.is_empty()));
        }
    }
    Some(0)
}

/// How many values one occurrence of `arg` takes: 0 or 1; `None` for any
/// other count, which this does not try to read.
fn values(arg: &Arg) -> Option<usize> {
    if !arg.get_action().takes_values() {
        return Some(0);
    }
    let range = arg.get_num_args()?;
    (range.min_values() == 1 && range.max_values() == 1).then_some(1)
}

#[cfg(test)]
mod tests;
