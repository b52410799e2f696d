//! Helpers shared by the integration tests in `tests/`.
//!
//! `tests/all.rs` declares this module once, next to every test module, so
//! it is compiled once for the one test binary and each test file reaches it
//! as `crate::support`. Being one crate, a helper no test uses shows up as
//! dead code.

pub mod fork;
pub mod host;
pub mod mcp;
pub mod mock;
pub mod org;
pub mod podman;
pub mod snap;
pub mod steps;
pub mod tmux;
pub mod work;
