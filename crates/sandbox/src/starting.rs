//! A backend whose start runs in the background: a run does not wait for
//! its container before it asks the model. The start is a task of its own;
//! the first command waits for it ([`Starting::ready`]), and the run
//! watches it ([`Starting::failed`]) so that a sandbox that cannot start
//! ends the run with the start's own error instead of becoming a tool error
//! the model would retry (a command after a failed start never returns).
//! Nothing ever falls back to running on the host: a command goes to the
//! started backend or waits.
//!
//! [`Backend::shutdown`] waits for a start still under way and then removes
//! what it made, so a run that ends before its first command leaves no
//! container behind. It waits rather than cancels: a `podman run` cut short
//! can still leave a container no one would remove. [`Backend::hand_off`]
//! does not wait: it stops the start where it is (a `podman run` under way
//! goes on) and returns what the start may have made, with the `podman
//! run` to wait for, for a cleanup outside the run's path (see
//! [`crate::cleanup`]).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::cleanup::{Makers, Remains};
use super::egress::EgressDecision;
use super::{Backend, BackendKind, Program, Spawned, View};
use ah_tools::ExecOutput;

/// Why the sandbox did not start: the start's own error, shared by every
/// clone of the [`Starting`] that waited for it (its message and sources
/// are the original's).
#[derive(Debug, Clone)]
pub struct StartError(Arc<dyn std::error::Error + Send + Sync>);

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for StartError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

/// The start task ended without an outcome (it panicked, or the runtime is
/// shutting down).
#[derive(Debug, thiserror::Error)]
#[error("the sandbox start was interrupted before it finished; run ah again")]
struct Interrupted;

/// How a start ended.
type Outcome = Result<Arc<dyn Backend>, StartError>;

/// A backend being started in the background; cheap to clone (clones share
/// the one start).
#[derive(Clone)]
pub struct Starting {
    kind: BackendKind,
    outcome: watch::Receiver<Option<Outcome>>,
    /// Stops the start's task.
    abort: tokio::task::AbortHandle,
    /// What the start may leave, when it said ([`Starting::leaving`]).
    leaving: Option<Arc<(Remains, Makers)>>,
}

impl Starting {
    /// Starts `start` as a task of its own on the current tokio runtime.
    /// A backend it makes after every clone was dropped is dropped at once
    /// (the podman backend then removes its container).
    pub fn spawn<B, E, F>(kind: BackendKind, start: F) -> Starting
    where
        B: Backend + 'static,
        E: std::error::Error + Send + Sync + 'static,
        F: Future<Output = Result<B, E>> + Send + 'static,
    {
        let (done, outcome) = watch::channel(None);
        let task = tokio::spawn(async move {
            let outcome = match start.await {
                Ok(backend) => Ok(Arc::new(backend) as Arc<dyn Backend>),
                Err(err) => Err(StartError(Arc::new(err))),
            };
            // With no one left to use it, the backend is dropped here.
            let _ = done.send(Some(outcome));
        });
        Starting {
            kind,
            outcome,
            abort: task.abort_handle(),
            leaving: None,
        }
    }

    /// Says what the start may leave on the host however far it got (its
    /// container, its folders) and where it puts the processes still making
    /// them: a [`Backend::hand_off`] before the start is over then
    /// abandons it instead of waiting for it.
    pub fn leaving(mut self, remains: Remains, makers: Makers) -> Starting {
        self.leaving = Some(Arc::new((remains, makers)));
        self
    }

    /// How the start ended, if it has: `Ok` when the backend started.
    pub fn ended(&self) -> Option<Result<(), StartError>> {
        match &*self.outcome.borrow() {
            Some(Ok(_)) => Some(Ok(())),
            Some(Err(err)) => Some(Err(err.clone())),
            None => None,
        }
    }

    /// Waits for the start: the backend, or why it did not start.
    pub async fn ready(&self) -> Outcome {
        let mut outcome = self.outcome.clone();
        let ended = outcome
            .wait_for(Option::is_some)
            .await
            .map(|ended| ended.clone());
        match ended {
            Ok(Some(outcome)) => outcome,
            Ok(None) | Err(_) => Err(StartError(Arc::new(Interrupted))),
        }
    }

    /// Completes only if the start fails, with its error.
    pub async fn failed(&self) -> StartError {
        match self.ready().await {
            Err(err) => err,
            Ok(_) => std::future::pending().await,
        }
    }

    /// The started backend; after a failed start, never.
    async fn started_or_never(&self) -> Arc<dyn Backend> {
        match self.ready().await {
            Ok(backend) => backend,
            Err(_) => std::future::pending().await,
        }
    }

    /// The backend, if it has started by now.
    fn started(&self) -> Option<Arc<dyn Backend>> {
        match &*self.outcome.borrow() {
            Some(Ok(backend)) => Some(Arc::clone(backend)),
            _ => None,
        }
    }
}

#[async_trait::async_trait]
impl Backend for Starting {
    fn kind(&self) -> BackendKind {
        self.kind
    }

    /// Waits for the start, then runs `command` in the started backend.
    /// After a failed start it never returns: the run stops on
    /// [`Starting::failed`] instead, and an error here could reach the
    /// model first (the engine may see the failure within one poll, before
    /// the run does).
    async fn exec(&self, command: &str, timeout: Duration) -> std::io::Result<ExecOutput> {
        self.started_or_never().await.exec(command, timeout).await
    }

    /// Waits for the start, then asks the started backend (never returns
    /// after a failed start, as [`Backend::exec`]).
    async fn view(&self) -> std::io::Result<View> {
        self.started_or_never().await.view().await
    }

    /// Hands `paths` to the started backend (never returns after a failed
    /// start, as [`Backend::exec`]).
    async fn push(&self, paths: Option<&[String]>) -> std::io::Result<()> {
        self.started_or_never().await.push(paths).await
    }

    /// Waits for the start, then starts `program` in the started backend
    /// (never returns after a failed start, as [`Backend::exec`]).
    async fn spawn(&self, program: &Program<'_>) -> std::io::Result<Spawned> {
        self.started_or_never().await.spawn(program).await
    }

    fn sweeps(&self) -> u64 {
        self.started().map_or(0, |backend| backend.sweeps())
    }

    fn traffic(&self) -> Option<crate::Traffic> {
        self.started().and_then(|backend| backend.traffic())
    }

    fn take_egress(&self) -> Vec<EgressDecision> {
        self.started()
            .map(|backend| backend.take_egress())
            .unwrap_or_default()
    }

    /// Waits for a start under way, then stops what it started; a start
    /// that failed left nothing to stop.
    async fn shutdown(&self) -> std::io::Result<()> {
        match self.ready().await {
            Ok(backend) => backend.shutdown().await,
            Err(_) => Ok(()),
        }
    }

    /// Stops a start still under way (a `podman run` it began goes on, and
    /// is among the remains' makers) and hands off what it made, or may
    /// have made. Without [`Starting::leaving`], waits for the start and
    /// asks the started backend.
    async fn hand_off(&self) -> Option<Remains> {
        let Some(leaving) = &self.leaving else {
            return match self.ready().await {
                Ok(backend) => backend.hand_off().await,
                Err(_) => Some(Remains::default()),
            };
        };
        let (remains, makers) = &**leaving;
        // What the start made for its container stays for the cleanup.
        makers.abandon(true);
        self.abort.abort();
        // Over once the task has stopped (its end dropped the sender) or
        // finished just before.
        let mut outcome = self.outcome.clone();
        let ended = outcome
            .wait_for(Option::is_some)
            .await
            .ok()
            .and_then(|o| o.clone());
        if let Some(Ok(backend)) = ended {
            // It finished after all: its container runs, and its own
            // folders may go with it. The same container and folders; the
            // backend stops removing them itself.
            makers.abandon(false);
            backend.hand_off().await;
        }
        let mut remains = remains.clone();
        remains.makers = makers.running();
        remains.folders.extend(makers.left());
        Some(remains)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    /// Counts its commands and shutdowns.
    #[derive(Default)]
    struct Counting {
        execs: AtomicU32,
        shutdowns: Arc<AtomicU32>,
    }

    #[async_trait::async_trait]
    impl Backend for Counting {
        fn kind(&self) -> BackendKind {
            BackendKind::Podman
        }

        async fn exec(&self, _: &str, _: Duration) -> std::io::Result<ExecOutput> {
            self.execs.fetch_add(1, Ordering::SeqCst);
            Ok(ExecOutput::default())
        }

        async fn view(&self) -> std::io::Result<View> {
            Ok(View {
                root: std::path::PathBuf::from("/work"),
                changed: crate::Changed::Anywhere,
            })
        }

        async fn shutdown(&self) -> std::io::Result<()> {
            self.shutdowns.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    }

    #[derive(Debug, thiserror::Error)]
    #[error("no runtime")]
    struct NoRuntime(#[source] std::io::Error);

    #[tokio::test]
    async fn a_command_waits_for_the_start_and_runs_in_what_it_started() {
        let (go, wait) = tokio::sync::oneshot::channel::<()>();
        let starting = Starting::spawn(BackendKind::Podman, async move {
            let _ = wait.await;
            Ok::<_, NoRuntime>(Counting::default())
        });
        assert!(starting.started().is_none(), "not started yet");
        let exec = {
            let starting = starting.clone();
            tokio::spawn(async move { starting.exec("true", Duration::from_secs(1)).await })
        };
        let _ = go.send(());
        let ran = exec.await.unwrap_or_else(|e| panic!("exec task: {e}"));
        assert!(ran.is_ok(), "{ran:?}");
        assert_eq!(starting.kind(), BackendKind::Podman);
    }

    #[tokio::test]
    async fn a_failed_start_keeps_its_message_and_source() {
        let starting = Starting::spawn(BackendKind::Podman, async {
            Err::<Counting, _>(NoRuntime(std::io::Error::other("runc is missing")))
        });
        let err = starting.failed().await;
        assert_eq!(err.to_string(), "no runtime");
        let source = std::error::Error::source(&err).map(ToString::to_string);
        assert_eq!(source.as_deref(), Some("runc is missing"));
        // A command waits for good: the run stops on the failure instead.
        let exec = starting.exec("true", Duration::from_secs(1));
        let waited = tokio::time::timeout(Duration::from_millis(100), exec).await;
        assert!(waited.is_err(), "a command after a failed start returned");
        assert!(starting.shutdown().await.is_ok(), "nothing to stop");
    }

    #[tokio::test]
    async fn shutdown_waits_for_the_start_and_stops_what_it_made() {
        let shutdowns = Arc::new(AtomicU32::new(0));
        let counted = Arc::clone(&shutdowns);
        let (go, wait) = tokio::sync::oneshot::channel::<()>();
        let starting = Starting::spawn(BackendKind::Podman, async move {
            let _ = wait.await;
            Ok::<_, NoRuntime>(Counting {
                shutdowns: counted,
                ..Counting::default()
            })
        });
        let shutdown = {
            let starting = starting.clone();
            tokio::spawn(async move { starting.shutdown().await })
        };
        let _ = go.send(());
        let stopped = shutdown.await.unwrap_or_else(|e| panic!("task: {e}"));
        assert!(stopped.is_ok());
        assert_eq!(shutdowns.load(Ordering::SeqCst), 1);
    }
}
