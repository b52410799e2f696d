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
pub(super) struct Reordered {
    pub args: Vec<OsString>,
    pub subcommand: Option<String>,
}

/// `args` (the program's name first) with the options before a subcommand
/// moved behind its name. `cmd` must be built ([`Command::build`]), so
/// that it knows how many values each option takes. Anything it cannot
/// read with certainty (an unknown option, a positional that is not a
/// subcommand, `--`) leaves `args` as they are, for clap to judge.
pub(super) fn options_after_subcommand(cmd: &Command, args: Vec<OsString>) -> Reordered {
    let unchanged = |args| Reordered {
        args,
        subcommand: None,
    };
    let mut at = 1;
    // Where each option before the subcommand starts.
    let mut starts = Vec::new();
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
                Some(sub) => break sub,
                None => return unchanged(args),
            }
        };
        match taken {
            Some(values) => {
                starts.push(at);
                at += 1 + values;
            }
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
    let ends = starts.iter().skip(1).copied().chain([at]);
    for (start, end) in starts.iter().copied().zip(ends) {
        if !ignored_by(cmd, leaf.1, &args[start]) {
            reordered.extend_from_slice(&args[start..end]);
        }
    }
    // After it too, up to a `--`.
    let mut tail = args[leaf.0 + 1..].iter();
    while let Some(token) = tail.next() {
        if token == "--" {
            reordered.push(token.clone());
            reordered.extend(tail.by_ref().cloned());
        } else if ignored_by(cmd, leaf.1, token) {
            if token == "--backend" || token == "--engine" {
                tail.next();
            }
        } else {
            reordered.push(token.clone());
        }
    }
    Reordered {
        args: reordered,
        subcommand: Some(name),
    }
}

/// Run options typed before any command out of habit (`ah -C repo --backend
/// none runs`): where the command has no use for one, it is dropped rather
/// than refused, as the run it would configure does not happen.
const ANY_COMMAND: [&str; 3] = ["new", "engine", "backend"];

/// Whether the option `token` (`-n`, `--new`, `--backend`, `--backend=X`)
/// is one of [`ANY_COMMAND`] that `sub` does not take.
fn ignored_by(cmd: &Command, sub: &Command, token: &OsString) -> bool {
    let Some(token) = token.to_str() else {
        return false;
    };
    let long = match token.strip_prefix("--") {
        Some(long) => long.split_once('=').map_or(long, |(name, _)| name),
        None => {
            let mut shorts = token.chars().skip(1);
            let (Some(short), None) = (shorts.next(), shorts.next()) else {
                return false;
            };
            let Some(long) = cmd
                .get_arguments()
                .find(|arg| arg.get_short() == Some(short))
                .and_then(Arg::get_long)
            else {
                return false;
            };
            long
        }
    };
    ANY_COMMAND.contains(&long) && !sub.get_arguments().any(|arg| is_named(arg, long))
}

/// Whether `--name` is `arg`'s long name or one of its aliases.
fn is_named(arg: &Arg, name: &str) -> bool {
    arg.get_long() == Some(name)
        || arg
            .get_all_aliases()
            .is_some_and(|aliases| aliases.contains(&name))
}

/// The tokens after `--NAME` or `--NAME=VALUE` that the option takes.
fn long_option(cmd: &Command, option: &str) -> Option<usize> {
    let (name, inline) = match option.split_once('=') {
        Some((name, _)) => (name, true),
        None => (option, false),
    };
    let arg = cmd.get_arguments().find(|arg| is_named(arg, name))?;
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
