//! The `edit` tool: replaces an exact piece of text in a file. Ambiguous or
//! missing matches are errors, so the model never edits the wrong place.

use std::fs::File;
use std::os::unix::fs::FileExt as _;

use ah_base::count;
use serde_json::json;

use super::input::Input;
use super::read::{is_binary, push_line, read_file};
use super::write::allowed;
use super::{Exec, ToolOutput, bounds, fs_beneath, note_full_output, path, truncate};
use ah_llm::ToolDef;

/// Lines of unchanged context shown around the edit.
const CONTEXT_LINES: usize = 3;
/// How the model can see what was cut from the edited region.
const SEE_MORE: &str = "read the file (offset and limit) to see the rest";

pub fn spec() -> ToolDef {
    ToolDef {
        name: "edit".to_string(),
        description: "Replace exact text in a file. `old_string` must match the file exactly, \
                      including whitespace and indentation, and must occur exactly once unless \
                      `replace_all` is true; include enough surrounding lines to make it unique. \
                      `path` is relative to /work or absolute under /work. Returns the edited \
                      region with line numbers."
            .to_string(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File to edit"},
                "old_string": {"type": "string", "description": "Exact text to replace"},
                "new_string": {"type": "string", "description": "Text to put in its place"},
                "replace_all": {"type": "boolean", "description": "Replace every occurrence (default false)"}
            },
            "required": ["path", "old_string", "new_string"],
            "additionalProperties": false
        }),
    }
}

pub async fn run(input: Input<'_>, exec: &dyn Exec) -> ToolOutput {
    edit(input, exec).await.unwrap_or_else(ToolOutput::error)
}

async fn edit(input: Input<'_>, exec: &dyn Exec) -> Result<ToolOutput, String> {
    let path = input.string("path");
    let old = input.string("old_string");
    let new = input.string("new_string");
    let replace_all = input.boolean("replace_all").unwrap_or(false);
    if old.is_empty() {
        return Err("old_string is empty: give the exact text to replace \
                    (use write to create a file)"
            .to_string());
    }
    if old == new {
        return Err("old_string and new_string are the same: nothing would change".to_string());
    }
    let resolved = path::resolve(exec.root(), path).map_err(|e| e.to_string())?;
    let shown = resolved.display();
    allowed(&resolved, exec)?;
    let (file, bytes) = read_file(exec.root(), &resolved, true, "edit").await?;
    if is_binary(&bytes) {
        return Err(format!("{shown} is a binary file: edit works on text only"));
    }
    let text = String::from_utf8(bytes)
        .map_err(|_| format!("{shown} is not valid UTF-8: edit works on UTF-8 text only"))?;

    let replacements = text.matches(old).count();
    if replacements == 0 {
        return Err(format!(
            "old_string was not found in {shown}; nothing was changed.{}",
            hint(&text, old)
        ));
    }
    if replacements > 1 && !replace_all {
        return Err(format!(
            "old_string occurs {replacements} times in {shown}; nothing was changed. \
             Include more surrounding lines to pick one, or set replace_all to true."
        ));
    }
    let edited_bytes = (text.len() as u64 - replacements as u64 * old.len() as u64)
        .saturating_add((replacements as u64).saturating_mul(new.len() as u64));
    if edited_bytes > bounds::MAX_EDIT_BYTES {
        let what = format!(
            "{shown} after {}",
            count(replacements, "replacement", "replacements")
        );
        return Err(format!(
            "{} Nothing was changed.",
            bounds::result_too_big("edit", &what, edited_bytes, bounds::MAX_EDIT_BYTES)
        ));
    }
    // The first match starts at the same byte in the old and the new text.
    let start = text.find(old).unwrap_or(0);
    let edited = if replace_all {
        text.replace(old, new)
    } else {
        text.replacen(old, new, 1)
    };
    if let Err(message) = rewrite(file, edited.as_bytes().to_vec(), shown.clone()).await {
        // A failed write may have truncated the file.
        return Ok(ToolOutput {
            may_change_files: true,
            ..ToolOutput::error(message)
        });
    }

    let lines_removed = replacements * line_span(old);
    let lines_added = replacements * line_span(new);
    let summary = format!(
        "Edited {shown}: {}, {} removed, {lines_added} added.\n",
        count(replacements, "replacement", "replacements"),
        count(lines_removed, "line", "lines")
    );
    let region = snippet(&edited, start, start + new.len());
    let budget = exec.limits().edit.saturating_sub(summary.chars().count());
    let kept = truncate::tail(&region, budget);
    Ok(ToolOutput {
        content: format!(
            "{summary}{}",
            note_full_output(kept, &region, exec, SEE_MORE)
        ),
        is_error: false,
        details: json!({
            "path": shown,
            "replacements": replacements,
            "lines_removed": lines_removed,
            "lines_added": lines_added,
        }),
        // The whole region, for the step file and the session.
        stdout: region.into_bytes(),
        stderr: Vec::new(),
        exit_code: None,
        may_change_files: true,
    })
}

/// Replaces the whole content of the file `edit` opened and read, through the
/// same descriptor, so the file rewritten is the file read.
async fn rewrite(file: File, bytes: Vec<u8>, shown: String) -> Result<(), String> {
    fs_beneath::unblock(move || {
        file.set_len(0)
            .and_then(|()| file.write_all_at(&bytes, 0))
            .map_err(|e| format!("cannot write {shown}: {e}"))
    })
    .await?
}

/// How many lines a piece of text touches: "" → 0, "a" → 1, "a\nb" → 2, "a\n" → 1.
fn line_span(text: &str) -> usize {
    text.lines().count()
}

/// Why a string may not have matched, when we can tell.
fn hint(text: &str, old: &str) -> String {
    let trimmed = old.trim();
    if old.contains('\n') && !old.contains("\r\n") && text.contains(&old.replace('\n', "\r\n")) {
        " The file uses CRLF line endings: match them with \\r\\n.".to_string()
    } else if !trimmed.is_empty() && trimmed != old && text.contains(trimmed) {
        " It matches after trimming leading/trailing whitespace: check indentation and line ends."
            .to_string()
    } else {
        " Read the file again and copy the text exactly.".to_string()
    }
}

/// Numbered lines of `text` covering bytes `start..end`, with some context;
/// long lines are cut as `read` cuts them.
fn snippet(text: &str, start: usize, end: usize) -> String {
    let first = text[..start].matches('\n').count();
    let region = &text[start..end];
    // A final newline ends the region's last line; it does not start another.
    let last = first
        + region
            .strip_suffix('\n')
            .unwrap_or(region)
            .matches('\n')
            .count();
    let from = first.saturating_sub(CONTEXT_LINES);
    let to = last + CONTEXT_LINES;
    let mut out = String::new();
    for (index, line) in text.lines().enumerate().take(to + 1).skip(from) {
        push_line(&mut out, index + 1, line, 0);
    }
    out
}

#[cfg(test)]
mod tests;
