//! The `---` header of a skill, command or agent file: `key: value` lines between
//! two `---` lines. Only flat string values are understood (quoted or not);
//! anything else is reported, never guessed at. A comment runs from a `#`
//! that opens a line or follows a space or tab to the end of the line, as
//! in YAML: `tools: read, bash   # a subset` is `read, bash`, while the `#`
//! of `C#` belongs to the value; a quoted value keeps every `#` inside its
//! quotes.

use std::collections::BTreeMap;

/// A file split into its header fields and its body.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Document<'a> {
    pub fields: BTreeMap<String, String>,
    pub body: &'a str,
}

/// Splits `text` into header and body. A file without a header is all body.
/// Errors say which line is wrong and why.
pub(crate) fn parse(text: &str) -> Result<Document<'_>, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = strip_marker_line(text) else {
        return Ok(Document {
            fields: BTreeMap::new(),
            body: text,
        });
    };
    let mut fields = BTreeMap::new();
    let mut offset = text.len() - rest.len();
    for (index, line) in rest.split_inclusive('\n').enumerate() {
        offset += line.len();
        let number = index + 2;
        let content = line.trim_end_matches(['\n', '\r']);
        if content.trim_end() == "---" {
            return Ok(Document {
                fields,
                body: &text[offset..],
            });
        }
        if content.trim().is_empty() || content.trim_start().starts_with('#') {
            continue;
        }
        let Some((key, value)) = content.split_once(':') else {
            return Err(format!(
                "line {number}: expected `key: value`, found {content:?}"
            ));
        };
        let key = key.trim();
        if key.is_empty() || key.contains(char::is_whitespace) || content.starts_with(' ') {
            return Err(format!(
                "line {number}: {key:?} is not a plain key (nested YAML is not supported)"
            ));
        }
        let value = unquote(value.trim()).map_err(|why| format!("line {number}: {why}"))?;
        fields.insert(key.to_string(), value);
    }
    Err("the header opened with `---` is never closed by a `---` line".to_string())
}

fn strip_marker_line(text: &str) -> Option<&str> {
    let rest = text.strip_prefix("---")?;
    let rest = rest.trim_start_matches([' ', '\t']);
    rest.strip_prefix("\r\n")
        .or_else(|| rest.strip_prefix('\n'))
}

/// The value of a `key: value` line (`value` trimmed), without its quotes
/// or its comment.
fn unquote(value: &str) -> Result<String, String> {
    for quote in ['"', '\''] {
        if let Some(inner) = value.strip_prefix(quote) {
            // The quote that closes the value is the first one followed
            // only by a comment, or by nothing.
            return inner
                .match_indices(quote)
                .map(|(at, _)| at)
                .find(|&at| uncommented(&inner[at + 1..]).is_empty())
                .map(|at| inner[..at].to_string())
                .ok_or_else(|| {
                    format!(
                        "the value {value:?} opens a quote it never closes (or has more than \
                         a comment after it)"
                    )
                });
        }
    }
    let value = uncommented(value);
    if matches!(value, "|" | ">" | "|-" | ">-") {
        return Err("multi-line values are not supported: keep the value on one line".into());
    }
    Ok(value.to_string())
}

/// `text` without its comment (from a `#` at its start or after a space or
/// tab), trimmed.
fn uncommented(text: &str) -> &str {
    let mut before = None;
    for (at, c) in text.char_indices() {
        if c == '#' && before.is_none_or(|b: char| b == ' ' || b == '\t') {
            return text[..at].trim();
        }
        before = Some(c);
    }
    text.trim()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_fields_and_body() {
        let doc =
            parse("---\nname: lint\ndescription: \"Fix: lint\"\n# note\n---\nBody\n").unwrap();
        assert_eq!(doc.fields["name"], "lint");
        assert_eq!(doc.fields["description"], "Fix: lint");
        assert_eq!(doc.body, "Body\n");
    }

    #[test]
    fn comments_after_a_value_are_dropped_and_a_hash_inside_one_is_kept() {
        let doc = parse(
            "---\ntools: read, edit, bash      # a subset\nmax_tools: 20\t# per turn\n\
             description: use C# style\nissue: see #12\nquoted: \"a # b\"   # why\n\
             single: 'x#y' # note\ninner: \"say \"hi\" now\"\nempty: # nothing\n---\n",
        )
        .unwrap();
        assert_eq!(doc.fields["tools"], "read, edit, bash");
        assert_eq!(doc.fields["max_tools"], "20");
        assert_eq!(doc.fields["description"], "use C# style");
        assert_eq!(doc.fields["issue"], "see");
        assert_eq!(doc.fields["quoted"], "a # b");
        assert_eq!(doc.fields["single"], "x#y");
        assert_eq!(doc.fields["inner"], "say \"hi\" now");
        assert_eq!(doc.fields["empty"], "");
        let after = parse("---\nname: \"x\" y\n---\n").unwrap_err();
        assert!(after.contains("never closes"), "{after}");
    }

    #[test]
    fn no_header_is_all_body() {
        let doc = parse("Just text\n---\n").unwrap();
        assert!(doc.fields.is_empty());
        assert_eq!(doc.body, "Just text\n---\n");
    }

    #[test]
    fn crlf_and_bom_are_understood() {
        let doc = parse("\u{feff}---\r\nname: x\r\n---\r\nB").unwrap();
        assert_eq!(doc.fields["name"], "x");
        assert_eq!(doc.body, "B");
    }

    #[test]
    fn malformed_headers_name_the_line() {
        let unclosed = parse("---\nname: x\n").unwrap_err();
        assert!(unclosed.contains("never closed"), "{unclosed}");
        let no_colon = parse("---\nname x\n---\n").unwrap_err();
        assert!(no_colon.starts_with("line 2:"), "{no_colon}");
        let nested = parse("---\nmeta:\n  a: b\n---\n").unwrap_err();
        assert!(nested.starts_with("line 3:"), "{nested}");
        let quote = parse("---\nname: \"x\n---\n").unwrap_err();
        assert!(quote.contains("never closes"), "{quote}");
        let folded = parse("---\ndescription: >\n---\n").unwrap_err();
        assert!(folded.contains("one line"), "{folded}");
    }
}
