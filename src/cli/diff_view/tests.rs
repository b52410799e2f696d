use super::*;

fn hunk<L: AsRef<[u8]>>(lines: &[L], paint: Paint) -> String {
    let mut out = Vec::new();
    render_hunk(lines, paint, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

fn patch(text: &[u8], paint: Paint) -> String {
    let mut out = Vec::new();
    render_patch(text, paint, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// `text` with the escape sequences this module writes taken out: what
/// is left must hold no escape character.
fn without_own_codes(text: &str) -> String {
    [
        "\x1b[1m", "\x1b[2m", "\x1b[m", "\x1b[36m", "\x1b[31m", "\x1b[32m", "\x1b[7m", "\x1b[27m",
    ]
    .iter()
    .fold(text.to_string(), |text, code| text.replace(code, ""))
}

#[test]
fn a_changed_word_is_highlighted_in_both_lines_of_its_pair() {
    let shown = hunk(
        &[
            "@@ -1,3 +1,3 @@ fn main() {",
            " context",
            "-let width = compute(a, b);",
            "-keep this line",
            "+let height = compute(a, b);",
            "+keep that line",
        ],
        Paint::Colour,
    );
    let lines: Vec<&str> = shown.lines().collect();
    assert_eq!(lines[0], "\x1b[36m@@ -1,3 +1,3 @@\x1b[m fn main() {");
    assert_eq!(lines[1], " context");
    assert_eq!(
        lines[2],
        "\x1b[31m-let \x1b[7mwidth\x1b[27m = compute(a, b);\x1b[m"
    );
    assert_eq!(lines[3], "\x1b[31m-keep \x1b[7mthis\x1b[27m line\x1b[m");
    assert_eq!(
        lines[4],
        "\x1b[32m+let \x1b[7mheight\x1b[27m = compute(a, b);\x1b[m"
    );
    assert_eq!(lines[5], "\x1b[32m+keep \x1b[7mthat\x1b[27m line\x1b[m");
}

#[test]
fn lines_with_little_in_common_and_lines_without_a_pair_are_not_highlighted() {
    let shown = hunk(
        &[
            "@@ -1,2 +1,3 @@",
            "-alpha beta gamma",
            "+one two three",
            "+an added line",
            " -context after",
            "+alone",
        ],
        Paint::Colour,
    );
    assert!(!shown.contains("\x1b[7m"), "{shown:?}");
    assert!(shown.contains("\x1b[32m+an added line\x1b[m"), "{shown:?}");
    assert!(shown.contains("\n -context after\n"), "{shown:?}");
}

#[test]
fn plain_paint_writes_no_escape_at_all() {
    let shown = patch(
        b"diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a = 1\n+a = 2\n",
        Paint::Plain,
    );
    assert_eq!(
        shown,
        "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a = 1\n+a = 2\n"
    );
}

#[test]
fn headers_are_bold_and_hunk_counts_tell_body_from_header() {
    // A removed line reading `--- x` and an added `+++ y` are body lines.
    let shown = patch(
        b"diff --git a/x b/x\nindex 1..2 100644\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n---- x\n++++ y\ndiff --git a/z b/z\n",
        Paint::Colour,
    );
    let lines: Vec<&str> = shown.lines().collect();
    assert_eq!(lines[0], "\x1b[1mdiff --git a/x b/x\x1b[m");
    assert_eq!(lines[2], "\x1b[1m--- a/x\x1b[m");
    assert_eq!(lines[3], "\x1b[1m+++ b/x\x1b[m");
    assert!(lines[5].starts_with("\x1b[31m---- x"), "{shown:?}");
    assert!(lines[6].starts_with("\x1b[32m++++ y"), "{shown:?}");
    assert_eq!(lines[7], "\x1b[1mdiff --git a/z b/z\x1b[m");
}

#[test]
fn tabs_are_expanded_to_eight_columns_after_the_mark() {
    let shown = hunk(&["@@ -1 +1 @@", "-\tx", "+ab\tc", " \t\ty"], Paint::Plain);
    assert_eq!(
        shown,
        format!(
            "@@ -1 +1 @@\n-{}x\n+ab{}c\n {}y\n",
            " ".repeat(8),
            " ".repeat(6),
            " ".repeat(16)
        )
    );
}

#[test]
fn a_line_of_megabytes_is_cut_with_a_marker_and_never_held_whole() {
    let mut text = b"diff --git a/x b/x\n@@ -0,0 +1,2 @@\n+".to_vec();
    text.extend(std::iter::repeat_n(b'a', 5 * 1024 * 1024));
    text.extend_from_slice(b"\n+after\n");
    let shown = patch(&text, Paint::Colour);
    assert!(shown.len() < 2 * MAX_LINE, "{} bytes shown", shown.len());
    let lines: Vec<&str> = shown.lines().collect();
    assert!(
        lines[2].starts_with("\x1b[32m+aaaa"),
        "{:?}",
        &lines[2][..20]
    );
    assert!(
        lines[2].ends_with(" … [line cut: 5.0 MiB more not shown]\x1b[m"),
        "{:?}",
        &lines[2][lines[2].len() - 60..]
    );
    assert_eq!(lines[3], "\x1b[32m+after\x1b[m");
    // A cut never splits a character.
    let wide = format!("+{}", "é".repeat(MAX_LINE));
    let shown = hunk(&[wide.as_str()], Paint::Plain);
    assert!(shown.starts_with(&format!("+{}", "é".repeat(MAX_LINE / 2 - 1))));
    assert!(!shown.contains('\u{FFFD}'), "{shown}");
}

#[test]
fn control_bidi_and_invisible_characters_stay_escaped_in_colour() {
    let shown = hunk(
        &[
            "@@ -1 +1 @@ \x1b]52;c;aGk=\x07",
            "-if (admin\u{202E} } \u{2066}x = 1",
            "+if (admin\u{202E} } \u{2066}x = 2\x1b[2J\u{200B}\r",
        ],
        Paint::Colour,
    );
    assert!(!without_own_codes(&shown).contains('\x1b'), "{shown:?}");
    for c in ['\u{202E}', '\u{2066}', '\u{200B}', '\r', '\x07'] {
        assert!(!shown.contains(c), "{c:?} in {shown:?}");
    }
    assert!(shown.contains("^[]52;c;aGk=^G"), "{shown:?}");
    assert!(
        shown.contains(
            "\x1b[32m+if (admin<U+202E> } <U+2066>x = \x1b[7m2^[[2J<U+200B>^M\x1b[27m\x1b[m"
        ),
        "{shown:?}"
    );
}

#[test]
fn a_binary_section_is_summed_up_in_one_line() {
    let mut text = b"diff --git a/b.bin b/b.bin\nnew file mode 100644\nindex 0000000..1111111\nGIT binary patch\nliteral 2000\n".to_vec();
    for _ in 0..30 {
        text.extend_from_slice(
            b"zcmV-{secret-looking-base85-data-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n",
        );
    }
    text.extend_from_slice(
        b"\nliteral 0\nHcmV?d00001\n\ndiff --git a/c b/c\n@@ -1 +1 @@\n-c\n+d\n",
    );
    let shown = patch(&text, Paint::Plain);
    assert!(!shown.contains("base85"), "{shown}");
    assert!(!shown.contains("literal 0"), "{shown}");
    assert!(
        shown.contains("GIT binary patch\n(binary content not shown: literal, 2000 bytes; 2.2 KiB of patch text)\ndiff --git a/c b/c\n"),
        "{shown}"
    );
    assert!(shown.ends_with("@@ -1 +1 @@\n-c\n+d\n"), "{shown}");
}

#[test]
fn no_newline_at_end_of_file_stays_under_its_line() {
    let lines = [
        "@@ -1 +1 @@",
        "-value = 1",
        "\\ No newline at end of file",
        "+value = 2",
        "\\ No newline at end of file",
    ];
    assert_eq!(
        hunk(&lines, Paint::Plain),
        format!("{}\n", lines.join("\n"))
    );
    let shown = hunk(&lines, Paint::Colour);
    let shown: Vec<&str> = shown.lines().collect();
    assert_eq!(shown[1], "\x1b[31m-value = \x1b[7m1\x1b[27m\x1b[m");
    assert_eq!(shown[2], "\\ No newline at end of file");
    assert_eq!(shown[3], "\x1b[32m+value = \x1b[7m2\x1b[27m\x1b[m");
    assert_eq!(shown[4], "\\ No newline at end of file");
    // In a patch, the `\` line after the hunk's last counted line is its.
    let text = format!("diff --git a/x b/x\n{}\n", lines.join("\n"));
    assert!(
        patch(text.as_bytes(), Paint::Plain)
            .ends_with("+value = 2\n\\ No newline at end of file\n")
    );
}

#[test]
fn a_long_run_is_shown_whole_without_highlights() {
    let mut lines = vec!["@@ -1,1000 +1,1000 @@".to_string()];
    lines.extend((0..1000).map(|i| format!("-line {i}")));
    lines.extend((0..1000).map(|i| format!("+line {i}!")));
    let shown = hunk(&lines, Paint::Colour);
    assert_eq!(shown.lines().count(), 2001);
    assert!(shown.contains("\x1b[31m-line 999\x1b[m"), "removed shown");
    assert!(shown.contains("\x1b[32m+line 0!\x1b[m"), "added shown");
}
