//! The review's questions at the terminal: pick one of a list, tick some of
//! a list, type a line. Keys are read in the live keys' raw mode, through
//! crossterm: Ctrl+C is a key that leaves the question, never a signal ah
//! sends itself, and a signal that only wakes the wait for a key reads
//! again. (console's key reader takes such a wake-up for Ctrl+C, and its
//! menus ended the review whenever a child of ah ended while they waited:
//! a container's relay, say, once a run with several attempts handed its
//! sandboxes off.) Drawn with console on stderr, as every line of the
//! review.

use std::io;

use console::{Key, Term};
use crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::live::terminal::RawMode;

/// The next key pressed; a wake-up by a signal is none.
pub(super) fn key() -> io::Result<Key> {
    let _raw = RawMode::enter()?;
    loop {
        match event::read() {
            Ok(Event::Key(pressed)) if pressed.kind == KeyEventKind::Press => {
                if let Some(key) = key_of(pressed) {
                    return Ok(key);
                }
            }
            Ok(_) => {}
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
}

/// A pressed key as the questions know keys; `None` for the others.
fn key_of(pressed: KeyEvent) -> Option<Key> {
    let control = pressed.modifiers.contains(KeyModifiers::CONTROL);
    Some(match pressed.code {
        KeyCode::Char('c') if control => Key::CtrlC,
        KeyCode::Char(_) if control => return None,
        KeyCode::Char(c) => Key::Char(c),
        KeyCode::Enter => Key::Enter,
        KeyCode::Esc => Key::Escape,
        KeyCode::Backspace => Key::Backspace,
        KeyCode::Up => Key::ArrowUp,
        KeyCode::Down => Key::ArrowDown,
        KeyCode::Left => Key::ArrowLeft,
        KeyCode::Right => Key::ArrowRight,
        KeyCode::Home => Key::Home,
        KeyCode::End => Key::End,
        KeyCode::Tab => Key::Tab,
        KeyCode::BackTab => Key::BackTab,
        _ => return None,
    })
}

/// Where a key moves the marker in a list of `len` items, if it moves it.
fn moved(key: &Key, at: usize, len: usize) -> Option<usize> {
    match key {
        Key::ArrowDown | Key::Tab | Key::Char('j') => Some((at + 1) % len),
        Key::ArrowUp | Key::BackTab | Key::Char('k') => Some((at + len - 1) % len),
        Key::Home => Some(0),
        Key::End => Some(len - 1),
        _ => None,
    }
}

/// Whether a key leaves the question unanswered.
fn leaves(key: &Key) -> bool {
    matches!(key, Key::Escape | Key::Char('q') | Key::CtrlC)
}

/// Asks `prompt` with `items` to pick from, `default` marked first; the
/// index picked, or `None` (Esc, q, Ctrl+C, or a terminal that closed).
pub(super) fn select(prompt: &str, items: &[String], default: usize) -> Option<usize> {
    let at = default.min(items.len().saturating_sub(1));
    let item = |(): &(), i: usize, marked: bool| {
        format!("{} {}", if marked { ">" } else { " " }, items[i])
    };
    let pick = |(): &mut (), key: &Key, at: usize| {
        matches!(key, Key::Enter).then(|| (at, items[at].clone()))
    };
    list(prompt, items.len(), at, &mut (), item, pick)
}

/// Asks `prompt` with `items` to tick (space toggles, a all or none, Enter
/// confirms), `ticked` at first; the indexes ticked, or `None`.
pub(super) fn tick(prompt: &str, items: &[String], ticked: &[bool]) -> Option<Vec<usize>> {
    if items.is_empty() {
        return Some(Vec::new());
    }
    let mut on: Vec<bool> = (0..items.len())
        .map(|i| ticked.get(i).copied().unwrap_or(false))
        .collect();
    let item = |on: &Vec<bool>, i: usize, marked: bool| {
        let marker = if marked { ">" } else { " " };
        let mark = if on[i] { "[x]" } else { "[ ]" };
        format!("{marker} {mark} {}", items[i])
    };
    let act = |on: &mut Vec<bool>, key: &Key, at: usize| {
        match key {
            Key::Enter => {
                let chosen: Vec<usize> = (0..items.len()).filter(|&i| on[i]).collect();
                let names: Vec<&str> = chosen.iter().map(|&i| items[i].as_str()).collect();
                return Some((chosen, names.join(", ")));
            }
            Key::Char(' ') => on[at] = !on[at],
            Key::Char('a') => {
                let all = !on.iter().all(|&ticked| ticked);
                on.iter_mut().for_each(|ticked| *ticked = all);
            }
            _ => {}
        }
        None
    };
    list(prompt, items.len(), 0, &mut on, item, act)
}

/// A question over a list of `len` lines, the marker first at `at`: each
/// line drawn by `item` (from `state`, its index, whether it is marked),
/// the arrows and j/k move the marker, Esc, q and Ctrl+C leave, any other
/// key goes to `act`, which may answer (the answer, and what the prompt's
/// line then says).
fn list<S, T>(
    prompt: &str,
    len: usize,
    mut at: usize,
    state: &mut S,
    item: impl Fn(&S, usize, bool) -> String,
    act: impl Fn(&mut S, &Key, usize) -> Option<(T, String)>,
) -> Option<T> {
    if len == 0 {
        return None;
    }
    let term = Term::stderr();
    let _ = term.hide_cursor();
    let answer = loop {
        let lines: Vec<String> = (0..len).map(|i| item(state, i, i == at)).collect();
        if show(&term, prompt, &lines).is_err() {
            break None;
        }
        let read = key();
        let _ = term.clear_last_lines(lines.len() + 1);
        let Ok(read) = read else { break None };
        if leaves(&read) {
            break None;
        }
        if let Some(moved) = moved(&read, at, len) {
            at = moved;
        } else if let Some((answer, said)) = act(state, &read, at) {
            let _ = term.write_line(&format!("{prompt}: {said}"));
            break Some(answer);
        }
    };
    let _ = term.show_cursor();
    answer
}

/// Asks `prompt` for one line of text (Enter ends it; it may be empty);
/// `None` when Esc or Ctrl+C leave the question, or the terminal closed.
pub(super) fn line(prompt: &str, longest: usize) -> Option<String> {
    let term = Term::stderr();
    term.write_str(&format!("{prompt}: ")).ok()?;
    let mut text = String::new();
    loop {
        match key() {
            Ok(Key::Enter) => {
                let _ = term.write_line("");
                return Some(text);
            }
            Ok(Key::Escape | Key::CtrlC) | Err(_) => {
                let _ = term.write_line("");
                return None;
            }
            Ok(Key::Backspace) => {
                if text.pop().is_some() {
                    let _ = term.clear_chars(1);
                }
            }
            Ok(Key::Char(c)) if !c.is_control() && text.chars().count() < longest => {
                text.push(c);
                let _ = term.write_str(&ah_core::present::terminal_safe(&c.to_string()));
            }
            Ok(_) => {}
        }
    }
}

/// Writes the prompt's line and `lines` under it.
fn show(term: &Term, prompt: &str, lines: &[String]) -> io::Result<()> {
    term.write_line(&format!("{prompt}:"))?;
    for line in lines {
        term.write_line(line)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marker_wraps_and_jumps() {
        assert_eq!(moved(&Key::ArrowDown, 2, 3), Some(0));
        assert_eq!(moved(&Key::ArrowUp, 0, 3), Some(2));
        assert_eq!(moved(&Key::Char('j'), 0, 3), Some(1));
        assert_eq!(moved(&Key::End, 0, 3), Some(2));
        assert_eq!(moved(&Key::Char('x'), 1, 3), None);
        assert!(leaves(&Key::CtrlC) && leaves(&Key::Char('q')) && !leaves(&Key::Enter));
    }
}
