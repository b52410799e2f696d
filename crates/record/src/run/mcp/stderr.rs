//! An MCP server's standard error in the run directory: at most
//! [`STDERR_CAP`] bytes over all its starts, line by line with the
//! secrets ah knows taken out, the rest read and dropped (so the server
//! never blocks on a full pipe).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};

/// The most bytes of a server's standard error kept, over all its starts.
pub(super) const STDERR_CAP: u64 = 1024 * 1024;

/// The longest line redacted whole; a longer one is cut into pieces.
const MAX_LINE: u64 = 64 * 1024;

/// Where the standard error of the server `name` goes, in the run's folder.
pub(super) fn in_run_dir(name: &str) -> PathBuf {
    Path::new("mcp").join(format!("{name}.stderr"))
}

pub(super) struct StderrLog {
    path: PathBuf,
    written: AtomicU64,
}

impl StderrLog {
    pub(super) fn new(run_dir: &Path, name: &str) -> StderrLog {
        StderrLog {
            path: run_dir.join(in_run_dir(name)),
            written: AtomicU64::new(0),
        }
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Copies `stderr` to the file until it ends.
    pub(super) async fn pump(self: std::sync::Arc<StderrLog>, stderr: impl AsyncRead + Unpin) {
        let file = async {
            if let Some(dir) = self.path.parent() {
                tokio::fs::create_dir_all(dir).await?;
            }
            tokio::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)
                .await
        };
        let mut file = file.await.ok();
        let mut reader = BufReader::new(stderr);
        let mut line = Vec::new();
        loop {
            line.clear();
            match (&mut reader)
                .take(MAX_LINE)
                .read_until(b'\n', &mut line)
                .await
            {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            let Some(out) = file.as_mut() else { continue };
            let before = self.written.fetch_add(line.len() as u64, Ordering::Relaxed);
            if before >= STDERR_CAP {
                continue;
            }
            let room = usize::try_from(STDERR_CAP - before).unwrap_or(usize::MAX);
            // Redacted whole, then cut: a cut could split a secret.
            let text = ah_base::redact::bytes(&line);
            let mut result = out.write_all(&text[..text.len().min(room)]).await;
            if text.len() > room && result.is_ok() {
                result = out
                    .write_all(b"\n[ah: cut here: the rest of its standard error is dropped]\n")
                    .await;
            }
            if result.is_err() {
                file = None;
            }
        }
    }
}
