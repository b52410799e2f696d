//! ah: a coding agent whose tools run in a sandbox and whose changes reach the
//! host only as a reviewed patch. Modules are layers; a lower layer never
//! imports a higher one (see `tests/layers.rs`):
//! `llm` → `session` → `tools` → `sandbox` → `agent` → `work` → `cli`.

pub mod agent;
pub mod cli;
pub mod llm;
pub mod sandbox;
pub mod session;
pub mod tools;
pub mod work;
