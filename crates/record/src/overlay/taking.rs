//! An overlay run's baseline, taken on a thread of its own: the container
//! starts meanwhile (it needs only the upper folder's whiteouts), and the
//! run's first command waits for both. Reading a large project's files is
//! most of a start, and nothing before the first step needs its result.

use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use git2::Oid;

use crate::shadow::ShadowRepo;

/// What the thread hands over: the shadow repo it wrote the baseline with
/// (which also finishes the baseline's index), and the baseline commit.
#[derive(Debug)]
pub struct Baseline {
    pub shadow: ShadowRepo,
    pub baseline: Oid,
}

/// What [`BaselineThread::finished`] never leaves, said rather than panicked.
const STILL_RUNNING: &str = "the run's baseline is still being taken";

/// A baseline being taken; cheap to clone (clones share the one thread).
#[derive(Clone)]
pub struct BaselineThread(Arc<Mutex<State>>);

enum State {
    Running(JoinHandle<Result<Baseline, String>>),
    Done(Result<Baseline, String>),
    /// [`BaselineThread::take`] has the result; only how it ended (the
    /// baseline commit) is kept.
    Handed(Result<Oid, String>),
}

impl State {
    /// How the thread ended, as far as this state knows.
    fn ended(&self) -> Result<Oid, String> {
        match self {
            State::Done(done) => done.as_ref().map(|b| b.baseline).map_err(Clone::clone),
            State::Handed(ended) => ended.clone(),
            State::Running(_) => Err(STILL_RUNNING.into()),
        }
    }
}

impl std::fmt::Debug for BaselineThread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BaselineThread").finish_non_exhaustive()
    }
}

impl BaselineThread {
    /// Runs `take` on a thread of its own.
    pub fn spawn(
        take: impl FnOnce() -> Result<Baseline, String> + Send + 'static,
    ) -> BaselineThread {
        BaselineThread(Arc::new(Mutex::new(State::Running(std::thread::spawn(
            take,
        )))))
    }

    /// Blocks until the baseline is taken: why it could not be, if not.
    pub fn wait(&self) -> Result<(), String> {
        self.finished().ended().map(|_| ())
    }

    /// Blocks until the baseline is taken: its commit.
    pub fn commit(&self) -> Result<Oid, String> {
        self.finished().ended()
    }

    /// Blocks until the baseline is taken, and hands it over (once).
    pub fn take(&self) -> Result<Baseline, String> {
        let mut state = self.finished();
        if !matches!(&*state, State::Done(_)) {
            return Err(match state.ended() {
                Ok(_) => "the run's baseline was already handed over".into(),
                Err(err) => err,
            });
        }
        let ended = State::Handed(state.ended());
        match std::mem::replace(&mut *state, ended) {
            State::Done(done) => done,
            _ => Err(STILL_RUNNING.into()),
        }
    }

    /// The state once the thread has ended (joined here, by the first
    /// caller; the others wait on the lock).
    fn finished(&self) -> std::sync::MutexGuard<'_, State> {
        let mut state = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if matches!(&*state, State::Running(_)) {
            let placeholder = State::Handed(Err(String::new()));
            if let State::Running(thread) = std::mem::replace(&mut *state, placeholder) {
                let done = thread.join().unwrap_or_else(|_| {
                    Err("taking the run's baseline failed unexpectedly".into())
                });
                *state = State::Done(done);
            }
        }
        state
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taken(dir: &std::path::Path) -> Result<Baseline, String> {
        let work = dir.join("work");
        std::fs::create_dir_all(&work).map_err(|e| e.to_string())?;
        let shadow = ShadowRepo::init(&dir.join("shadow.git"), &work).map_err(|e| e.to_string())?;
        let baseline = shadow.baseline().map_err(|e| e.to_string())?;
        Ok(Baseline { shadow, baseline })
    }

    #[test]
    fn the_baseline_is_waited_for_by_any_clone_and_handed_over_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        let taking = BaselineThread::spawn(move || taken(&path));
        let other = taking.clone();
        let waiter = std::thread::spawn(move || other.wait());
        assert_eq!(taking.wait(), Ok(()));
        assert_eq!(waiter.join().unwrap(), Ok(()));
        let first = taking.take().unwrap();
        assert_eq!(first.shadow.head().unwrap(), first.baseline);
        let again = taking.take().map(|t| t.baseline);
        assert_eq!(
            again,
            Err("the run's baseline was already handed over".into())
        );
        assert_eq!(taking.wait(), Ok(()), "how it ended is kept");
    }

    #[test]
    fn a_failed_or_panicked_thread_is_an_error_to_every_caller() {
        let failed = BaselineThread::spawn(|| Err("could not read a.txt".into()));
        assert_eq!(failed.wait(), Err("could not read a.txt".into()));
        assert_eq!(
            failed.take().map(|t| t.baseline),
            Err("could not read a.txt".into())
        );
        assert_eq!(failed.wait(), Err("could not read a.txt".into()));

        let panicked = BaselineThread::spawn(|| panic!("a bug"));
        let why = panicked.wait().unwrap_err();
        assert!(why.contains("failed unexpectedly"), "{why}");
        assert!(panicked.take().is_err());
    }
}
