//! The line that ends a run at the terminal: how long it took, the tokens
//! and what they cost, the steps and violations, the files the patch changes and what the
//! review decided.

use std::time::Duration;

use ah_core::present::count;
use console::style;

/// What the last line of a run says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct RunSummary {
    pub duration: Duration,
    /// Tokens read (cache included) and written by the model calls.
    pub tokens: (u64, u64),
    /// What they cost (`$0.0123`), or why that is unknown.
    pub cost: String,
    pub steps: u32,
    pub violations: usize,
    pub files: usize,
    pub added: u64,
    pub removed: u64,
    /// The review decision (`applied`, `saved`, `aborted`, …).
    pub decision: String,
}

impl RunSummary {
    pub(super) fn line(&self) -> String {
        let parts = [
            format!("{:.1}s", self.duration.as_secs_f64()),
            format!(
                "tokens {} in, {} out",
                short(self.tokens.0),
                short(self.tokens.1)
            ),
            self.cost.clone(),
            count(self.steps, "step", "steps"),
            count(self.violations, "violation", "violations"),
            format!(
                "{} +{} −{}",
                count(self.files, "file", "files"),
                self.added,
                self.removed
            ),
            format!("review: {}", self.decision),
        ];
        format!("{} {}", style("■").bold(), parts.join(" · "))
    }
}

/// A count as people read it: 950, 12.3k, 4.1M.
fn short(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_says_everything_once() {
        console::set_colors_enabled_stderr(false);
        console::set_colors_enabled(false);
        let summary = RunSummary {
            duration: Duration::from_millis(4230),
            tokens: (12_345, 678),
            cost: "$0.0803".to_string(),
            steps: 3,
            violations: 1,
            files: 2,
            added: 10,
            removed: 4,
            decision: "applied".to_string(),
        };
        assert_eq!(
            summary.line(),
            "■ 4.2s · tokens 12.3k in, 678 out · $0.0803 · 3 steps · 1 violation · 2 files +10 −4 · review: applied"
        );
    }

    #[test]
    fn counts_are_short() {
        assert_eq!(short(999), "999");
        assert_eq!(short(1_500), "1.5k");
        assert_eq!(short(2_500_000), "2.5M");
    }
}
