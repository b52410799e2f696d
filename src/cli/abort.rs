//! SIGINT and SIGTERM (and Ctrl+C as a key, see [`Interrupt`]) during a
//! run. The first signal stops the agent where it
//! is (the model stream is dropped, the running command's process group is
//! killed) and lets the run finish its bookkeeping: every tool call gets a
//! result, the patch is saved but not applied, the sandbox is removed. A
//! second signal exits at once; the session DB is consistent either way,
//! since each message is one SQLite transaction.

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;

/// Exit code after an abort, as shells report SIGINT.
pub const EXIT_ABORTED: i32 = 130;

/// Ctrl+C pressed while the terminal is in raw mode (where it is a key, not
/// SIGINT): counts as a SIGINT.
#[derive(Debug, Clone)]
pub struct Interrupt(mpsc::UnboundedSender<()>);

/// The receiving side of [`Interrupt`].
pub struct Interrupts(mpsc::UnboundedReceiver<()>);

/// A connected [`Interrupt`] and [`Interrupts`].
pub fn interrupt_channel() -> (Interrupt, Interrupts) {
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
pub async fn first_signal(mut keys: Interrupts, on_exit: impl FnOnce() + Send + 'static) {
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
