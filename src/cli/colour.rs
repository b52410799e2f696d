//! Whether ah colours what it writes: `--color auto|always|never` and the
//! `NO_COLOR` convention, settled once at the start for every coloured
//! line (console's styles on stdout and on stderr, which progress bars and
//! prompts use too, and the review's view of the patch, which follows
//! stdout's answer as git's pager does).
//!
//! `never` writes no escape sequence; `always` colours even into a pipe or
//! a file (and wins over `NO_COLOR`, as the convention wants of an explicit
//! flag); `auto` colours a stream only when it is a terminal whose `TERM` is
//! not `dumb`, and not at all when `NO_COLOR` is set to anything but the
//! empty string (`CLICOLOR=0` also turns it off, `CLICOLOR_FORCE` on, as
//! before).

use std::io::IsTerminal;

/// When to colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub(crate) enum ColorWhen {
    /// Only a terminal, unless `NO_COLOR` is set.
    #[default]
    Auto,
    Always,
    Never,
}

/// Settles colours for the whole process (`--color` is global: clap
/// hands a value given after any subcommand to the top level).
pub(super) fn settle(when: ColorWhen) {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let auto = |terminal: bool| {
        if var("NO_COLOR").is_some() {
            return false;
        }
        if var("CLICOLOR_FORCE").is_some_and(|v| v != "0") {
            return true;
        }
        terminal
            && var("TERM").as_deref() != Some("dumb")
            && var("CLICOLOR").as_deref() != Some("0")
    };
    let (stdout, stderr) = match when {
        ColorWhen::Always => (true, true),
        ColorWhen::Never => (false, false),
        ColorWhen::Auto => (
            auto(std::io::stdout().is_terminal()),
            auto(std::io::stderr().is_terminal()),
        ),
    };
    console::set_colors_enabled(stdout);
    console::set_colors_enabled_stderr(stderr);
}
