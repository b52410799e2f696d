//! Where a run's events go: the human display, or `--json` (one JSON object
//! per line on stdout, nothing else on stdout).

use std::io::Write;

use super::display::Display;
use crate::agent::Event;

/// The consumer of a run's events.
pub struct Output {
    json: bool,
    display: Display,
}

impl Output {
    pub fn new(json: bool) -> Output {
        Output {
            json,
            display: Display::default(),
        }
    }

    pub fn show(&mut self, event: &Event) {
        if self.json {
            // A closed stdout (a consumer that went away) must not stop the
            // run: the session and the run directory keep everything.
            if let Ok(line) = serde_json::to_string(event) {
                // A secret has no character JSON escapes: the text is enough.
                let line = crate::llm::redact::text(&line);
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "{line}");
                let _ = out.flush();
            }
        } else {
            self.display.show(event);
        }
    }
}
