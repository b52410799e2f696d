//! Running one build step as a child process, passing its output to the
//! caller's progress callback line by line ([`Progress::Output`]) and keeping the last lines for
//! the error message when the step fails. The child's stdout and stderr are
//! one pipe, so its lines come in the order it wrote them (with two pipes, a
//! warning on stderr could overtake the step line written before it).

use std::collections::VecDeque;
use std::os::fd::OwnedFd;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::unix::pipe::Receiver;
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
    let io = |source| ImageError::Io { what: step, source };
    let (reader, writer) = std::io::pipe().map_err(io)?;
    let mut child = cmd
        .stdout(writer.try_clone().map_err(io)?)
        .stderr(writer)
        .kill_on_drop(true)
        .spawn()
        .map_err(io)?;
    // The command holds the pipe's write ends: dropped, the pipe ends when
    // the child (and whatever it left holding its output) has closed it.
    drop(cmd);
    let reader = Receiver::from_owned_fd(OwnedFd::from(reader)).map_err(io)?;
    let mut lines = BufReader::new(reader).split(b'\n');
    let mut tail = VecDeque::with_capacity(TAIL_LINES);
    // The end of the output (or a broken pipe) ends the reading.
    while let Ok(Some(bytes)) = lines.next_segment().await {
        let line = String::from_utf8_lossy(&bytes).into_owned();
        progress(Progress::Output(&line));
        if tail.len() == TAIL_LINES {
            tail.pop_front();
        }
        tail.push_back(line);
    }
    let status = child.wait().await.map_err(io)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines written alternately to stdout and stderr come in the order
    /// they were written; a failure's message keeps the tail.
    #[tokio::test]
    async fn both_streams_come_in_the_order_written() {
        let mut cmd = Command::new("sh");
        cmd.args([
            "-c",
            "for i in 1 2 3 4 5; do echo out$i; echo err$i >&2; done; exit 3",
        ]);
        let mut lines = Vec::new();
        let mut progress = |p: Progress<'_>| {
            if let Progress::Output(line) = p {
                lines.push(line.to_string());
            }
        };
        let err = run(cmd, "a step", "a fix", &mut progress)
            .await
            .unwrap_err();
        let expected: Vec<String> = (1..=5)
            .flat_map(|i| [format!("out{i}"), format!("err{i}")])
            .collect();
        assert_eq!(lines, expected);
        let ImageError::Step { output, .. } = err else {
            panic!("{err:?}")
        };
        assert_eq!(output, expected.join("\n"));
    }
}
