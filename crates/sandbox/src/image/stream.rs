//! Running one build step as a child process, passing its output to the
//! caller's progress callback line by line ([`Progress::Output`]) and keeping the last lines for
//! the error message when the step fails.

use std::collections::VecDeque;
use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use super::{ImageError, OnProgress, Progress};

/// Lines of output kept for a failure message.
const TAIL_LINES: usize = 30;

/// Runs `cmd` to the end; a non-zero exit is an [`ImageError::Step`] naming
/// `step`, showing the output's tail and `fix`.
pub(super) async fn run(
    mut cmd: Command,
    step: &'static str,
    fix: &'static str,
    progress: &mut OnProgress<'_>,
) -> Result<(), ImageError> {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| ImageError::Io { what: step, source })?;
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(ImageError::Io {
            what: step,
            source: std::io::Error::other("child started without output pipes"),
        });
    };
    let mut out = BufReader::new(stdout).split(b'\n');
    let mut err = BufReader::new(stderr).split(b'\n');
    let mut tail = VecDeque::with_capacity(TAIL_LINES);
    let (mut out_open, mut err_open) = (true, true);
    while out_open || err_open {
        let (from_stdout, line) = tokio::select! {
            line = out.next_segment(), if out_open => (true, line),
            line = err.next_segment(), if err_open => (false, line),
        };
        match line {
            Ok(Some(bytes)) => {
                let line = String::from_utf8_lossy(&bytes).into_owned();
                progress(Progress::Output(&line));
                if tail.len() == TAIL_LINES {
                    tail.pop_front();
                }
                tail.push_back(line);
            }
            // End of that stream (or a broken pipe): stop reading it.
            Ok(None) | Err(_) if from_stdout => out_open = false,
            Ok(None) | Err(_) => err_open = false,
        }
    }
    let status = child
        .wait()
        .await
        .map_err(|source| ImageError::Io { what: step, source })?;
    if status.success() {
        Ok(())
    } else {
        Err(ImageError::Step {
            step,
            output: Vec::from(tail).join("\n"),
            fix,
        })
    }
}
