//! Caps the text a tool returns to the model, keeping the head and tail (or
//! only the tail) and saying how much was cut and where. Raw outputs are kept
//! whole elsewhere (the step files); this only shapes what the model reads.
//! All cuts fall on `char` boundaries.

/// Characters kept free for the marker line, so the result stays within the cap.
const MARKER_RESERVE: usize = 80;

/// Keeps the start and the end of `text` so that the result has at most
/// `max_chars` characters and, when given, at most `max_lines` lines; the
/// middle is replaced by a marker line.
pub fn head_tail(text: &str, max_chars: usize, max_lines: Option<usize>) -> String {
    let within_lines = max_lines.is_none_or(|max| text.lines().count() <= max);
    if within_lines && text.chars().count() <= max_chars {
        return text.to_string();
    }
    let chars = max_chars.saturating_sub(MARKER_RESERVE);
    // One line goes to the marker.
    let lines = max_lines.map(|max| max.saturating_sub(1));

    let mut head_end = byte_after_chars(text, chars / 2);
    let mut tail_start = byte_before_chars(text, chars - chars / 2);
    if let Some(lines) = lines {
        head_end = head_end.min(byte_after_lines(text, lines / 2));
        tail_start = tail_start.max(byte_before_lines(text, lines - lines / 2));
    }
    let tail_start = tail_start.max(head_end);

    let head = &text[..head_end];
    let separator = if head.is_empty() || head.ends_with('\n') {
        ""
    } else {
        "\n"
    };
    format!(
        "{head}{separator}{}\n{}",
        marker(&text[head_end..tail_start], ""),
        &text[tail_start..]
    )
}

/// Keeps the end of `text` so that the result has at most `max_chars`
/// characters; a marker line at the start says what was dropped.
pub fn tail(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text.to_string();
    }
    let start = byte_before_chars(text, max_chars.saturating_sub(MARKER_RESERVE));
    format!(
        "{}\n{}",
        marker(&text[..start], " from the start"),
        &text[start..]
    )
}

fn marker(omitted: &str, place: &str) -> String {
    format!(
        "[... {} chars / {} lines omitted{place} ...]",
        omitted.chars().count(),
        omitted.matches('\n').count()
    )
}

/// Byte index just after the first `n` chars.
fn byte_after_chars(text: &str, n: usize) -> usize {
    text.char_indices().nth(n).map_or(text.len(), |(i, _)| i)
}

/// Byte index where the last `n` chars begin.
fn byte_before_chars(text: &str, n: usize) -> usize {
    match n {
        0 => text.len(),
        n => text.char_indices().rev().nth(n - 1).map_or(0, |(i, _)| i),
    }
}

/// Byte index just after the first `n` lines (including their newlines).
fn byte_after_lines(text: &str, n: usize) -> usize {
    match n {
        0 => 0,
        n => text
            .match_indices('\n')
            .nth(n - 1)
            .map_or(text.len(), |(i, _)| i + 1),
    }
}

/// Byte index where the last `n` lines begin (a final newline ends the last line).
fn byte_before_lines(text: &str, n: usize) -> usize {
    let body = text.strip_suffix('\n').unwrap_or(text);
    match n {
        0 => text.len(),
        n => body
            .rmatch_indices('\n')
            .nth(n - 1)
            .map_or(0, |(i, _)| i + 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbered(lines: usize) -> String {
        (1..=lines).map(|i| format!("line {i}\n")).collect()
    }

    #[test]
    fn text_within_limits_is_unchanged() {
        let text = numbered(10);
        assert_eq!(head_tail(&text, 1000, Some(10)), text);
        assert_eq!(tail(&text, text.len()), text);
        assert_eq!(head_tail("", 10, Some(1)), "");
    }

    #[test]
    fn too_many_lines_keeps_first_and_last_with_exact_counts() {
        let text = numbered(1000);
        let out = head_tail(&text, 1_000_000, Some(11));
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 11, "{out}");
        assert_eq!(
            &lines[..5],
            ["line 1", "line 2", "line 3", "line 4", "line 5"]
        );
        assert_eq!(lines[6], "line 996");
        assert_eq!(lines[10], "line 1000");
        let omitted: String = (6..=995).map(|i| format!("line {i}\n")).collect();
        let expected = format!("[... {} chars / 990 lines omitted ...]", omitted.len());
        assert_eq!(lines[5], expected);
    }

    #[test]
    fn too_many_chars_keeps_head_and_tail_within_cap() {
        let text = "a".repeat(5000) + &"z".repeat(5000);
        let out = head_tail(&text, 1000, None);
        assert!(out.chars().count() <= 1000, "{}", out.len());
        assert!(out.starts_with(&"a".repeat(400)));
        assert!(out.ends_with(&"z".repeat(400)));
        assert!(
            out.contains("[... 9080 chars / 0 lines omitted ...]"),
            "{out}"
        );
    }

    #[test]
    fn cuts_fall_on_char_boundaries() {
        // Multi-byte characters of every width; any byte-based cut would panic
        // or produce invalid text.
        let text = "é€😀x\n".repeat(3000);
        for max in [81, 100, 333, 1001, 5000] {
            let out = head_tail(&text, max, Some(50));
            assert!(out.chars().count() <= max, "max {max}");
            assert!(out.lines().count() <= 50, "max {max}");
            let out = tail(&text, max);
            assert!(out.chars().count() <= max, "max {max}");
            let kept = out.split_once('\n').map_or("", |(_, kept)| kept);
            assert!(text.ends_with(kept) && kept.len() >= max - MARKER_RESERVE);
        }
    }

    #[test]
    fn tail_keeps_the_end_and_says_what_was_cut() {
        let text = numbered(100);
        let out = tail(&text, 200);
        assert!(out.chars().count() <= 200);
        assert!(out.starts_with("[... "), "{out}");
        assert!(out.contains("omitted from the start ...]\n"), "{out}");
        assert!(out.ends_with("line 100\n"));
        let kept = out.split_once('\n').map(|(_, rest)| rest).unwrap_or("");
        let cut = text.len() - kept.len();
        assert!(out.starts_with(&format!("[... {cut} chars / ")), "{out}");
    }
}
