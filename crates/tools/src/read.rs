//! The `read` tool: shows a text file with numbered lines, a page at a time,
//! streamed (`page`) so that a file of any size costs a page of memory.

pub mod image;
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
             the output says which offset to continue from. A PNG, JPEG, GIF or WebP picture is \
             shown to you as an image; only the {} most recent pictures ({} MB of them) stay \
             in the conversation, each older one becomes a note and can be read again. \
             Directories and other binary files are refused: use bash (ls, find, xxd) for those.",
            image::PER_REQUEST,
            image::REQUEST_BYTES / 1_000_000
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
    let opened = fs_beneath::unblock(move || {
        let file = fs_beneath::open_file(&root, &rel, false)
            .map_err(|e| open_error(&name, e, "nothing was read"))?;
        let size = file
            .metadata()
            .map_err(|e| format!("cannot read {name}: {e}"))?
            .len();
        if let Some(picture) = picture_of(&file, &name)? {
            return picture_output(file, size, &name, picture).map(ReadContent::Picture);
        }
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
        Ok::<_, String>(ReadContent::Text(page, size))
    })
    .await??;
    let (page, size) = match opened {
        ReadContent::Picture(output) => return Ok(output),
        ReadContent::Text(page, size) => (page, size),
    };

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

/// What `read` found: a picture for the model, or a page of text.
enum ReadContent {
    Picture(ToolOutput),
    Text(Page, u64),
}

/// The picture `file` is, if it is one (its first bytes say so).
fn picture_of(file: &File, name: &str) -> Result<Option<image::Picture>, String> {
    use std::os::unix::fs::FileExt;
    let mut head = vec![0; image::SNIFF];
    let mut got = 0;
    while got < head.len() {
        match file.read_at(&mut head[got..], got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("cannot read {name}: {e}")),
        }
    }
    head.truncate(got);
    match image::sniff(&head) {
        None => Ok(None),
        Some(Ok(picture)) => Ok(Some(picture)),
        Some(Err(kind)) => Err(format!(
            "{name} looks like an {kind} image whose size its header does not give: ah sends \
             no image it cannot measure"
        )),
    }
}

/// A picture as the result of `read`: its bytes (the model gets them as
/// an image after the turn's results) and what it is.
fn picture_output(
    file: File,
    size: u64,
    name: &str,
    picture: image::Picture,
) -> Result<ToolOutput, String> {
    use std::io::Read;
    if let Some(why) = image::refusal(&picture, size) {
        return Err(format!(
            "{name} is an image ({}): {why}",
            picture.media_type
        ));
    }
    let mut bytes = Vec::new();
    file.take(image::MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {name}: {e}"))?;
    if let Some(why) = image::refusal(&picture, bytes.len() as u64) {
        return Err(format!(
            "{name} is an image ({}): {why}",
            picture.media_type
        ));
    }
    Ok(ToolOutput {
        content: format!(
            "{name} is an image ({}, {}×{} pixels, {} KB); it is shown to you after the \
             results of this turn",
            picture.media_type,
            picture.width,
            picture.height,
            (bytes.len() as u64).div_ceil(1000)
        ),
        is_error: false,
        details: json!({
            "path": name,
            "image": {
                "media_type": picture.media_type,
                "width": picture.width,
                "height": picture.height,
                "bytes": bytes.len(),
            },
        }),
        stdout: bytes,
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
