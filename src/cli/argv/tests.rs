//! Where options before a subcommand end up, on ah's own command line.

use clap::CommandFactory;

use super::*;
use crate::cli::args::Cli;

fn reorder(line: &str) -> (String, Option<String>) {
    let mut cmd = Cli::command();
    cmd.build();
    let args = std::iter::once("ah")
        .chain(line.split(' ').filter(|word| !word.is_empty()))
        .map(OsString::from)
        .collect();
    let out = options_after_subcommand(&cmd, args);
    let words: Vec<String> = out
        .args
        .iter()
        .skip(1)
        .map(|arg| arg.to_string_lossy().into_owned())
        .collect();
    (words.join(" "), out.subcommand)
}

#[test]
fn options_before_a_subcommand_move_behind_it() {
    let cases = [
        ("-C repo tree", "tree -C repo", "tree"),
        ("-C repo --backend none runs", "runs -C repo", "runs"),
        (
            "--project=repo -c a=b scan --json",
            "scan --project=repo -c a=b --json",
            "scan",
        ),
        (
            "-Crepo -m haiku compact",
            "compact -Crepo -m haiku",
            "compact",
        ),
        ("-nm haiku work issue.md", "work -nm haiku issue.md", "work"),
        ("-S 01AB show @3", "show -S 01AB @3", "show"),
        (
            "--json --db s.db sessions",
            "sessions --json --db s.db",
            "sessions",
        ),
        (
            "-C repo runs prune --dry-run",
            "runs prune -C repo --dry-run",
            "runs",
        ),
        ("-C repo branch rm @4", "branch rm -C repo @4", "branch"),
        ("--image x image build", "image build --image x", "image"),
        // A value that is a command's name is still the option's value.
        ("-m tree -C tree tree", "tree -m tree -C tree", "tree"),
    ];
    for (line, expected, subcommand) in cases {
        assert_eq!(
            reorder(line),
            (expected.to_string(), Some(subcommand.to_string())),
            "{line}"
        );
    }
}

#[test]
fn prompts_and_anything_unclear_are_left_alone() {
    // The subcommand already comes first.
    for line in ["tree", "runs --dry-run", "show me the tree"] {
        let name = line.split(' ').next().map(str::to_string);
        assert_eq!(reorder(line), (line.to_string(), name), "{line}");
    }
    // Run options a command has no use for are dropped after it too.
    assert_eq!(
        reorder("runs --backend none -n"),
        ("runs".to_string(), Some("runs".to_string()))
    );
    for line in [
        // Prompts: more words, a word that is no command, or after `--`.
        "fix the tree view",
        "-C repo fix tree",
        "-C repo -- tree",
        "-n -- tree",
        "-C repo @3 tree",
        // Options clap is to refuse, or whose values are not known.
        "--nonsense tree",
        "-Z tree",
        "--json=yes tree",
        // A missing value.
        "-C",
    ] {
        assert_eq!(reorder(line), (line.to_string(), None), "{line}");
    }
}
