//! Text from the model (its answers, file names, patch contents) is shown on
//! the user's terminal, which obeys escape sequences: colours could hide a
//! hunk, cursor movement could rewrite the review screen, OSC 52 could write
//! the clipboard. Everything model-derived goes through [`terminal_safe`].

use std::borrow::Cow;
use std::io::{self, Read, Write};

/// `text` with every control character except newline and tab shown in caret
/// notation (`ESC` → `^[`, DEL → `^?`), and C1 controls as `\u{…}` escapes.
pub fn terminal_safe(text: &str) -> Cow<'_, str> {
    let text = crate::llm::redact::text(text);
    if !text.chars().any(is_unsafe) {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            c if !is_unsafe(c) => out.push(c),
            '\u{7f}' => out.push_str("^?"),
            c if (c as u32) < 0x20 => {
                out.push('^');
                out.push(char::from(b'@' + c as u8));
            }
            c => out.push_str(&c.escape_unicode().to_string()),
        }
    }
    Cow::Owned(out)
}

/// Bytes (a patch) made safe the same way; invalid UTF-8 is shown lossily.
pub fn terminal_safe_bytes(bytes: &[u8]) -> String {
    terminal_safe(&String::from_utf8_lossy(bytes)).into_owned()
}

/// Copies `input` (a patch of any size) to `output` made safe as
/// [`terminal_safe_bytes`] does, a piece at a time: each piece ends at a
/// newline where there is one (so a secret on a line is redacted whole), or
/// else at a character boundary.
pub fn copy_terminal_safe(mut input: impl Read, mut output: impl Write) -> io::Result<()> {
    const CHUNK: usize = 64 * 1024;
    let mut buf = vec![0u8; CHUNK];
    let mut len = 0;
    loop {
        let read = input.read(&mut buf[len..])?;
        len += read;
        let end = read == 0;
        let cut = if end || len == buf.len() {
            piece_end(&buf[..len], end)
        } else {
            // Read more before cutting, unless the buffer is full.
            continue;
        };
        output.write_all(terminal_safe_bytes(&buf[..cut]).as_bytes())?;
        buf.copy_within(cut..len, 0);
        len -= cut;
        if end {
            return output.flush();
        }
    }
}

/// Where the piece of `bytes` to show now ends: after the last newline,
/// else before a character cut short at the end (all of it at the `end`).
fn piece_end(bytes: &[u8], end: bool) -> usize {
    if end {
        return bytes.len();
    }
    if let Some(newline) = bytes.iter().rposition(|&b| b == b'\n') {
        return newline + 1;
    }
    // The last lead byte, and how long its character is.
    let tail = bytes.len().saturating_sub(4);
    let Some(lead) = (tail..bytes.len()).rev().find(|&i| bytes[i] & 0xC0 != 0x80) else {
        return bytes.len();
    };
    let width = match bytes[lead] {
        b if b >= 0xF0 => 4,
        b if b >= 0xE0 => 3,
        b if b >= 0xC0 => 2,
        _ => 1,
    };
    if lead + width > bytes.len() {
        lead
    } else {
        bytes.len()
    }
}

fn is_unsafe(c: char) -> bool {
    c != '\n' && c != '\t' && (c.is_control())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_untouched() {
        let text = "fn main() {\n\tprintln!(\"héllo ✓\");\n}\n";
        assert!(matches!(terminal_safe(text), Cow::Borrowed(_)));
    }

    #[test]
    fn escapes_and_controls_become_visible() {
        assert_eq!(
            terminal_safe("a\x1b[30;40mhidden\x1b[0m"),
            "a^[[30;40mhidden^[[0m"
        );
        assert_eq!(terminal_safe("x\ry\x07\x7f"), "x^My^G^?");
        assert_eq!(terminal_safe("\u{9b}2J"), "\\u{9b}2J");
        assert_eq!(terminal_safe_bytes(b"\x1b]52;c;aGk=\x07"), "^[]52;c;aGk=^G");
    }

    #[test]
    fn a_copy_in_pieces_is_the_same_as_a_whole() {
        // Long lines of multi-byte characters and escapes, so that pieces
        // end both at newlines and inside lines.
        let mut text = "é€😀\x1b[0m".repeat(40_000);
        text.push('\n');
        text.push_str(&"line\x07\n".repeat(20_000));
        let mut out = Vec::new();
        copy_terminal_safe(text.as_bytes(), &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            terminal_safe_bytes(text.as_bytes())
        );
    }
}
