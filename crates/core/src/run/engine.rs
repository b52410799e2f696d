//! The engines of a run behind one pair of traits, and the one place they
//! are registered ([`engine`]). An engine opens its run (reads what it
//! needs, settles the run, opens and locks its session: [`Engine::open`]),
//! enters the started run (stores its first messages, configures its loop:
//! [`Engine::enter`]) and then drives the run's tools until it is done
//! ([`Loop::drive`]). Everything around that — the sandbox's start, the
//! signals and live keys, the end of the run with its patch, manifest and
//! review — is the lifecycle's, the same for every engine (`run/mod.rs`).
//!
//! Adding an engine: one file under `run/` with a type implementing
//! [`Engine`] (and its loop, [`Loop`]), a variant of the public
//! [`super::Engine`] request for the front-ends, and one line in
//! [`engine`].

use anyhow::Result;

use super::settle::RunSetup;
use super::{Front, Open, RunEnd, RunOptions, RunParts};
use crate::agent::EndReason;
use crate::time_travel::files::Origin;
use ah_record::run::Run;
use ah_session::Session;

/// What drives a run: its opening and its entry into the started run.
#[async_trait::async_trait(?Send)]
pub(crate) trait Engine {
    /// Reads what the engine needs, settles the run and opens its session
    /// with the session's lock held; or the prompt was queued for the ah
    /// that holds the session.
    async fn open(&mut self, options: &mut RunOptions, front: &mut dyn Front) -> Result<Open>;

    /// Enters the started run: the engine's loop, ready to drive it.
    fn enter(self: Box<Self>, at: Entry<'_>) -> Result<Box<dyn Loop>>;
}

/// An engine's loop in its started run.
#[async_trait::async_trait(?Send)]
pub(crate) trait Loop {
    /// Runs the loop until the engine is done.
    async fn drive(self: Box<Self>, with: RunParts<'_>) -> Driven;

    /// The same loop once more, from the same start: another attempt at
    /// the task in a run of its own beside this one, on a branch of its own
    /// (`None`: the engine runs only one attempt at a time).
    fn again(&self) -> Option<Box<dyn Loop>> {
        None
    }

    /// The same loop going on in the same run from the session's message
    /// `start` (the user's notes of a review sent back for revision;
    /// `None`: the engine cannot be sent back, and its review offers no
    /// revise).
    fn continued(&self, _start: String) -> Option<Box<dyn Loop>> {
        None
    }
}

/// How a loop ended.
pub(crate) struct Driven {
    /// How the session's intake closes.
    pub(crate) reason: EndReason,
    /// What the end of the run does.
    pub(crate) end: RunEnd,
    /// Where the loop's branches of the session end, when it kept to its
    /// own (the agent's one; a work loop's one per phase, the latest last).
    pub(crate) heads: Vec<String>,
}

impl Driven {
    /// A loop that ended without a branch of its own to tell.
    pub(crate) fn of((reason, end): (EndReason, RunEnd)) -> Driven {
        Driven {
            reason,
            end,
            heads: Vec::new(),
        }
    }
}

/// What an engine enters its started run with.
pub(crate) struct Entry<'a> {
    pub(crate) options: &'a RunOptions,
    pub(crate) setup: &'a RunSetup,
    pub(crate) session: &'a mut Session,
    pub(crate) run: &'a Run,
    /// Where the run's files came from.
    pub(crate) origin: &'a Origin,
    pub(crate) front: &'a mut dyn Front,
}

/// The engine a front-end asked for: the one registration of engines.
pub(crate) fn engine(asked: super::Engine) -> Box<dyn Engine> {
    match asked {
        super::Engine::Agent => Box::new(super::agent::AgentEngine::default()),
        super::Engine::Work { issue, max_rounds } => {
            Box::new(super::work::WorkEngine::new(issue, max_rounds))
        }
        super::Engine::Org(request) => Box::new(super::org::OrgEngine::new(request)),
    }
}
