//! Text from the model (its answers, file names, patch contents) is shown on
//! the user's terminal, which obeys escape sequences: colours could hide a
//! hunk, cursor movement could rewrite the review screen, OSC 52 could write
//! the clipboard. Everything model-derived goes through [`terminal_safe`].

use std::borrow::Cow;

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
}
