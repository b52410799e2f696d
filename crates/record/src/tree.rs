//! A work tree the model controls, seen from the host: everything in it is
//! hostile (names, file types, sizes, ignore files, timing). The walk that
//! decides what a step changed ([`scan`]) and the ignore rules it obeys
//! ([`ignore`]) live here; every file access goes through the folder handles
//! of [`ah_tools::fs_beneath::dir`], which never follow a link and never
//! open a special file. Writing a commit back into the tree (undo, restore)
//! is the shadow repo's `checkout`, on the same handles.

pub mod ignore;
pub mod scan;

#[cfg(test)]
mod tests;
