//! A request to stop, from outside the loop (a signal, a key). Two kinds:
//!
//! - an abort (Ctrl+C, SIGTERM): the loop checks it while the model streams
//!   and while a tool runs, stops there, keeps what was streamed, answers
//!   every pending tool call, and ends with `EndReason::Aborted`. Dropping
//!   the running tool's future kills its process group (on the host or in
//!   the container).
//! - a finalize (Esc at the terminal): the user is done and wants the
//!   review. A running tool call is let finish (killing it could leave its
//!   work half done); a model answer in progress is cut, since its tool
//!   calls would not run anyway; the calls of the turn not yet run are
//!   answered as not run, and the loop ends with `EndReason::Finalized`.
//!
//! An abort outranks a finalize: once aborting, a finalize changes nothing.

use tokio::sync::watch;

/// The result of a tool call not run because the user finalized the run.
pub(super) const FINALIZED: &str = "not run: the user ended the run here (Esc); the changes so far \
go to review";

/// What the loop has been asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stop {
    Run,
    Finalize,
    Abort,
}

/// The sending side: ask the loop to stop.
#[derive(Debug, Clone)]
pub struct AbortHandle(watch::Sender<Stop>);

/// The receiving side, given to [`super::run_agent`].
#[derive(Debug, Clone)]
pub struct AbortSignal(watch::Receiver<Stop>);

/// A connected handle and signal.
pub fn abort_channel() -> (AbortHandle, AbortSignal) {
    let (tx, rx) = watch::channel(Stop::Run);
    (AbortHandle(tx), AbortSignal(rx))
}

impl AbortHandle {
    /// Stop now.
    pub fn abort(&self) {
        self.raise(Stop::Abort);
    }

    /// Stop once the running tool call is over, and go to review.
    pub fn finalize(&self) {
        self.raise(Stop::Finalize);
    }

    fn raise(&self, to: Stop) {
        // No receiver left means the loop is over: nothing to stop.
        self.0.send_if_modified(|now| {
            let raised = to > *now;
            if raised {
                *now = to;
            }
            raised
        });
    }
}

impl AbortSignal {
    /// A signal that never fires (for callers with nothing to stop them).
    pub fn never() -> AbortSignal {
        let (tx, rx) = watch::channel(Stop::Run);
        // The sender is dropped: `changed` fails, and the waits then wait
        // forever.
        drop(tx);
        AbortSignal(rx)
    }

    /// An abort was asked for.
    pub fn is_requested(&self) -> bool {
        *self.0.borrow() == Stop::Abort
    }

    /// A finalize (or an abort, which outranks it) was asked for.
    pub fn is_finalizing(&self) -> bool {
        *self.0.borrow() >= Stop::Finalize
    }

    /// Completes once an abort is requested; never, if it never is.
    pub async fn requested(&mut self) {
        self.reaches(Stop::Abort).await;
    }

    /// Completes once a finalize or an abort is requested.
    pub async fn finalizing(&mut self) {
        self.reaches(Stop::Finalize).await;
    }

    async fn reaches(&mut self, level: Stop) {
        loop {
            if *self.0.borrow_and_update() >= level {
                return;
            }
            if self.0.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn an_abort_wakes_the_waiter() {
        let (handle, mut signal) = abort_channel();
        assert!(!signal.is_requested());
        let waiter = tokio::spawn(async move {
            signal.requested().await;
            signal.is_requested()
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        handle.abort();
        assert!(
            tokio::time::timeout(Duration::from_secs(5), waiter)
                .await
                .unwrap()
                .unwrap()
        );
    }

    #[tokio::test]
    async fn a_finalize_is_not_an_abort_and_an_abort_outranks_it() {
        let (handle, mut signal) = abort_channel();
        handle.finalize();
        assert!(signal.is_finalizing());
        assert!(!signal.is_requested());
        tokio::time::timeout(Duration::from_secs(5), signal.finalizing())
            .await
            .unwrap();
        let waited = tokio::time::timeout(Duration::from_millis(50), signal.requested()).await;
        assert!(waited.is_err(), "a finalize does not wake an abort waiter");
        handle.abort();
        handle.finalize();
        assert!(
            signal.is_requested(),
            "a later finalize does not undo an abort"
        );
    }

    #[tokio::test]
    async fn never_never_fires() {
        let mut signal = AbortSignal::never();
        let waited = tokio::time::timeout(Duration::from_millis(50), signal.requested()).await;
        assert!(waited.is_err());
        assert!(!signal.is_requested());
        assert!(!signal.is_finalizing());
    }
}
