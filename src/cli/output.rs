//! The command line as a run's front-end: events go to the human display
//! (the attempts of a task to their status lines), or with `--json` as one
//! JSON object per line on stdout (nothing else on stdout); the review's
//! lines and question, the image build's progress and the live keys are
//! the terminal's.

use std::io::Write;
use std::sync::Arc;

use console::style;
use serde::Serialize;

use super::attempts_view::AttemptsView;
use super::display::Display;
use super::live::{Asker, Controls, Wiring};
use super::org_view::OrgView;
use super::screen::Screen;
use ah_core::event::{Event, RunEvent};
use ah_core::present::{count, redact, terminal_safe};
use ah_core::run::{Choice, Console, Front, LiveControls, PatchToChoose, ReviewFront, Tone};
use ah_core::sandbox::BuildOptions;

/// The consumer of a run's events.
pub(super) struct Output {
    json: bool,
    display: Display,
    org: OrgView,
    /// The attempts of a task, once the first one started.
    attempts: Option<AttemptsView>,
    /// Asks the user through the live keys, while they run.
    asker: Option<Asker>,
}

impl Output {
    pub(super) fn new(json: bool) -> Output {
        Output {
            json,
            display: Display::new(Screen::new()),
            org: OrgView::default(),
            attempts: None,
            asker: None,
        }
    }

    /// Shows an event of a run: a JSON line, or for a person the agent's
    /// display (an org's agents labelled), a work phase's line or an org's.
    pub(super) fn show(&mut self, shown: &RunEvent<'_>) {
        if self.json {
            json_line(shown);
            return;
        }
        let event = shown.event;
        if matches!(event, Event::AttemptStart { .. }) && self.attempts.is_none() {
            self.attempts = Some(AttemptsView::new());
        }
        if let Some(attempts) = &mut self.attempts
            && attempts.show(shown)
        {
            return;
        }
        if let Some(line) = work_line(event) {
            self.display.line(&line);
            return;
        }
        match event {
            // The question is shown by whoever asks it.
            Event::AskUser { .. } if self.asker.is_some() => return,
            Event::Tick { .. } | Event::Routed { .. } | Event::AskUser { .. } => {}
            Event::OrgEnd { .. } => {}
            _ => {
                if let Some(agent) = shown.agent
                    && let Some(label) = self.org.label_before(agent, event)
                {
                    self.display.text_label(&label);
                }
                self.display.show(event);
                return;
            }
        }
        if let Some(line) = self.org.line(event) {
            self.display.line(&line);
        }
    }

    /// The terminal the display writes to (the live controls share it).
    pub(super) fn screen(&self) -> Arc<Screen> {
        self.display.screen()
    }
}

#[async_trait::async_trait(?Send)]
impl Front for Output {
    fn show(&mut self, event: &RunEvent<'_>) {
        Output::show(self, event);
    }

    async fn ask_user(&mut self, agent: &str, question: &str, later: &str) -> Option<String> {
        let asker = self.asker.as_ref()?;
        let shown = self.org.line(&Event::AskUser {
            agent: agent.to_string(),
            question: question.to_string(),
        })?;
        asker.ask(shown, terminal_safe(later).to_string()).await
    }

    fn notice(&mut self, line: &str) {
        // On stderr in both modes: stdout is the model's text or the JSON
        // events.
        match &self.attempts {
            Some(attempts) => attempts.suspend(|| self.display.line(line)),
            None => self.display.line(line),
        }
    }

    fn console(&self) -> Arc<dyn Console> {
        self.screen()
    }

    fn live(&mut self, controls: LiveControls) -> Option<Box<dyn std::any::Any>> {
        let wiring = Wiring {
            screen: self.screen(),
            stop: controls.stop,
            abort: controls.abort,
            interrupt: controls.interrupt,
            session_db: controls.session_db,
        };
        let controls = Controls::start(self.json, wiring)?;
        self.asker = Some(controls.asker());
        Some(Box::new(controls) as Box<dyn std::any::Any>)
    }

    async fn build_image(&mut self, options: &BuildOptions) -> anyhow::Result<()> {
        super::image_progress::build_with_display(options, self.json).await?;
        Ok(())
    }
}

impl ReviewFront for Output {
    fn choose(&mut self, patch: &PatchToChoose<'_>) -> anyhow::Result<Choice> {
        // The attempts are over once one of them is chosen.
        if let Some(attempts) = &mut self.attempts {
            attempts.finish();
        }
        super::review::choose(patch)
    }

    fn say(&mut self, tone: Tone, lead: &str, rest: &str) {
        // On stderr in both modes, as notices are.
        let line = super::review::line(tone, lead, rest);
        match &self.attempts {
            Some(attempts) => attempts.suspend(|| self.display.line(&line)),
            None => self.display.line(&line),
        }
    }

    fn can_revise(&self) -> bool {
        !self.json && super::review::at_a_terminal()
    }
}

impl Console for Screen {
    fn say(&self, line: &str) {
        Screen::say(self, line);
    }

    fn restore_terminal(&self) {
        super::live::terminal::restore();
    }
}

/// One JSON object on a line of stdout. A closed stdout (a consumer that
/// went away) must not stop the run: the session and the run directory keep
/// everything.
fn json_line(event: &impl Serialize) {
    // A closed stdout (a consumer that went away) must not stop the run: the
    // session and the run directory keep everything.
    if let Ok(line) = serde_json::to_string(event) {
        // A secret has no character JSON escapes: the text is enough.
        // serde escapes control characters, so no line can be forged; bidi
        // and invisible characters stay raw, as JSON is for programs, which
        // must see the exact text (a person reads the human display).
        let line = redact(&line);
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }
}

/// A work phase's event for a person; `None` for any other event.
fn work_line(event: &Event) -> Option<String> {
    Some(match event {
        Event::PhaseStart { phase, round, .. } => format!(
            "{} {} (round {round})",
            style("══").cyan(),
            style(phase.as_str()).cyan().bold()
        ),
        Event::Reminder { phase, .. } => format!(
            "{} the {} phase ended without {}: reminding it once",
            style("!").yellow(),
            phase.as_str(),
            phase.report_name()
        ),
        Event::PhaseEnd {
            phase,
            file: Some(file),
            ..
        } => format!(
            "  {} {} wrote phases/{file}",
            style("✓").green(),
            phase.as_str()
        ),
        Event::PhaseEnd {
            phase, file: None, ..
        } => {
            format!("  {} {} left no file", style("✗").red(), phase.as_str())
        }
        Event::Verdict {
            decision, summary, ..
        } => format!(
            "{} {}: {}",
            style("verdict").bold(),
            decision.as_str(),
            terminal_safe(summary.lines().next().unwrap_or_default())
        ),
        Event::WorkEnd { rounds, .. } => {
            format!(
                "work session over after {}",
                count(*rounds, "round", "rounds")
            )
        }
        _ => return None,
    })
}
