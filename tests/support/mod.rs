//! Helpers shared by the integration tests in `tests/`.
//!
//! Every test crate declares `mod support;` and so compiles this module on its
//! own; each one uses a different part of it, so items unused by one crate are
//! not dead code overall. That is why dead-code (and unused re-export)
//! warnings are off here.
#![allow(dead_code)]

pub mod fork;
pub mod host;
pub mod mock;
pub mod podman;
pub mod steps;
pub mod tmux;
pub mod work;

#[allow(unused_imports)]
pub use mock::{MockServer, RecordedRequest, Reply, Turn};
