//! Where a run's events go: the human display, or `--json` (one JSON object
//! per line on stdout, nothing else on stdout). Either way the text of the
//! model call in flight is tracked, so an abort can keep it.

use std::io::Write;

use super::display::Display;
use crate::agent::{Event, PartialText};

/// The consumer of a run's events.
pub struct Output {
    json: bool,
    display: Display,
    partial: PartialText,
}

impl Output {
    pub fn new(json: bool) -> Output {
        Output {
            json,
            display: Display::default(),
            partial: PartialText::default(),
        }
    }

    pub fn show(&mut self, event: &Event) {
        self.partial.observe(event);
        if self.json {
            // A closed stdout (a consumer that went away) must not stop the
            // run: the session and the run directory keep everything.
            if let Ok(line) = serde_json::to_string(event) {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "{line}");
                let _ = out.flush();
            }
        } else {
            self.display.show(event);
        }
    }

    /// The text the unfinished model call had streamed.
    pub fn pending_text(&self) -> Option<&str> {
        self.partial.pending()
    }
}
