//! The terminal shared by the display and the live controls: one lock that
//! whoever writes holds (so a `You:` prompt and the run's lines never mix,
//! and the display waits, and with it the run, while the prompt is open),
//! and the spinner shown while ah waits for the model or a tool. The
//! spinner is drawn on stderr only when stderr is a terminal.

use std::io::IsTerminal;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The shared terminal; clone the `Arc` to share it.
#[derive(Default)]
pub(crate) struct Screen {
    state: Mutex<ScreenState>,
}

/// What is on the screen: the spinner (the bar while it turns, and what
/// it says), and whether the model's text left a line unfinished.
#[derive(Default)]
pub(crate) struct ScreenState {
    bar: Option<ProgressBar>,
    message: Option<String>,
    /// The cursor is not at the start of a line on stdout.
    pub mid_line: bool,
}

impl Screen {
    pub(crate) fn new() -> Arc<Screen> {
        Arc::new(Screen::default())
    }

    /// Takes the terminal: nothing else writes until the guard is dropped.
    pub(crate) fn lock(&self) -> MutexGuard<'_, ScreenState> {
        // A panic while writing leaves nothing half-done worth refusing.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Screen {
    /// Writes `line` on stderr on a line of its own, from outside the
    /// display (a signal's message). Never waits: when a `You:` line has
    /// the terminal, the line just follows it.
    pub(crate) fn say(&self, line: &str) {
        match self.state.try_lock() {
            Ok(mut state) => {
                state.clear();
                state.end_line();
                eprintln!("{line}");
            }
            Err(TryLockError::Poisoned(poisoned)) => {
                let mut state = poisoned.into_inner();
                state.clear();
                state.end_line();
                eprintln!("{line}");
            }
            Err(TryLockError::WouldBlock) => eprintln!("\n{line}"),
        }
    }
}

impl ScreenState {
    /// Shows the spinner saying `message` (replacing what it said).
    pub(crate) fn spin(&mut self, message: String) {
        self.clear();
        if !std::io::stderr().is_terminal() {
            // Nothing to draw on; what it would say is still kept.
            self.message = Some(message);
            return;
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} {elapsed}") {
            bar.set_style(style);
        }
        bar.set_message(message.clone());
        bar.enable_steady_tick(Duration::from_millis(120));
        self.bar = Some(bar);
        self.message = Some(message);
    }

    /// Ends the model's unfinished line on stdout before a line on stderr.
    pub(crate) fn end_line(&mut self) {
        if self.mid_line {
            println!();
            self.mid_line = false;
        }
    }

    /// What the spinner says, when it turns.
    pub(crate) fn message(&self) -> Option<&str> {
        self.message.as_deref()
    }

    /// Hides the spinner; returns what it said, so it can be shown again.
    pub(crate) fn clear(&mut self) -> Option<String> {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
        self.message.take()
    }
}

impl Drop for ScreenState {
    fn drop(&mut self) {
        self.clear();
    }
}
