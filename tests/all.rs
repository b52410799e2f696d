//! The integration tests, as one test binary.
//!
//! Each `tests/NAME.rs` is a module here rather than a crate of its own, so
//! the layer crates are linked into one test executable instead of one per
//! file, and the helpers in `tests/support/` are compiled once and shared as
//! `crate::support`. A new test file must be declared below; cargo would not
//! build it otherwise, and `included` fails naming it.

// The workspace denies unwrap and expect outside tests, and clippy counts
// `#[test]` functions as tests but not the helpers of an integration test
// crate (here `support/` and each file's own): in all of them a failure is
// the test failing, with the message it panics with.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod abort;
mod attempts;
mod batch;
mod best_of;
mod command_line;
mod commands;
mod compaction;
mod config;
mod confinement;
mod continuity;
mod cost;
mod disk_budget;
mod egress_podman;
mod host_boundary;
mod host_git;
mod image_build;
mod images;
mod included;
mod instructions;
mod json_events;
mod kube;
mod layers;
mod limits;
mod live_keys;
mod loops;
mod many_pictures;
mod mcp;
mod memory_bounds;
mod mock_server;
mod openai;
mod openai_podman;
mod org_continuity;
mod org_models;
mod org_none;
mod org_podman;
mod org_terminal;
mod output_limits;
mod overlay;
mod overlay_none;
mod own_files;
mod patch_outputs;
mod podman_backend;
mod podman_channel;
mod poison;
mod project_tools;
mod queue;
mod read_policy;
mod remote_engine;
mod remote_engine_env;
mod remote_engine_modes;
mod report;
mod retries;
mod review_ask;
mod review_auto;
mod review_hunks;
mod review_pager;
mod review_revise;
mod review_saved;
mod run_folder;
mod run_none;
mod run_podman;
mod run_rootless;
mod session_resolve;
mod sessions;
mod snapshot_doctor;
mod snapshot_end;
mod snapshot_errors;
mod snapshot_run;
mod snapshot_terminal;
mod start_podman;
mod switch;
mod terminal_safe;
mod text_protocol;
mod time_travel;
mod time_travel_podman;
mod validation;
mod weakening;
mod withheld;
mod work_attempts;
mod work_none;
mod work_podman;
