//! The `You:` line: read in the terminal's own (cooked) mode, so the usual
//! line editing works (Backspace, Ctrl+U, Ctrl+W). The read waits in short
//! polls, so that it gives up when the run is aborted or over (`cancelled`)
//! instead of holding the terminal.

use std::io::{BufRead, Write};

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::io::Errno;

/// How long one wait for the line lasts before `cancelled` is asked again
/// (100 ms).
const POLL: Timespec = Timespec {
    tv_sec: 0,
    tv_nsec: 100_000_000,
};

/// What the user typed, trimmed; `None` when nothing was (an empty line,
/// end of input) or the read was cancelled.
pub(super) fn read_line(cancelled: impl Fn() -> bool) -> Option<String> {
    eprint!("You: ");
    let _ = std::io::stderr().flush();
    loop {
        if cancelled() {
            eprintln!();
            return None;
        }
        match line_ready() {
            Ok(false) => continue,
            Ok(true) => break,
            Err(_) => return None,
        }
    }
    let mut line = String::new();
    match std::io::stdin().lock().read_line(&mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(line.trim().to_string()).filter(|text| !text.is_empty()),
    }
}

/// Waits up to [`POLL`] for standard input to be readable (in cooked mode:
/// a whole line, or end of input).
fn line_ready() -> std::io::Result<bool> {
    let stdin = std::io::stdin();
    let mut fds = [PollFd::new(&stdin, PollFlags::IN)];
    match rustix::event::poll(&mut fds, Some(&POLL)) {
        Ok(ready) => Ok(ready > 0),
        Err(Errno::INTR) => Ok(false),
        Err(err) => Err(err.into()),
    }
}
