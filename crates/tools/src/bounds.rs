//! How much of a sandbox file the host-side tools hold in memory. The files
//! are the model's: it can make one as large as the disk allows (or a
//! sparse one far larger), so `edit`, `apply_patch` and `write` refuse a
//! file, or a result, over [`MAX_EDIT_BYTES`] before reading or building
//! it, and `read` streams a page instead of loading the file. The errors
//! say how big the file is, the cap, and to use bash in the sandbox, where
//! a big file costs the host nothing.

use std::fs::File;
use std::io::Read as _;

/// The largest file `edit`, `apply_patch` and `write` read or write, and
/// the largest content they build (the source files a model edits by hand
/// are far smaller; generated ones that are not go through bash).
pub const MAX_EDIT_BYTES: u64 = 8 * 1024 * 1024;

/// The most `apply_patch` builds in memory for one patch, all files
/// together, before anything is written.
pub const MAX_PATCH_BYTES: u64 = 4 * MAX_EDIT_BYTES;

/// `bytes` in the largest unit that keeps a whole number in front
/// (`512 B`, `1.5 KiB`, `1.0 GiB`).
pub fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// The model's message for a file `tool` will not load: what, how big,
/// the cap, and what to do instead.
pub(super) fn too_big(tool: &str, shown: &str, bytes: u64) -> String {
    format!(
        "{shown} is {}, over the {} that {tool} works on. Use bash in the sandbox for a \
         file this big (e.g. `sed -i`, `awk`, or a script).",
        size(bytes),
        size(MAX_EDIT_BYTES)
    )
}

/// The model's message for a result `tool` will not build: a content of
/// `bytes` (`what` it is) over `cap`.
pub(super) fn result_too_big(tool: &str, what: &str, bytes: u64, cap: u64) -> String {
    format!(
        "{what} would be {}, over the {} that {tool} builds. Make smaller changes, or use \
         bash in the sandbox (e.g. `sed -i`, or a script).",
        size(bytes),
        size(cap)
    )
}

/// Reads all of `file` when it holds at most [`MAX_EDIT_BYTES`]. A bigger
/// file, or one that grows past the cap while it is read, is
/// [`Capped::TooBig`], having read at most one byte over the cap.
pub(super) fn read_capped(file: &mut File) -> Result<Vec<u8>, Capped> {
    let len = file.metadata().map_err(Capped::Io)?.len();
    if len > MAX_EDIT_BYTES {
        return Err(Capped::TooBig(len));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.take(MAX_EDIT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(Capped::Io)?;
    if bytes.len() as u64 > MAX_EDIT_BYTES {
        let now = file.metadata().map_or(bytes.len() as u64, |m| m.len());
        return Err(Capped::TooBig(now.max(bytes.len() as u64)));
    }
    Ok(bytes)
}

/// Why [`read_capped`] read nothing.
#[derive(Debug)]
pub(super) enum Capped {
    /// The file holds this many bytes, over the cap.
    TooBig(u64),
    Io(std::io::Error),
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    #[test]
    fn sizes_read_like_du_h() {
        assert_eq!(size(0), "0 B");
        assert_eq!(size(1023), "1023 B");
        assert_eq!(size(1536), "1.5 KiB");
        assert_eq!(size(MAX_EDIT_BYTES), "8.0 MiB");
        assert_eq!(size(1 << 30), "1.0 GiB");
    }

    #[test]
    fn a_file_over_the_cap_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sparse");
        let file = File::create(&path).unwrap();
        file.set_len(1 << 30).unwrap();
        let mut file = File::open(&path).unwrap();
        assert!(matches!(read_capped(&mut file), Err(Capped::TooBig(n)) if n == 1 << 30));

        let mut small = File::create(dir.path().join("small")).unwrap();
        small.write_all(b"hello").unwrap();
        let mut small = File::open(dir.path().join("small")).unwrap();
        assert_eq!(read_capped(&mut small).unwrap(), b"hello");
    }
}
