//! A request to stop, from outside the loop (a signal, a key): the loop
//! checks it while the model streams and while a tool runs, stops there,
//! keeps what was streamed, answers every pending tool call, and ends with
//! `EndReason::Aborted`. Dropping the running tool's future kills its
//! process group (on the host or in the container).

use tokio::sync::watch;

/// The sending side: ask the loop to stop.
#[derive(Debug, Clone)]
pub struct AbortHandle(watch::Sender<bool>);

/// The receiving side, given to [`super::run_agent`].
#[derive(Debug, Clone)]
pub struct AbortSignal(watch::Receiver<bool>);

/// A connected handle and signal.
pub fn abort_channel() -> (AbortHandle, AbortSignal) {
    let (tx, rx) = watch::channel(false);
    (AbortHandle(tx), AbortSignal(rx))
}

impl AbortHandle {
    pub fn abort(&self) {
        // No receiver left means the loop is over: nothing to stop.
        let _ = self.0.send(true);
    }
}

impl AbortSignal {
    /// A signal that never fires (for callers with nothing to stop them).
    pub fn never() -> AbortSignal {
        let (tx, rx) = watch::channel(false);
        // The sender is dropped: `changed` fails, and `requested` then
        // waits forever.
        drop(tx);
        AbortSignal(rx)
    }

    pub fn is_requested(&self) -> bool {
        *self.0.borrow()
    }

    /// Completes once an abort is requested; never, if it never is.
    pub async fn requested(&mut self) {
        loop {
            if *self.0.borrow_and_update() {
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
    async fn never_never_fires() {
        let mut signal = AbortSignal::never();
        let waited = tokio::time::timeout(Duration::from_millis(50), signal.requested()).await;
        assert!(waited.is_err());
        assert!(!signal.is_requested());
    }
}
