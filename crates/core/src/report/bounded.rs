//! The report's one way to read a run's files: beneath the run's folder
//! with no link followed, only a regular file (never blocking on a FIFO),
//! and at most a cap of bytes, saying whether there was more.

use std::io::Read;
use std::path::Path;

use ah_tools::fs_beneath::{BeneathError, open_file};

/// What was read of a file: at most the cap, and whether it went on.
pub(super) struct Bounded {
    pub bytes: Vec<u8>,
    /// The file holds more than `bytes`.
    pub cut: bool,
}

/// At most `cap` bytes of the regular file `name` in `dir`; `None` when
/// there is no such file.
pub(super) fn read(dir: &Path, name: &str, cap: u64) -> Result<Option<Bounded>, BeneathError> {
    let file = match open_file(dir, name, false) {
        Ok(file) => file,
        Err(BeneathError::NotFound) => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut bytes = Vec::new();
    file.take(cap + 1).read_to_end(&mut bytes)?;
    let cut = bytes.len() as u64 > cap;
    bytes.truncate(cap as usize);
    Ok(Some(Bounded { bytes, cut }))
}
