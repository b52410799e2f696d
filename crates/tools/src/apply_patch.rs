//! The `apply_patch` tool: applies a V4A patch (see `parse`) that adds,
//! updates, moves and deletes files, all or nothing.
//!
//! Nothing is written until everything is known to work: the patch is
//! parsed; every path is confined to the work root by [`path::resolve`] and
//! checked against the write policy (both sides of a move); the files are
//! read through [`fs_beneath`] and every new content is computed in memory
//! (`matching`), each file and result within [`bounds::MAX_EDIT_BYTES`]
//! and all results within [`bounds::MAX_PATCH_BYTES`]. A bad patch, a refused path, a missing file or a hunk
//! that does not match leaves every file as it was, and the error names the
//! file and the hunk. Then each new content is staged as a temporary file in
//! its folder, and only when all are staged are they renamed into place and
//! the deleted files removed; a file replaced keeps its permission bits. A
//! path may appear once per patch.
//!
//! The patch comes in the field `input`, as in the `apply_patch` function
//! tool OpenAI models are trained on.

mod matching;
mod parse;

use std::fmt::Write as _;
use std::os::unix::fs::PermissionsExt as _;

use serde_json::{Value, json};

use super::fs_beneath::folder::{Folder, folder_of};
use super::fs_beneath::{self, BeneathError};
use super::input::Input;
use super::path::{self, Resolved};
use super::read::{is_binary, read_file};
use super::write::allowed;
use super::{Exec, ToolOutput, bounds, truncate};
use ah_llm::ToolDef;
use parse::Op;

pub fn spec() -> ToolDef {
    ToolDef {
        name: "apply_patch".to_string(),
        description: "Edit files with a patch: add, update, move and delete files in one call. \
            Paths are relative to /work or absolute under /work. Format:\n\
            *** Begin Patch\n\
            *** Add File: path/new.txt\n\
            +every line of the new file, each starting with +\n\
            *** Update File: path/old.py\n\
            *** Move to: path/renamed.py   (optional)\n\
            @@ def function():   (optional: a line just above the change, to find the place)\n\
            \x20context line (starts with a space)\n\
            -line to remove\n\
            +line to add\n\
            \x20context line\n\
            *** Delete File: path/gone.txt\n\
            *** End Patch\n\
            Give about 3 lines of context above and below each change, copied exactly from \
            the file; start each further change in a file with its own @@ line. Add \
            `*** End of File` after a hunk that must match at the end of the file. The patch \
            applies entirely or not at all: if any hunk does not match, no file is changed \
            and the error says which one."
            .to_string(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "input": {"type": "string", "description": "The whole patch, from *** Begin Patch to *** End Patch"}
            },
            "required": ["input"],
            "additionalProperties": false
        }),
    }
}

pub async fn run(input: Input<'_>, exec: &dyn Exec) -> ToolOutput {
    match plan(input.string("input"), exec).await {
        Ok(changes) => write(changes, exec).await,
        Err(message) => ToolOutput::error(format!("{message} Nothing was changed.")),
    }
}

/// One file's part of the patch, ready to write.
struct Change {
    /// `A`dd, `M`odify (update or move) or `D`elete.
    verb: char,
    /// The file written, or deleted.
    target: Resolved,
    /// The old path of a moved file, removed once the new one is in place.
    moved_from: Option<Resolved>,
    /// The new content; `None` deletes `target`.
    content: Option<String>,
    /// Permission bits of the file replaced; `None` for a new file.
    mode: Option<u32>,
}

/// Parses, confines, checks and computes every change; touches nothing.
async fn plan(patch: &str, exec: &dyn Exec) -> Result<Vec<Change>, String> {
    let ops = parse::parse(patch).map_err(|e| format!("the patch cannot be read: {e}."))?;
    let resolve = |p: &str| -> Result<Resolved, String> {
        let resolved = path::resolve(exec.root(), p).map_err(|e| format!("{e}."))?;
        allowed(&resolved, exec)?;
        Ok(resolved)
    };
    // Every path is confined and allowed before any file is read.
    let mut resolved = Vec::with_capacity(ops.len());
    let mut seen: Vec<String> = Vec::new();
    for op in &ops {
        let (from, to) = match op {
            Op::Add { path, .. } | Op::Delete { path } => (resolve(path)?, None),
            Op::Update { path, move_to, .. } => {
                (resolve(path)?, move_to.as_deref().map(resolve).transpose()?)
            }
        };
        for each in std::iter::once(&from).chain(to.as_ref()) {
            if seen.contains(&each.rel) {
                return Err(format!(
                    "{} appears twice in the patch: give each file one section.",
                    each.display()
                ));
            }
            seen.push(each.rel.clone());
        }
        resolved.push((from, to));
    }

    let mut changes = Vec::with_capacity(ops.len());
    // Bytes of new content held so far, all files together.
    let mut built = 0u64;
    for (op, (from, to)) in ops.into_iter().zip(resolved) {
        let change = match op {
            Op::Add { content, .. } => {
                must_be_absent(exec, &from, "add").await?;
                Change {
                    verb: 'A',
                    target: from,
                    moved_from: None,
                    content: Some(content),
                    mode: None,
                }
            }
            Op::Delete { .. } => {
                must_exist(exec, &from).await?;
                Change {
                    verb: 'D',
                    target: from,
                    moved_from: None,
                    content: None,
                    mode: None,
                }
            }
            Op::Update { hunks, .. } => {
                let (text, mode) = read_text(exec, &from).await?;
                let content = matching::apply(&text, &hunks)
                    .map_err(|miss| miss_message(&from, &hunks, &miss))?;
                let bytes = content.len() as u64;
                if bytes > bounds::MAX_EDIT_BYTES {
                    let what = format!("{} after the patch", from.display());
                    return Err(too_big(&what, bytes, bounds::MAX_EDIT_BYTES));
                }
                let (target, moved_from) = match to {
                    Some(to) if to.rel != from.rel => {
                        must_be_absent(exec, &to, "move a file to").await?;
                        (to, Some(from))
                    }
                    _ => (from, None),
                };
                Change {
                    verb: 'M',
                    target,
                    moved_from,
                    content: Some(content),
                    mode: Some(mode),
                }
            }
        };
        built += change.content.as_ref().map_or(0, |c| c.len() as u64);
        if built > bounds::MAX_PATCH_BYTES {
            return Err(too_big(
                "the new content of the patch's files",
                built,
                bounds::MAX_PATCH_BYTES,
            ));
        }
        changes.push(change);
    }
    Ok(changes)
}

/// A file's text and permission bits, for an update.
async fn read_text(exec: &dyn Exec, resolved: &Resolved) -> Result<(String, u32), String> {
    let shown = resolved.display();
    let (file, bytes) = read_file(exec.root(), resolved, false, "apply_patch").await?;
    let mode = file
        .metadata()
        .map_err(|e| format!("cannot inspect {shown}: {e}."))?
        .permissions()
        .mode()
        & 0o7777;
    if is_binary(&bytes) {
        return Err(format!(
            "{shown} is a binary file: apply_patch works on text only."
        ));
    }
    let text = String::from_utf8(bytes).map_err(|_| {
        format!("{shown} is not valid UTF-8: apply_patch works on UTF-8 text only.")
    })?;
    Ok((text, mode))
}

/// The error for new content over a cap: one file's, or the patch's.
fn too_big(what: &str, bytes: u64, cap: u64) -> String {
    bounds::result_too_big("apply_patch", what, bytes, cap)
}

/// Whether `resolved` opens as a regular file beneath the root (nothing is
/// read); `Err` only when the check itself could not run.
async fn probe(exec: &dyn Exec, resolved: &Resolved) -> Result<Result<(), BeneathError>, String> {
    let (root, rel) = (exec.root().to_path_buf(), resolved.rel.clone());
    fs_beneath::unblock(move || fs_beneath::open_file(&root, &rel, false).map(drop)).await
}

/// Refuses to delete what is not a regular file (without reading it).
async fn must_exist(exec: &dyn Exec, resolved: &Resolved) -> Result<(), String> {
    let shown = resolved.display();
    probe(exec, resolved).await?.map_err(|e| match e {
        BeneathError::NotFound => {
            format!("cannot delete {shown}: it does not exist; check the path.")
        }
        BeneathError::Changed => format!("cannot delete {shown}: {e}; try again."),
        e => format!("cannot delete {shown}: {e}."),
    })
}

/// Refuses to `what` (add, move to) a path where something already is.
async fn must_be_absent(exec: &dyn Exec, resolved: &Resolved, what: &str) -> Result<(), String> {
    let shown = resolved.display();
    match probe(exec, resolved).await? {
        Err(BeneathError::NotFound) => Ok(()),
        Ok(()) | Err(BeneathError::NotRegular) => Err(format!(
            "cannot {what} {shown}: it exists already; update it with *** Update File, or delete \
             it first."
        )),
        Err(BeneathError::Directory) => Err(format!("cannot {what} {shown}: it is a directory.")),
        Err(e) => Err(format!("cannot {what} {shown}: {e}.")),
    }
}

/// The model's message for a hunk that did not match.
fn miss_message(file: &Resolved, hunks: &[parse::Hunk], miss: &matching::Miss) -> String {
    let shown = file.display();
    let number = miss.hunk;
    let headers = hunks
        .get(number - 1)
        .map(|h| {
            h.headers
                .iter()
                .map(|t| format!("@@ {t}"))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    let named = if headers.is_empty() {
        format!("hunk {number} of {}", hunks.len())
    } else {
        format!("hunk {number} of {} ({headers})", hunks.len())
    };
    let what = if miss.header {
        "its @@ line"
    } else {
        "its context and '-' lines"
    };
    let after = if number > 1 {
        format!(" after hunk {}", number - 1)
    } else {
        String::new()
    };
    let mut message =
        format!("{named} does not match {shown}: {what} were not found{after}. It looked for:\n");
    for line in &miss.looked_for {
        let _ = writeln!(message, "    {line}");
    }
    message.push_str(
        "Read the file again and copy those lines exactly (indentation included); only \
         trailing whitespace may differ.",
    );
    message
}

/// Stages every new content, then renames it into place and removes the
/// deleted and moved-away files.
async fn write(changes: Vec<Change>, exec: &dyn Exec) -> ToolOutput {
    let root = exec.root().to_path_buf();
    let summary: Vec<(char, String, Option<String>)> = changes
        .iter()
        .map(|c| {
            (
                c.verb,
                c.target.display(),
                c.moved_from.as_ref().map(Resolved::display),
            )
        })
        .collect();
    let written = fs_beneath::unblock(move || commit(&root, &changes))
        .await
        .and_then(|r| r);
    if let Err(message) = written {
        return ToolOutput {
            // Folders may have been made, or some files replaced.
            may_change_files: true,
            ..ToolOutput::error(message)
        };
    }
    let mut text = String::from("Applied the patch:\n");
    let mut files = Vec::new();
    for (verb, path, from) in &summary {
        let _ = match from {
            Some(from) => writeln!(text, "{verb} {path} (moved from {from})"),
            None => writeln!(text, "{verb} {path}"),
        };
        let op = match verb {
            'A' => "add",
            'D' => "delete",
            _ => "update",
        };
        files.push(json!({"op": op, "path": path, "moved_from": from}));
    }
    ToolOutput {
        content: truncate::tail(&text, exec.limits().edit),
        is_error: false,
        details: json!({ "files": Value::Array(files) }),
        stdout: text.into_bytes(),
        stderr: Vec::new(),
        exit_code: None,
        may_change_files: true,
    }
}

/// The blocking part of [`write`]. A failure while staging removes what was
/// staged, so no file has changed; a failure after that is reported as is.
fn commit(root: &std::path::Path, changes: &[Change]) -> Result<(), String> {
    let mut staged: Vec<(Folder, String, String)> = Vec::new();
    let unstage = |staged: &[(Folder, String, String)]| {
        for (folder, temp, _) in staged {
            let _ = folder.remove(temp);
        }
    };
    for change in changes {
        let Some(content) = &change.content else {
            continue;
        };
        let shown = change.target.display();
        let staging = folder_of(root, &change.target.rel, true)
            .map_err(|e| format!("cannot write {shown}: {e}; no file was changed."))
            .and_then(|(folder, name)| {
                let temp = folder
                    .stage(content.as_bytes(), change.mode)
                    .map_err(|e| format!("cannot write {shown}: {e}; no file was changed."))?;
                Ok((folder, temp, name))
            });
        match staging {
            Ok(entry) => staged.push(entry),
            Err(message) => {
                unstage(&staged);
                return Err(message);
            }
        }
    }
    let mut staged = staged.into_iter();
    for change in changes {
        let shown = change.target.display();
        let partly = |e: &dyn std::fmt::Display| {
            format!(
                "cannot finish applying the patch at {shown}: {e}; the files before it in the \
                 patch were changed, the others were not: read them to see where things stand."
            )
        };
        let removed = if change.content.is_some() {
            let (folder, temp, name) = staged
                .next()
                .ok_or_else(|| partly(&"a staged file went missing"))?;
            folder
                .rename_into(&temp, &folder, &name)
                .map_err(|e| partly(&e))?;
            change.moved_from.as_ref()
        } else {
            Some(&change.target)
        };
        if let Some(gone) = removed {
            let (folder, name) = folder_of(root, &gone.rel, false).map_err(|e| partly(&e))?;
            folder.remove(&name).map_err(|e| partly(&e))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
