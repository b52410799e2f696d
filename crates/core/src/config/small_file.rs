//! The one way ah reads a small file of the user's or the project's
//! configuration that a cloned repository may ship (`.ah/agents/*.md`,
//! `.ah/tools/*.toml`): a regular file (never a FIFO or a device, which
//! would hang or flood the read), within its folder's bound when it has
//! one (a project's file never through a link out of the project), at most
//! [`MAX_BYTES`], UTF-8.

use std::fs;
use std::io::Read;
use std::path::Path;

/// The largest file read.
pub const MAX_BYTES: u64 = 64 * 1024;

/// The text of `file`, or why it is not read (a phrase about "it").
pub fn read(file: &Path, within: Option<&Path>) -> Result<String, String> {
    if let Some(within) = within {
        let inside = match (file.canonicalize(), within.canonicalize()) {
            (Ok(real), Ok(within)) => real.starts_with(within),
            _ => false,
        };
        if !inside {
            return Err("it is a link out of the project; ah does not read it".into());
        }
    }
    if !fs::metadata(file).is_ok_and(|meta| meta.is_file()) {
        return Err("it is not a regular file".into());
    }
    let mut bytes = Vec::new();
    fs::File::open(file)
        .and_then(|opened| opened.take(MAX_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|err| format!("cannot read it: {err}"))?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(format!("it is larger than {} KiB", MAX_BYTES / 1024));
    }
    String::from_utf8(bytes).map_err(|_| "it is not UTF-8 text".into())
}
