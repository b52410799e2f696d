//! The engine of ah: the run lifecycle every front-end calls ([`run`]),
//! the engines it drives (the agent loop, one model with its tools as
//! steps of the run; the work phases: plan, do, check, act; several
//! agents in one run, `ah org`), the
//! configuration, time travel (where a conversation's files stand), and
//! what the commands besides a run do ([`runs`], [`sessions`], [`sandbox`],
//! [`kube`]).
//! A front-end needs no other crate of ah's: every decision is made here,
//! and what it shows text with is in [`present`].

#![forbid(unsafe_code)]

pub mod agent;
pub mod batch;
pub mod config;
pub mod cost;
pub mod event;
pub mod kube;
pub mod org;
pub mod present;
pub mod report;
pub mod run;
pub mod runs;
pub mod sandbox;
pub mod sessions;
pub mod time_travel;
pub mod work;
