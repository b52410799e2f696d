//! A patch as the report shows it: every line escaped and classed (file
//! headers, hunk headers, added, removed, context) for the page's style
//! to colour.

use std::fmt::Write;

use super::html::escape;

/// The class of each line of `patch`, in order.
pub(super) fn classes(patch: &str) -> Vec<(&'static str, &str)> {
    let mut in_header = false;
    patch
        .lines()
        .map(|line| {
            let class = if line.starts_with("diff --git ") {
                in_header = true;
                "file"
            } else if line.starts_with("@@") {
                in_header = false;
                "hunk"
            } else if in_header {
                "file"
            } else if line.starts_with('+') {
                "add"
            } else if line.starts_with('-') {
                "del"
            } else {
                "ctx"
            };
            (class, line)
        })
        .collect()
}

/// `patch` as the inside of the page's `<pre class="diff">`.
pub(super) fn render(patch: &str) -> String {
    let mut out = String::with_capacity(patch.len() + patch.len() / 2);
    for (class, line) in classes(patch) {
        // Each line is a block of its own (the style says so): a newline
        // between them would show as an empty line.
        let _ = write!(out, "<span class=\"{class}\">{}</span>", escape(line));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_diff_lines_are_classed_and_escaped() {
        let patch = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-<old>\n+<b>&\n same\n";
        let kinds: Vec<&str> = classes(patch).iter().map(|(c, _)| *c).collect();
        assert_eq!(kinds, ["file", "file", "file", "hunk", "del", "add", "ctx"]);
        let html = render(patch);
        assert!(
            html.contains("<span class=\"add\">+&lt;b&gt;&amp;</span>"),
            "{html}"
        );
        assert!(!html.contains("<b>"));
    }
}
