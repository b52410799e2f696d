//! The keys of a live run at a terminal: `i` opens a `You:` line whose text
//! becomes a steering message (the same queue as `ah --steer`), `Esc`
//! finalizes (stop after the running tool call, save the patch, review),
//! `Ctrl+C` aborts like SIGINT (a second one exits at once). An agent's
//! question to the user (`ah org`) opens a `You:` line the same way.
//!
//! Only when standard input and standard error are terminals and the output
//! is not `--json`. The terminal is in raw mode while the keys are read (a
//! thread of their own) and put back when the controls stop, before the
//! review, whose prompts need the keys and the terminal's own mode.

mod prompt;
pub(super) mod terminal;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use console::style;
use crossterm::event::{self, Event as TermEvent, KeyCode, KeyEventKind, KeyModifiers};

use super::screen::Screen;
use ah_core::agent::{AbortHandle, AbortSignal};
use ah_core::run::queue::steer;
use ah_core::run::signals::Interrupt;
use terminal::RawMode;
use tokio::sync::oneshot;

/// How long one wait for a key lasts before the stop flag is looked at.
const KEY_POLL: Duration = Duration::from_millis(50);

/// What the keys act on.
pub(super) struct Wiring {
    /// Where the display writes (and where the spinner turns).
    pub(super) screen: Arc<Screen>,
    /// Asks the loop to finalize.
    pub(super) stop: AbortHandle,
    /// Tells whether the run is aborting (a `You:` line then gives up).
    pub(super) abort: AbortSignal,
    /// Ctrl+C, as the signal watch takes it.
    pub(super) interrupt: Interrupt,
    /// The session database whose queue takes the steering.
    pub(super) session_db: PathBuf,
}

/// The running key reader; dropping it ends the reader and restores the
/// terminal.
pub(super) struct Controls {
    stopped: Arc<AtomicBool>,
    reader: Option<JoinHandle<()>>,
    asks: mpsc::Sender<Ask>,
}

/// A question for the user (`@@user` in `ah org`), answered on a `You:`
/// line that the key reader opens between keys.
struct Ask {
    shown: String,
    /// The command that answers later.
    later: String,
    answer: oneshot::Sender<Option<String>>,
}

/// Asks the user through the running keys.
pub(super) struct Asker(mpsc::Sender<Ask>);

impl Asker {
    /// Shows `shown` (and `later`, the command that answers after the
    /// run) and waits for the user's line: `None` when the keys are over or
    /// the line was empty.
    pub(super) async fn ask(&self, shown: String, later: String) -> Option<String> {
        let (answer, answered) = oneshot::channel();
        self.0
            .send(Ask {
                shown,
                later,
                answer,
            })
            .ok()?;
        answered.await.ok().flatten()
    }
}

impl Controls {
    /// Starts reading keys, when there is a person at a terminal to press
    /// them (and `json` is off); else `None`.
    pub(super) fn start(json: bool, wiring: Wiring) -> Option<Controls> {
        if json || !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
            return None;
        }
        let raw = match RawMode::enter() {
            Ok(raw) => raw,
            Err(err) => {
                eprintln!("warning: the live keys are off: cannot read keys one by one ({err})");
                return None;
            }
        };
        wiring.screen.lock().end_line();
        eprintln!(
            "{}",
            style("keys: i = message the model · Esc = finish and review · Ctrl+C = abort").dim()
        );
        let stopped = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stopped);
        let (asks, questions) = mpsc::channel();
        let reader = std::thread::Builder::new()
            .name("ah-keys".to_string())
            .spawn(move || read_keys(&raw, &wiring, &flag, &questions));
        match reader {
            Ok(reader) => Some(Controls {
                stopped,
                reader: Some(reader),
                asks,
            }),
            Err(err) => {
                // The raw mode moved into the failed closure and was
                // dropped with it: the terminal is back as it was.
                terminal::restore();
                eprintln!("warning: the live keys are off: cannot start their reader ({err})");
                None
            }
        }
    }

    /// Asks the user through these keys while they run.
    pub(super) fn asker(&self) -> Asker {
        Asker(self.asks.clone())
    }

    fn end(&mut self) {
        self.stopped.store(true, Ordering::SeqCst);
        if let Some(reader) = self.reader.take() {
            // A reader that panicked has restored the terminal in the hook.
            let _ = reader.join();
        }
        terminal::restore();
    }
}

impl Drop for Controls {
    fn drop(&mut self) {
        self.end();
    }
}

/// The key loop, until `stopped` (the raw mode ends with it).
fn read_keys(
    raw: &RawMode,
    wiring: &Wiring,
    stopped: &AtomicBool,
    questions: &mpsc::Receiver<Ask>,
) {
    let mut finalizing = false;
    while !stopped.load(Ordering::SeqCst) {
        if let Ok(question) = questions.try_recv()
            && !answer(raw, wiring, stopped, question)
        {
            return;
        }
        match event::poll(KEY_POLL) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(err) => {
                note(wiring, &format!("warning: the live keys stopped: {err}"));
                return;
            }
        }
        let Ok(TermEvent::Key(key)) = event::read() else {
            continue;
        };
        if key.kind != KeyEventKind::Press {
            continue;
        }
        let go_on = match key.code {
            KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                wiring.interrupt.send();
                true
            }
            KeyCode::Esc if !finalizing => {
                finalizing = true;
                wiring.stop.finalize();
                note(
                    wiring,
                    &format!(
                        "{} finishing: the run stops after the running step, saves the patch and goes to review (Ctrl+C aborts)",
                        style("⇥").yellow()
                    ),
                );
                true
            }
            KeyCode::Char('i') if key.modifiers.difference(KeyModifiers::SHIFT).is_empty() => {
                ask(raw, wiring, stopped)
            }
            _ => true,
        };
        if !go_on {
            return;
        }
    }
}

/// The `You:` line, with the display (and so the run) held until it is
/// answered. Returns whether the keys go on being read.
fn ask(raw: &RawMode, wiring: &Wiring, stopped: &AtomicBool) -> bool {
    let mut screen = wiring.screen.lock();
    let spinning = screen.clear();
    screen.end_line();
    raw.leave();
    let text = prompt::read_line(|| stopped.load(Ordering::SeqCst) || wiring.abort.is_requested());
    if stopped.load(Ordering::SeqCst) {
        return false;
    }
    if let Err(err) = raw.resume() {
        eprintln!("warning: the live keys stopped: cannot read keys one by one again ({err})");
        return false;
    }
    match text.map(|text| steer(&wiring.session_db, &text)) {
        None => eprintln!("{}", style("(nothing sent)").dim()),
        Some(Ok(id)) => eprintln!(
            "{} steering #{id} queued: it reaches the model at the next tool round (an org's agents at the next tick)",
            style("⇢").magenta()
        ),
        Some(Err(err)) => eprintln!("{} {err:#}", style("not sent:").red()),
    }
    if let Some(message) = spinning {
        screen.spin(message);
    }
    true
}

/// A `You:` line for an agent's question; the display (and so the run)
/// waits for it. Returns whether the keys go on being read.
fn answer(raw: &RawMode, wiring: &Wiring, stopped: &AtomicBool, question: Ask) -> bool {
    let mut screen = wiring.screen.lock();
    let spinning = screen.clear();
    screen.end_line();
    raw.leave();
    eprintln!("{}", question.shown);
    eprintln!(
        "{}",
        style(format!(
            "(an empty line stops the run here; answer later with `{}`)",
            question.later
        ))
        .dim()
    );
    let text = prompt::read_line(|| stopped.load(Ordering::SeqCst) || wiring.abort.is_requested());
    // The org waits for this answer: it is sent whatever happens next.
    let _ = question.answer.send(text);
    if stopped.load(Ordering::SeqCst) {
        return false;
    }
    if let Err(err) = raw.resume() {
        eprintln!("warning: the live keys stopped: cannot read keys one by one again ({err})");
        return false;
    }
    if let Some(message) = spinning {
        screen.spin(message);
    }
    true
}

/// A line from the keys, between the display's lines.
fn note(wiring: &Wiring, line: &str) {
    let mut screen = wiring.screen.lock();
    let spinning = screen.clear();
    screen.end_line();
    eprintln!("{line}");
    if let Some(message) = spinning {
        screen.spin(message);
    }
}
