//! SIGINT and SIGTERM during a run. The first signal stops the agent where it
//! is (the model stream is dropped, the running command's process group is
//! killed) and lets the run finish its bookkeeping: every tool call gets a
//! result, the patch is saved but not applied, the sandbox is removed. A
//! second signal exits at once; the session DB is consistent either way,
//! since each message is one SQLite transaction.

use tokio::signal::unix::{SignalKind, signal};

/// Exit code after an abort, as shells report SIGINT.
pub const EXIT_ABORTED: i32 = 130;

/// Waits for the first SIGINT or SIGTERM, then arms the second-signal exit,
/// which calls `on_exit` (exiting skips destructors) before it exits.
/// If the handlers cannot be installed, this never completes (the default
/// signal behaviour then applies).
pub async fn first_signal(on_exit: impl FnOnce() + Send + 'static) {
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
    }
    tokio::spawn(async move {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        eprintln!(
            "exiting without cleanup; `ah` removes a leftover sandbox container at its next start"
        );
        on_exit();
        std::process::exit(EXIT_ABORTED);
    });
}
