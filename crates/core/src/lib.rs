//! The engine of ah: the agent loop (one model, its tools as steps of a
//! run) and the work phases (plan, do, check, act).

pub mod agent;
pub mod work;
