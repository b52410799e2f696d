//! The host side of a run's end: what `--review auto` decides about a
//! patch, the diffstat and hidden characters shown to a person, the patch
//! narrowed to chosen files or cut into hunks, the 3-way apply to the
//! user's repository through one hook-free git runner, and the diff pager
//! the user's own git configuration names.

#![forbid(unsafe_code)]

pub mod apply;
pub mod hunks;
pub mod pager;
pub mod review;
pub mod subpatch;
