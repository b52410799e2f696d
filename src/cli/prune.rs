//! `ah runs prune` at the terminal: the age it takes, and what went and
//! the bytes freed. Which runs go (old ones, with the shadow repos a forked
//! conversation would restore its files from; never a live run) is
//! `ah_core::runs::prune`'s to decide.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;

use super::{EXIT_ERROR, EXIT_OK};
use ah_core::present::{count, size};
use ah_core::run::resolve_project;
use ah_core::runs::{self, PruneOptions};

/// The age `--older-than` takes by default.
pub(super) const DEFAULT_AGE: &str = "14d";

pub(super) fn runs_prune(
    project: Option<&Path>,
    older_than: Duration,
    keep: usize,
    dry_run: bool,
) -> Result<i32> {
    let project = resolve_project(project)?;
    let options = PruneOptions {
        older_than,
        keep,
        dry_run,
    };
    let report = runs::prune(&project, options)?;
    let verb = if options.dry_run {
        "would remove"
    } else {
        "removed"
    };
    for run in &report.removed {
        println!("{verb} run {}  {}", run.id, size(run.bytes));
    }
    for id in &report.live {
        println!("kept run {id}: it is live (an ah process is running it, or it is starting)");
    }
    for (id, why) in &report.failed {
        println!("could not remove run {id}: {why}");
    }
    let freed = if options.dry_run {
        "would free"
    } else {
        "freed"
    };
    println!(
        "{} {}, {freed} {}; {} kept",
        verb,
        count(report.removed.len(), "run", "runs"),
        size(report.bytes()),
        report.kept + report.live.len() + report.failed.len(),
    );
    Ok(if report.failed.is_empty() {
        EXIT_OK
    } else {
        EXIT_ERROR
    })
}

/// Parses an age such as `14d`, `12h`, `30m`, `90s` or `2w`.
pub(super) fn parse_age(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("{text:?}: expected a number and a unit, e.g. 14d, 12h, 30m"))?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 60 * 60,
        "d" => 24 * 60 * 60,
        "w" => 7 * 24 * 60 * 60,
        other => {
            return Err(format!(
                "{text:?}: unknown unit {other:?}; use s, m, h, d or w (e.g. 14d)"
            ));
        }
    };
    number
        .checked_mul(seconds)
        .map(Duration::from_secs)
        .ok_or_else(|| format!("{text:?} is too long an age"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_take_a_number_and_a_unit() {
        assert_eq!(parse_age("14d"), Ok(Duration::from_secs(14 * 86_400)));
        assert_eq!(parse_age("2w"), Ok(Duration::from_secs(14 * 86_400)));
        assert_eq!(parse_age("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_age("90m"), Ok(Duration::from_secs(5400)));
        for bad in ["", "d", "14", "14y", "-1d", "99999999999999999999d"] {
            assert!(parse_age(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sizes_are_shown_in_binary_units() {
        assert_eq!(size(0), "0 B");
        assert_eq!(size(1023), "1023 B");
        assert_eq!(size(1536), "1.5 KiB");
        assert_eq!(size(5 * 1024 * 1024), "5.0 MiB");
    }
}
