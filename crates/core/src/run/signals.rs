//! SIGINT and SIGTERM (and Ctrl+C as a key, see [`Interrupt`]) during a
//! run. The first signal stops the agent where it
//! is (the model stream is dropped, the running command's process group is
//! killed) and lets the run finish its bookkeeping: every tool call gets a
//! result, the patch is saved but not applied, the sandbox is removed. A
//! second signal exits at once; the session DB is consistent either way,
//! since each message is one SQLite transaction.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;

use super::{Console, LiveControls};
use crate::agent::{AbortHandle, AbortSignal, abort_channel};
use ah_session::queue::SessionLock;

/// Exit code after an abort, as shells report SIGINT.
pub const EXIT_ABORTED: i32 = 130;

/// Ctrl+C pressed while the terminal is in raw mode (where it is a key, not
/// SIGINT): counts as a SIGINT.
#[derive(Debug, Clone)]
pub struct Interrupt(mpsc::UnboundedSender<()>);

/// The receiving side of [`Interrupt`].
pub struct Interrupts(mpsc::UnboundedReceiver<()>);

/// A connected [`Interrupt`] and [`Interrupts`].
fn interrupt_channel() -> (Interrupt, Interrupts) {
    let (tx, rx) = mpsc::unbounded_channel();
    (Interrupt(tx), Interrupts(rx))
}

impl Interrupt {
    pub fn send(&self) {
        // No watcher left means nothing to interrupt.
        let _ = self.0.send(());
    }
}

/// What a second signal says before ah exits at once.
pub const EXITING_NOW: &str =
    "exiting without cleanup; `ah` removes a leftover sandbox container at its next start";

/// Waits for the first SIGINT, SIGTERM or [`Interrupt`], then arms the
/// second-one exit, which calls `on_exit` (exiting skips destructors: it
/// says [`EXITING_NOW`] and releases what must be) before it exits. If the handlers cannot be installed, this never
/// completes (the default signal behaviour then applies).
async fn first_signal(mut keys: Interrupts, on_exit: impl FnOnce() + Send + 'static) {
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
        Some(()) = keys.0.recv() => {}
    }
    tokio::spawn(async move {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
            Some(()) = keys.0.recv() => {}
        }
        on_exit();
        std::process::exit(EXIT_ABORTED);
    });
}

/// The first SIGINT/SIGTERM asks the loop to stop; it keeps what was
/// streamed and answers every pending tool call itself. Once the loop is
/// over there is nothing to stop gracefully: a signal then exits at once
/// (the session is consistent; a leftover sandbox is removed by the next
/// run). Exiting at once skips destructors, so the session lock is released
/// by hand first.
pub(crate) struct SignalWatch {
    loop_over: Arc<AtomicBool>,
    stop: AbortHandle,
    interrupt: Interrupt,
}

impl SignalWatch {
    /// Starts watching; the watch's messages go to `console`.
    pub(crate) fn start(
        lock: &SessionLock,
        console: Arc<dyn Console>,
    ) -> (SignalWatch, AbortSignal) {
        let (stop, abort) = abort_channel();
        let (interrupt, keys) = interrupt_channel();
        let loop_over = Arc::new(AtomicBool::new(false));
        let over = Arc::clone(&loop_over);
        let held = lock.clone();
        let watch = SignalWatch {
            loop_over,
            stop: stop.clone(),
            interrupt,
        };
        tokio::spawn(async move {
            let on_exit = {
                let held = held.clone();
                let console = Arc::clone(&console);
                move || {
                    console.say(EXITING_NOW);
                    console.restore_terminal();
                    drop(held.release());
                    ah_record::run::mcp::end_host_groups();
                }
            };
            first_signal(keys, on_exit).await;
            if over.load(Ordering::SeqCst) {
                console.restore_terminal();
                eprintln!("interrupted after the run; its patch is in the run directory");
                drop(held.release());
                ah_record::run::mcp::end_host_groups();
                std::process::exit(EXIT_ABORTED);
            }
            // First the stop: a `You:` line open now gives up on it.
            stop.abort();
            console.say(
                "aborting: saving the patch and removing the sandbox (press Ctrl+C again to exit now)",
            );
        });
        (watch, abort)
    }

    /// What the live keys act on: Esc finalizes through `stop`, Ctrl+C
    /// counts as a signal here.
    pub(crate) fn controls(&self, abort: &AbortSignal, db: &Path) -> LiveControls {
        LiveControls {
            stop: self.stop.clone(),
            abort: abort.clone(),
            interrupt: self.interrupt.clone(),
            session_db: db.to_path_buf(),
        }
    }

    /// From now on a signal exits at once.
    pub(crate) fn loop_over(&self) {
        self.loop_over.store(true, Ordering::SeqCst);
    }

    /// Stops every loop that watches this, as a first Ctrl+C would (the
    /// other attempts of a task, once one passed its check).
    pub(crate) fn stop_all(&self) {
        self.stop.abort();
    }

    /// The loop goes on (a review sent the model back): a signal stops it
    /// again, as before [`SignalWatch::loop_over`].
    pub(crate) fn loop_again(&self) {
        self.loop_over.store(false, Ordering::SeqCst);
    }
}
