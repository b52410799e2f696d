//! The `You:` line: read in the terminal's own (cooked) mode, so the usual
//! line editing works (Backspace, Ctrl+U, Ctrl+W). The read waits in short
//! polls, so that it gives up when the run is aborted or over (`cancelled`)
//! instead of holding the terminal.

use std::io::{BufRead, Write};
use std::time::Duration;

/// How long one wait for the line lasts before `cancelled` is asked again.
const POLL: Duration = Duration::from_millis(100);

/// What the user typed, trimmed; `None` when nothing was (an empty line,
/// end of input) or the read was cancelled.
pub fn read_line(cancelled: impl Fn() -> bool) -> Option<String> {
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
    let mut poll = libc::pollfd {
        fd: libc::STDIN_FILENO,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, and its count.
    let ready = unsafe { libc::poll(&mut poll, 1, POLL.as_millis() as libc::c_int) };
    match ready {
        -1 => {
            let err = std::io::Error::last_os_error();
            match err.kind() {
                std::io::ErrorKind::Interrupted => Ok(false),
                _ => Err(err),
            }
        }
        0 => Ok(false),
        _ => Ok(true),
    }
}
