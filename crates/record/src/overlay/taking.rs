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
pub struct Taken {
    pub shadow: ShadowRepo,
    pub baseline: Oid,
}

/// What [`Taking::finished`] never leaves, said rather than panicked.
const STILL_RUNNING: &str = "the run's baseline is still being taken";

/// A baseline being taken; cheap to clone (clones share the one thread).
#[derive(Clone)]
pub struct Taking(Arc<Mutex<State>>);

enum State {
    Running(JoinHandle<Result<Taken, String>>),
    Done(Result<Taken, String>),
    /// [`Taking::take`] has the result; only how it ended is kept.
    Handed(Result<(), String>),
}

impl std::fmt::Debug for Taking {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Taking").finish_non_exhaustive()
    }
}

impl Taking {
    /// Runs `take` on a thread of its own.
    pub fn spawn(take: impl FnOnce() -> Result<Taken, String> + Send + 'static) -> Taking {
        Taking(Arc::new(Mutex::new(State::Running(std::thread::spawn(
            take,
        )))))
    }

    /// Blocks until the baseline is taken: why it could not be, if not.
    pub fn wait(&self) -> Result<(), String> {
        match &*self.finished() {
            State::Done(done) => done.as_ref().map(|_| ()).map_err(Clone::clone),
            State::Handed(ended) => ended.clone(),
            State::Running(_) => Err(STILL_RUNNING.into()),
        }
    }

    /// Blocks until the baseline is taken, and hands it over (once).
    pub fn take(&self) -> Result<Taken, String> {
        let mut state = self.finished();
        let ended = match &*state {
            State::Done(done) => done.as_ref().map(|_| ()).map_err(Clone::clone),
            State::Handed(_) => return Err("the run's baseline was already handed over".into()),
            State::Running(_) => return Err(STILL_RUNNING.into()),
        };
        match std::mem::replace(&mut *state, State::Handed(ended)) {
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
