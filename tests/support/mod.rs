//! Helpers shared by the integration tests in `tests/`.
//!
//! `tests/all.rs` declares this module once, next to every test module, so
//! it is compiled once for the one test binary and each test file reaches it
//! as `crate::support`. Being one crate, a helper no test uses shows up as
//! dead code.

pub(crate) mod fork;
pub(crate) mod host;
pub(crate) mod mcp;
pub(crate) mod mock;
pub(crate) mod org;
pub(crate) mod podman;
pub(crate) mod snap;
pub(crate) mod steps;
pub(crate) mod tmux;
pub(crate) mod work;
