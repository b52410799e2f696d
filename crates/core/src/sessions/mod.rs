//! The commands on a project's sessions besides a run: what they set up
//! (configuration, provider, the session's lock) and what they change.

mod compact;

pub use compact::{Compacted, compact};
