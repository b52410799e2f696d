//! The `read` tool: shows a text file with numbered lines, a page at a time,
//! streamed ([`page`]) so that a file of any size costs a page of memory.

mod page;

use std::fmt::Write as _;
use std::fs::File;
use std::path::Path;

use serde_json::json;

use super::bounds::{self, Capped};
use super::fs_beneath::{self, BeneathError};
use super::input::Input;
use super::path::{self, Resolved};
use super::{Exec, ToolOutput, note_full_output, truncate};
use ah_llm::ToolDef;
pub(super) use page::push_line;
use page::{BINARY_SNIFF, MAX_LINE_CHARS, Page, PageError};

/// Lines shown when the model gives no `limit`.
const DEFAULT_LIMIT: u64 = 2000;
/// How the model can see what was cut from a page.
const SEE_MORE: &str = "read fewer lines at a time (offset and limit) to see the rest";

pub fn spec() -> ToolDef {
    ToolDef {
        name: "read".to_string(),
        description: format!(
            "Read a text file in the work directory. Returns its lines numbered like `cat -n` \
             (number, tab, line). `path` is relative to /work or absolute under /work. Shows \
             {DEFAULT_LIMIT} lines from `offset` (1-based, default 1) unless `limit` says \
             otherwise; lines over {MAX_LINE_CHARS} characters are cut. When more lines remain, \
             the output says which offset to continue from. Directories and binary files are \
             refused: use bash (ls, find, xxd) for those."
        ),
        input_schema: json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File to read, e.g. src/main.rs or /work/src/main.rs"},
                "offset": {"type": "integer", "minimum": 1, "description": "First line to show (1-based)"},
                "limit": {"type": "integer", "minimum": 1, "description": "How many lines to show (default 2000)"}
            },
            "required": ["path"],
            "additionalProperties": false
        }),
    }
}

pub async fn run(input: Input<'_>, exec: &dyn Exec) -> ToolOutput {
    read(input, exec).await.unwrap_or_else(ToolOutput::error)
}

async fn read(input: Input<'_>, exec: &dyn Exec) -> Result<ToolOutput, String> {
    let path = input.string("path");
    // The schema's minimum keeps both at 1 or more.
    let offset = input.integer("offset").unwrap_or(1);
    let limit = input.integer("limit").unwrap_or(DEFAULT_LIMIT);
    let resolved = path::resolve(exec.root(), path).map_err(|e| e.to_string())?;
    let shown = resolved.display();
    let max_chars = exec.limits().read;
    let (root, rel, name) = (
        exec.root().to_path_buf(),
        resolved.rel.clone(),
        shown.clone(),
    );
    let (page, size) = fs_beneath::unblock(move || {
        let file = fs_beneath::open_file(&root, &rel, false)
            .map_err(|e| open_error(&name, e, "nothing was read"))?;
        let size = file
            .metadata()
            .map_err(|e| format!("cannot read {name}: {e}"))?
            .len();
        let page = Page::read(file, size, offset, limit, max_chars).map_err(|e| match e {
            PageError::Binary => format!(
                "{name} is a binary file (it has NUL bytes): read shows text only; \
                 use bash (e.g. `xxd {name} | head`) to inspect it"
            ),
            PageError::PastEnd(total) => {
                format!("offset {offset} is past the end of {name}, which has {total} lines")
            }
            PageError::Io(e) => format!("cannot read {name}: {e}"),
        })?;
        Ok::<_, String>((page, size))
    })
    .await??;

    // Only a first line longer than the cap makes the page longer.
    let kept = truncate::head_tail(&page.text, max_chars, None);
    let mut content = note_full_output(kept, &page.text, exec, SEE_MORE);
    if page.total == Some(0) {
        content = format!("({shown} is empty)");
    } else if page.more {
        let whole = match page.total {
            Some(total) => format!("file has {total} lines"),
            None => format!("file is {}, too big to count its lines", bounds::size(size)),
        };
        let _ = write!(
            content,
            "\n({whole}; showing {}-{}; use offset={} to continue)",
            page.first,
            page.last,
            page.last + 1
        );
    }
    let lines_shown = if page.total == Some(0) {
        0
    } else {
        page.last - page.first + 1
    };
    Ok(ToolOutput {
        content,
        is_error: false,
        details: json!({"path": shown, "lines_shown": lines_shown, "total_lines": page.total}),
        // The whole page, for the step file and the session.
        stdout: page.text.into_bytes(),
        stderr: Vec::new(),
        exit_code: None,
        may_change_files: false,
    })
}

/// Opens the regular file at `resolved` beneath `root`, so that no symlink
/// swapped in after [`path::resolve`] is followed, and reads it whole if it
/// holds at most [`bounds::MAX_EDIT_BYTES`] (`tool` names who asks, for the
/// error); never blocks on a FIFO. With `write` the file stays open for
/// `edit` to rewrite it. Errors are messages for the model.
pub(super) async fn read_file(
    root: &Path,
    resolved: &Resolved,
    write: bool,
    tool: &'static str,
) -> Result<(File, Vec<u8>), String> {
    let (root, rel, shown) = (root.to_path_buf(), resolved.rel.clone(), resolved.display());
    let outcome = if write {
        "nothing was changed"
    } else {
        "nothing was read"
    };
    fs_beneath::unblock(move || {
        let mut file = fs_beneath::open_file(&root, &rel, write)
            .map_err(|e| open_error(&shown, e, outcome))?;
        let bytes = bounds::read_capped(&mut file).map_err(|e| match e {
            Capped::TooBig(bytes) => bounds::too_big(tool, &shown, bytes),
            Capped::Io(e) => format!("cannot read {shown}: {e}"),
        })?;
        Ok((file, bytes))
    })
    .await?
}

/// The model's message for a file that `read` or `edit` could not open;
/// `outcome` says what did not happen (for a path changed under us).
fn open_error(shown: &str, e: BeneathError, outcome: &str) -> String {
    match e {
        BeneathError::NotFound => {
            format!("{shown} does not exist: check the path (bash `ls` shows what is there)")
        }
        BeneathError::Directory => {
            format!("{shown} is a directory, not a file: use bash (`ls {shown}`) to list it")
        }
        BeneathError::NotRegular => {
            format!("{shown} is not a regular file (a device, socket or FIFO)")
        }
        BeneathError::Changed => {
            format!("{shown} changed while it was being opened: {e}; {outcome}. Try again.")
        }
        e => format!("cannot open {shown}: {e}"),
    }
}

/// Whether the file looks binary: a NUL byte among its first bytes.
pub(super) fn is_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(BINARY_SNIFF)].contains(&0)
}

#[cfg(test)]
mod tests;
