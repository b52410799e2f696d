//! What a run needs of the front-end that drives it: a place for its
//! events, a console for the signal watch, the live keys, the image build's
//! progress, and the review's lines and question ([`ReviewFront`]). The
//! front-end decides how each looks; the run decides when each happens and
//! what follows from the user's answers.

use std::any::Any;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Result;

use super::review::ReviewFront;
use super::signals::Interrupt;
use crate::agent::{AbortHandle, AbortSignal};
use crate::event::RunEvent;
use ah_sandbox::image::BuildOptions;

/// The front-end of one run.
#[async_trait::async_trait(?Send)]
pub trait Front: ReviewFront + Send {
    /// An event of a run, whatever its engine: the model's text, tool
    /// calls, steps, phases, ticks, the end (see [`crate::event`]).
    fn show(&mut self, event: &RunEvent<'_>);

    /// An agent asks the user (`@@user` in `ah org`): the answer, or `None`
    /// when nobody can answer here (no terminal, `--json`) or the user would
    /// rather not now, which stops the run with the question saved; `later`
    /// is the command that answers it then.
    async fn ask_user(&mut self, agent: &str, question: &str, later: &str) -> Option<String>;

    /// A line for the person running ah that is not part of the event
    /// stream: where the files came from, what the network allows, a
    /// warning, where the patch was saved. Already escaped for a terminal
    /// where it quotes the model or the project.
    fn notice(&mut self, line: &str);

    /// Where the signal watch says what it does, from any thread.
    fn console(&self) -> Arc<dyn Console>;

    /// The engine starts: a front-end with a person at a terminal may read
    /// keys that steer, finalize or abort it. Whatever it returns is
    /// dropped when the engine is over, before the review.
    fn live(&mut self, controls: LiveControls) -> Option<Box<dyn Any>>;

    /// The sandbox image is missing: build it, showing progress.
    async fn build_image(&mut self, options: &BuildOptions) -> Result<()>;
}

/// The signal watch's voice: one line to the user, and the terminal put
/// back into its own mode before ah exits at once.
pub trait Console: Send + Sync {
    fn say(&self, line: &str);
    fn restore_terminal(&self);
}

/// What live keys act on.
pub struct LiveControls {
    /// Asks the engine to finalize: stop after the running tool call.
    pub stop: AbortHandle,
    /// Tells whether the run is aborting.
    pub abort: AbortSignal,
    /// Counts as SIGINT (Ctrl+C read as a key in raw mode).
    pub interrupt: Interrupt,
    /// The session whose queue takes steering messages.
    pub session_db: PathBuf,
}
