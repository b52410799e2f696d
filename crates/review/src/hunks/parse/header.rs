//! The extended header lines of a file section (`old mode`, `rename
//! from`, `index`, …), read into what the section does, and the names in
//! them unquoted.

use super::Whole;

/// Reads one extended header line of a section into `whole`.
pub(super) fn header_line(whole: &mut Whole, head: &[u8]) -> Result<(), &'static str> {
    let text = String::from_utf8_lossy(head);
    let mode = |rest: &str| u32::from_str_radix(rest.trim(), 8).map_err(|_| "not a file mode");
    let after = |prefix: &str| text.strip_prefix(prefix);
    if let Some(rest) = after("old mode ") {
        whole.old_mode = Some(mode(rest)?);
        whole.mode_change = true;
    } else if let Some(rest) = after("new mode ") {
        whole.new_mode = Some(mode(rest)?);
        whole.mode_change = true;
    } else if let Some(rest) = after("deleted file mode ") {
        whole.old_mode = Some(mode(rest)?);
        whole.deleted = true;
    } else if let Some(rest) = after("new file mode ") {
        whole.new_mode = Some(mode(rest)?);
        whole.created = true;
    } else if let Some(rest) = after("rename from ") {
        whole.renamed.get_or_insert_default().0 = unquote(rest);
    } else if let Some(rest) = after("rename to ") {
        whole.renamed.get_or_insert_default().1 = unquote(rest);
    } else if let Some(rest) = after("copy from ") {
        whole.copied.get_or_insert_default().0 = unquote(rest);
    } else if let Some(rest) = after("copy to ") {
        whole.copied.get_or_insert_default().1 = unquote(rest);
    } else if let Some(rest) = after("index ") {
        // `index OLD..NEW MODE`: the mode of both sides, when it is kept.
        if let Some((_, m)) = rest.split_once(' ') {
            let m = mode(m)?;
            whole.old_mode.get_or_insert(m);
            whole.new_mode.get_or_insert(m);
        }
    } else if text.starts_with("GIT binary patch") || text.starts_with("Binary files ") {
        whole.binary = true;
    } else if !["similarity index ", "dissimilarity index ", "--- ", "+++ "]
        .iter()
        .any(|prefix| text.starts_with(prefix))
    {
        return Err("not a line of a file section's header");
    }
    Ok(())
}

/// A name as a header line gives it: as is, or git's C-style quoting
/// (`"a\nb"`, octal escapes for other bytes) undone.
fn unquote(name: &str) -> String {
    let Some(inner) = name.strip_prefix('"').and_then(|n| n.strip_suffix('"')) else {
        return name.to_string();
    };
    let mut bytes = Vec::with_capacity(inner.len());
    let mut chars = inner.bytes().peekable();
    while let Some(b) = chars.next() {
        if b != b'\\' {
            bytes.push(b);
            continue;
        }
        let Some(escaped) = chars.next() else {
            bytes.push(b'\\');
            break;
        };
        bytes.push(match escaped {
            b'n' => b'\n',
            b't' => b'\t',
            b'r' => b'\r',
            b'a' => 0x07,
            b'b' => 0x08,
            b'f' => 0x0c,
            b'v' => 0x0b,
            b'0'..=b'7' => {
                let mut value = u32::from(escaped - b'0');
                for _ in 0..2 {
                    match chars.peek() {
                        Some(&d @ b'0'..=b'7') => {
                            value = value * 8 + u32::from(d - b'0');
                            chars.next();
                        }
                        _ => break,
                    }
                }
                u8::try_from(value).unwrap_or(b'?')
            }
            other => other,
        });
    }
    String::from_utf8_lossy(&bytes).into_owned()
}
