//! The attempts of one task (`ah -N`, `ah work -N`) as a person follows
//! them: their events interleave, so no attempt's text or tool output is
//! shown as it streams. At a terminal each attempt has one status line,
//! redrawn in place (what it does now, its turn and tool calls, how long it
//! has run), and the milestones (a check's result, an error, the end) are
//! printed above them; piped, each milestone is a plain line naming its
//! attempt. The first event of an attempt's run (`attempt_start`) says
//! which attempt it is; events of a run it never named are not shown here.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::time::Duration;

use console::style;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::display::key_param;
use ah_core::event::{Event, RunEvent};
use ah_core::present::{count, terminal_safe};

/// The attempts seen so far and, at a terminal, their status lines.
pub(super) struct AttemptsView {
    /// Draws the status lines on stderr, when it is a terminal, until
    /// every attempt has ended.
    multi: Option<MultiProgress>,
    attempts: HashMap<String, Attempt>,
}

/// One attempt's line.
struct Attempt {
    /// From 1, and `attempt 2/4`.
    number: usize,
    name: String,
    bar: Option<ProgressBar>,
    turn: u32,
    calls: u32,
    /// What its run's end said (files, lines), once it ended.
    ended: Option<String>,
    /// Its last line, once the attempt is over.
    last: Option<String>,
}

impl AttemptsView {
    /// A view that draws status lines when stderr is a terminal.
    pub(super) fn new() -> AttemptsView {
        let multi = std::io::stderr()
            .is_terminal()
            .then(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr()));
        AttemptsView {
            multi,
            attempts: HashMap::new(),
        }
    }

    /// Takes `shown` when it is an attempt's: `false` for another run's
    /// event, which the caller shows as usual.
    pub(super) fn show(&mut self, shown: &RunEvent<'_>) -> bool {
        if let Event::AttemptStart { attempt, of } = shown.event {
            let name = format!("attempt {attempt}/{of}");
            let bar = self.multi.as_ref().map(|multi| status_bar(multi, &name));
            self.say(&format!("{name}: run {}", shown.run));
            let line = Attempt {
                number: *attempt,
                name,
                bar,
                turn: 0,
                calls: 0,
                ended: None,
                last: None,
            };
            self.attempts.insert(shown.run.to_string(), line);
            return true;
        }
        let Some(attempt) = self.attempts.get_mut(shown.run) else {
            return false;
        };
        if let Some(line) = attempt.follow(shown.event) {
            let line = format!("{}: {line}", attempt.name);
            self.say(&line);
        }
        if self.attempts.values().all(|a| a.last.is_some()) {
            self.finish();
        }
        true
    }

    /// Writes `line` on stderr above the status lines.
    pub(super) fn say(&self, line: &str) {
        self.suspend(|| eprintln!("{line}"));
    }

    /// Runs `write` with the status lines out of its way.
    pub(super) fn suspend<R>(&self, write: impl FnOnce() -> R) -> R {
        match &self.multi {
            Some(multi) => multi.suspend(write),
            None => write(),
        }
    }

    /// Ends the status lines (the attempts are over: what follows is the
    /// comparison and the review): they are drawn no more, and each
    /// attempt's last line stays on the terminal, in the attempts' order.
    pub(super) fn finish(&mut self) {
        let Some(multi) = self.multi.take() else {
            return;
        };
        // Nothing draws on the terminal from here on.
        let _ = multi.clear();
        multi.set_draw_target(ProgressDrawTarget::hidden());
        let mut attempts: Vec<&mut Attempt> = self.attempts.values_mut().collect();
        attempts.sort_by_key(|a| a.number);
        for attempt in attempts {
            let last = match (&attempt.last, &attempt.bar) {
                (Some(last), _) => last.clone(),
                (None, Some(bar)) => format!("stopped while {}", bar.message()),
                (None, None) => "stopped".to_string(),
            };
            eprintln!("{}  {last}", style(&attempt.name).bold());
            attempt.bar = None;
        }
    }
}

impl Drop for AttemptsView {
    fn drop(&mut self) {
        self.finish();
    }
}

impl Attempt {
    /// Follows `event` on the status line; the milestone it is worth a
    /// line of its own for, if it is one.
    fn follow(&mut self, event: &Event) -> Option<String> {
        let (status, milestone) = match event {
            Event::TurnStart { turn } => {
                self.turn = *turn;
                (Some("waiting for the model".to_string()), None)
            }
            Event::ToolCallStart { name, input, .. } => {
                self.calls += 1;
                let param = key_param(name, input);
                (Some(format!("{} {param}", terminal_safe(name))), None)
            }
            Event::CompactionStart { .. } => (Some("compacting".to_string()), None),
            Event::PhaseStart { phase, round, .. } => {
                let line = format!("{} (round {round})", phase.as_str());
                (Some(line.clone()), Some(line))
            }
            Event::Verdict { decision, .. } => {
                (None, Some(format!("verdict {}", decision.as_str())))
            }
            Event::Error { message } => (None, Some(format!("error: {}", terminal_safe(message)))),
            Event::AgentEnd { .. } => (Some("saving its patch".to_string()), None),
            Event::CheckEnd {
                command,
                exit_code,
                duration_ms,
                log,
                ..
            } => {
                let how = match exit_code {
                    Some(0) => style("passed").green().to_string(),
                    Some(code) => style(format!("failed (exit {code})")).red().to_string(),
                    None => style("did not finish (timeout or error)").red().to_string(),
                };
                let line = format!(
                    "check `{}` {how} in {:.1} s; output in {}",
                    terminal_safe(command),
                    *duration_ms as f64 / 1000.0,
                    terminal_safe(log)
                );
                (Some(format!("check {how}")), Some(line))
            }
            Event::RunEnd {
                duration_ms,
                files,
                added,
                removed,
                ..
            } => {
                self.ended = Some(format!(
                    "{:.1} s, {}, {} +{added} −{removed}",
                    *duration_ms as f64 / 1000.0,
                    count(self.calls, "tool call", "tool calls"),
                    count(*files, "file", "files"),
                ));
                (Some("patch saved".to_string()), None)
            }
            Event::AttemptEnd { status, error } => {
                let mut line = match &self.ended {
                    Some(ended) => format!("{status}: {ended}"),
                    None => status.clone(),
                };
                if let Some(error) = error {
                    line = format!("{line}: {}", terminal_safe(error));
                }
                self.last = Some(line.clone());
                match &self.bar {
                    // Its status line says it.
                    Some(bar) => {
                        bar.finish_with_message(line);
                        (None, None)
                    }
                    None => (None, Some(line)),
                }
            }
            _ => (None, None),
        };
        if let (Some(status), Some(bar)) = (status, &self.bar) {
            let turn = match self.turn {
                0 => String::new(),
                turn => format!("turn {turn} · "),
            };
            bar.set_message(format!("{turn}{status}"));
        }
        milestone
    }
}

/// A status line under `multi`, turning until its attempt ends.
fn status_bar(multi: &MultiProgress, name: &str) -> ProgressBar {
    let bar = multi.add(ProgressBar::new_spinner());
    if let Ok(look) = ProgressStyle::with_template("{prefix} {spinner} {wide_msg} {elapsed}") {
        bar.set_style(look);
    }
    bar.set_prefix(style(name).bold().to_string());
    bar.set_message("starting");
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}
