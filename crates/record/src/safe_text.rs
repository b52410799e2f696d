//! Text from the model (its answers, file names, command output, patch
//! contents) is shown on the user's terminal, which obeys escape sequences
//! and Unicode's invisible characters: colours could hide a hunk, cursor
//! movement could rewrite the review screen, OSC 52 could write the
//! clipboard, a newline in a file name could forge a diffstat line, and bidi
//! overrides or zero-width characters make code read differently from what
//! it is ("Trojan Source"). Every piece of model-derived text is shown
//! through one of these functions, once, where it is printed:
//! [`terminal_safe`] for free text, [`name_safe`] for file names,
//! [`line_safe`] for text from outside set into a line of ah's. The patch
//! review also uses [`invisible_chars`] to warn about such characters.
//!
//! It lives in the sandbox layer because that is the lowest one that renders
//! text for people (the review's diffstat and auto-review reasons); the CLI
//! uses the same functions.

use std::borrow::Cow;
use std::io::{self, Read, Write};
use std::path::Path;

/// `text` made safe to print: registered secrets redacted, every control
/// character except newline and tab in caret notation (`ESC` → `^[`, DEL →
/// `^?`), C1 controls and invisible, bidi and other format characters as
/// `<U+202E>`.
pub fn terminal_safe(text: &str) -> Cow<'_, str> {
    escape(text, Kind::Text, None)
}

/// [`terminal_safe`] for one piece of streamed text; `prev` is the last
/// character of the piece before, so that an emoji's presentation selector
/// that arrives in the next piece is still drawn.
pub fn terminal_safe_piece(prev: Option<char>, text: &str) -> Cow<'_, str> {
    escape(text, Kind::Text, prev)
}

/// Bytes (a patch) made safe the same way; invalid UTF-8 is shown lossily.
pub fn terminal_safe_bytes(bytes: &[u8]) -> String {
    terminal_safe(&String::from_utf8_lossy(bytes)).into_owned()
}

/// A file name made safe to print on one line: as [`terminal_safe`], and
/// newline, carriage return and tab become `\n`, `\r` and `\t` (and a
/// backslash `\\`, so that an escaped name is never mistaken for a plain
/// one). Every variation selector is shown too: a name has no emoji.
pub fn name_safe(name: &str) -> Cow<'_, str> {
    escape(name, Kind::Name, None)
}

/// Text from outside ah set into one of ah's own lines (what an MCP
/// server says of itself, the error it answers with): escaped as
/// [`name_safe`] escapes a name, so it stays on the line, and at most `max`
/// characters of it shown, the rest cut with `…`, so it cannot fill the
/// screen either.
pub fn line_safe(text: &str, max: usize) -> String {
    let escaped = name_safe(text);
    let mut chars = escaped.chars();
    let mut shown: String = chars.by_ref().take(max).collect();
    if chars.next().is_some() {
        shown.push('…');
    }
    shown
}

/// A path made safe as [`name_safe`] does (invalid UTF-8 shown lossily),
/// for messages that quote it.
pub fn path_safe(path: &Path) -> String {
    name_safe(&path.to_string_lossy()).into_owned()
}

/// Every invisible, bidi or format character of `text` (those
/// [`terminal_safe`] shows as `<U+…>`), with its line number, counted from 1.
/// Control characters are not listed: they are not invisible once shown.
pub fn invisible_chars(text: &str) -> Vec<(usize, char)> {
    let mut found = Vec::new();
    for (index, line) in text.split('\n').enumerate() {
        let mut prev = None;
        for c in line.chars() {
            if is_hidden(prev, c) {
                found.push((index + 1, c));
            }
            prev = Some(c);
        }
    }
    found
}

/// `U+202E RIGHT-TO-LEFT OVERRIDE`: the code point and, for the characters
/// that are known for hiding text, their Unicode name.
pub fn describe(c: char) -> String {
    match char_name(c) {
        Some(name) => format!("U+{:04X} {name}", c as u32),
        None => format!("U+{:04X}", c as u32),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Name,
}

fn escape(text: &str, kind: Kind, mut prev: Option<char>) -> Cow<'_, str> {
    let text = ah_base::redact::text(text);
    if !needs_escape(&text, kind, prev) {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' if kind == Kind::Name => out.push_str("\\n"),
            '\r' if kind == Kind::Name => out.push_str("\\r"),
            '\t' if kind == Kind::Name => out.push_str("\\t"),
            '\\' if kind == Kind::Name => out.push_str("\\\\"),
            '\n' | '\t' => out.push(c),
            '\u{7f}' => out.push_str("^?"),
            c if (c as u32) < 0x20 => {
                out.push('^');
                out.push(char::from(b'@' + c as u8));
            }
            c if c.is_control() || hides(prev, c, kind) => {
                out.push_str(&format!("<U+{:04X}>", c as u32));
            }
            c => out.push(c),
        }
        prev = Some(c);
    }
    Cow::Owned(out)
}

fn needs_escape(text: &str, kind: Kind, mut prev: Option<char>) -> bool {
    text.chars().any(|c| {
        let special = match c {
            '\n' | '\t' => kind == Kind::Name,
            '\\' => kind == Kind::Name,
            c => c.is_control() || hides(prev, c, kind),
        };
        prev = Some(c);
        special
    })
}

fn hides(prev: Option<char>, c: char, kind: Kind) -> bool {
    match kind {
        Kind::Text => is_hidden(prev, c),
        Kind::Name => is_invisible(c),
    }
}

/// An invisible character that is not an emoji's presentation selector:
/// U+FE0E / U+FE0F right after a visible non-ASCII character (`⚠️`) only
/// picks how that character is drawn, and is common in prose and docs.
fn is_hidden(prev: Option<char>, c: char) -> bool {
    if !is_invisible(c) {
        return false;
    }
    let presentation = matches!(c, '\u{FE0E}' | '\u{FE0F}');
    !(presentation && prev.is_some_and(|p| !p.is_ascii() && !is_invisible(p) && !p.is_control()))
}

/// Characters that draw nothing, or change how the text around them is
/// ordered or joined: Unicode's format characters (`Cf`: bidi embeddings,
/// overrides, isolates and marks, zero-width space and joiners, soft hyphen,
/// byte-order mark, tags, …), the line and paragraph separators, variation
/// selectors, and the fillers that render as blank.
pub fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{034F}'
            | '\u{0600}'..='\u{0605}'
            | '\u{061C}'
            | '\u{06DD}'
            | '\u{070F}'
            | '\u{0890}'..='\u{0891}'
            | '\u{08E2}'
            | '\u{115F}'..='\u{1160}'
            | '\u{17B4}'..='\u{17B5}'
            | '\u{180B}'..='\u{180F}'
            | '\u{200B}'..='\u{200F}'
            | '\u{2028}'..='\u{202E}'
            | '\u{2060}'..='\u{206F}'
            | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}'
            | '\u{FEFF}'
            | '\u{FFA0}'
            | '\u{FFF9}'..='\u{FFFB}'
            | '\u{110BD}'
            | '\u{110CD}'
            | '\u{13430}'..='\u{1343F}'
            | '\u{1BCA0}'..='\u{1BCA3}'
            | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0000}'..='\u{E007F}'
            | '\u{E0100}'..='\u{E01EF}'
    )
}

fn char_name(c: char) -> Option<&'static str> {
    Some(match c {
        '\u{00AD}' => "SOFT HYPHEN",
        '\u{061C}' => "ARABIC LETTER MARK",
        '\u{200B}' => "ZERO WIDTH SPACE",
        '\u{200C}' => "ZERO WIDTH NON-JOINER",
        '\u{200D}' => "ZERO WIDTH JOINER",
        '\u{200E}' => "LEFT-TO-RIGHT MARK",
        '\u{200F}' => "RIGHT-TO-LEFT MARK",
        '\u{2028}' => "LINE SEPARATOR",
        '\u{2029}' => "PARAGRAPH SEPARATOR",
        '\u{202A}' => "LEFT-TO-RIGHT EMBEDDING",
        '\u{202B}' => "RIGHT-TO-LEFT EMBEDDING",
        '\u{202C}' => "POP DIRECTIONAL FORMATTING",
        '\u{202D}' => "LEFT-TO-RIGHT OVERRIDE",
        '\u{202E}' => "RIGHT-TO-LEFT OVERRIDE",
        '\u{2060}' => "WORD JOINER",
        '\u{2061}' => "FUNCTION APPLICATION",
        '\u{2062}' => "INVISIBLE TIMES",
        '\u{2063}' => "INVISIBLE SEPARATOR",
        '\u{2064}' => "INVISIBLE PLUS",
        '\u{2066}' => "LEFT-TO-RIGHT ISOLATE",
        '\u{2067}' => "RIGHT-TO-LEFT ISOLATE",
        '\u{2068}' => "FIRST STRONG ISOLATE",
        '\u{2069}' => "POP DIRECTIONAL ISOLATE",
        '\u{FEFF}' => "ZERO WIDTH NO-BREAK SPACE",
        '\u{FE00}'..='\u{FE0F}' | '\u{E0100}'..='\u{E01EF}' => "VARIATION SELECTOR",
        '\u{E0000}'..='\u{E007F}' => "TAG",
        _ => return None,
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_untouched() {
        let text = "fn main() {\n\tprintln!(\"héllo ✓ ⚠️ 日本\");\n}\n";
        assert!(matches!(terminal_safe(text), Cow::Borrowed(_)));
        assert!(matches!(name_safe("src/héllo wörld.rs"), Cow::Borrowed(_)));
        assert!(invisible_chars(text).is_empty());
    }

    #[test]
    fn escapes_and_controls_become_visible() {
        assert_eq!(
            terminal_safe("a\x1b[30;40mhidden\x1b[0m"),
            "a^[[30;40mhidden^[[0m"
        );
        assert_eq!(terminal_safe("x\ry\x07\x7f"), "x^My^G^?");
        assert_eq!(terminal_safe("\u{9b}2J"), "<U+009B>2J");
        assert_eq!(terminal_safe_bytes(b"\x1b]52;c;aGk=\x07"), "^[]52;c;aGk=^G");
    }

    #[test]
    fn bidi_and_zero_width_characters_become_visible() {
        assert_eq!(
            terminal_safe("if (x\u{202E} } \u{2066}if\u{2069} {"),
            "if (x<U+202E> } <U+2066>if<U+2069> {"
        );
        assert_eq!(
            terminal_safe("ad\u{200B}min\u{FEFF}\u{00AD}\u{E0041}\u{061C}\u{200F}"),
            "ad<U+200B>min<U+FEFF><U+00AD><U+E0041><U+061C><U+200F>"
        );
        // An emoji's presentation selector is drawn; a lone one is not.
        assert_eq!(terminal_safe("⚠\u{FE0F} ok"), "⚠\u{FE0F} ok");
        assert_eq!(terminal_safe("a\u{FE0F}\u{FE0F}"), "a<U+FE0F><U+FE0F>");
        assert_eq!(terminal_safe("tab\tand\nnewline"), "tab\tand\nnewline");
        // Streamed: the selector may come in the piece after its emoji.
        assert_eq!(terminal_safe_piece(Some('⚠'), "\u{FE0F} ok"), "\u{FE0F} ok");
        assert_eq!(terminal_safe_piece(Some('a'), "\u{FE0F}"), "<U+FE0F>");
    }

    #[test]
    fn text_set_into_a_line_stays_on_it_and_is_cut() {
        let forged = "x\nreview: applied\r\x1b]0;t\x07\u{202E}";
        assert_eq!(
            line_safe(forged, 100),
            "x\\nreview: applied\\r^[]0;t^G<U+202E>"
        );
        assert_eq!(line_safe("abcdef", 3), "abc…");
        assert_eq!(line_safe("abc", 3), "abc");
    }

    #[test]
    fn names_show_line_breaks_and_tabs_on_one_line() {
        assert_eq!(
            name_safe("a\n nothing else changed | 1 +"),
            "a\\n nothing else changed | 1 +"
        );
        assert_eq!(name_safe("x\ty\rz\\n"), "x\\ty\\rz\\\\n");
        assert_eq!(name_safe("evil\u{202E}txt.exe"), "evil<U+202E>txt.exe");
        assert_eq!(name_safe("⚠\u{FE0F}.md"), "⚠<U+FE0F>.md");
        assert_eq!(name_safe("\x1b[2J"), "^[[2J");
        assert_eq!(path_safe(Path::new("/w/a\nb")), "/w/a\\nb");
    }

    #[test]
    fn escaping_twice_changes_nothing_more() {
        let once = terminal_safe("a\u{202E}\x1b\u{9b}b").into_owned();
        assert_eq!(terminal_safe(&once), once);
        let name = name_safe("a\nb\u{200B}").into_owned();
        assert_eq!(terminal_safe(&name), name);
    }

    #[test]
    fn the_finder_names_lines_and_characters() {
        let text = "fine\nx = 1;\u{202E} // y\n\nz\u{200B}\u{2066}\n⚠\u{FE0F}\n";
        assert_eq!(
            invisible_chars(text),
            vec![(2, '\u{202E}'), (4, '\u{200B}'), (4, '\u{2066}')]
        );
        assert!(invisible_chars("\x1b[31m").is_empty());
        assert_eq!(describe('\u{202E}'), "U+202E RIGHT-TO-LEFT OVERRIDE");
        assert_eq!(describe('\u{E0100}'), "U+E0100 VARIATION SELECTOR");
        assert_eq!(describe('\u{0600}'), "U+0600");
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
