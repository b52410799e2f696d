//! Raw mode for the live controls, and getting out of it on every path: a
//! guard (normal end, `?` errors), a panic hook, and [`restore`] for the
//! paths that exit the process at once (a second Ctrl+C or signal), which
//! skip destructors.
//!
//! The mode is crossterm's raw mode (keys arrive one by one, Ctrl+C is a
//! key, nothing echoes) with output processing left on, so the run's lines
//! still end with a newline that returns the cursor.

use std::sync::Once;

use rustix::termios::{self, OptionalActions, OutputModes};

/// The terminal is in raw mode while this lives.
pub(crate) struct RawMode(());

impl RawMode {
    /// Enters raw mode (and arms the panic hook, once per process).
    pub(crate) fn enter() -> std::io::Result<RawMode> {
        install_panic_hook();
        enter_raw()?;
        Ok(RawMode(()))
    }

    /// Back to the terminal's own mode for a while (a cooked line read).
    pub(crate) fn leave(&self) {
        restore();
    }

    /// Raw again after [`RawMode::leave`].
    pub(crate) fn resume(&self) -> std::io::Result<()> {
        enter_raw()
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        restore();
    }
}

/// Puts the terminal back as it was before raw mode; nothing to do when it
/// is not in raw mode.
pub(crate) fn restore() {
    // Nothing better to do when the terminal refuses: the process is
    // leaving raw mode behind either way.
    let _ = crossterm::terminal::disable_raw_mode();
}

fn enter_raw() -> std::io::Result<()> {
    crossterm::terminal::enable_raw_mode()?;
    keep_output_processing()
}

/// Raw mode turns off output processing; lines printed by the run then
/// would not return to the first column. Turns it back on.
fn keep_output_processing() -> std::io::Result<()> {
    let stdin = std::io::stdin();
    let mut mode = termios::tcgetattr(&stdin)?;
    mode.output_modes |= OutputModes::OPOST | OutputModes::ONLCR;
    termios::tcsetattr(&stdin, OptionalActions::Now, &mode)?;
    Ok(())
}

/// A panic anywhere restores the terminal before the message is printed.
fn install_panic_hook() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
    });
}
