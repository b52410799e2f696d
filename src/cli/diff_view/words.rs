//! Which words of a removed line and the added line paired with it differ:
//! both are cut into tokens (a run of letters, digits and `_`, a run of
//! white space, or any other single character); the tokens the two share
//! at their start and end are kept, and between those the longest common
//! subsequence of tokens (when the middle is small enough to compare) says
//! which are the same. Lines with too little in common get no highlight at
//! all: a wholly rewritten line reads better plain.

use std::ops::Range;

/// The most token pairs compared for the common subsequence (a table of
/// this many cells); a larger middle is highlighted whole.
const MAX_CELLS: usize = 40_000;

/// The byte ranges of a line's text that differ from its pair's.
pub(super) type Spans = Vec<Range<usize>>;

/// The byte ranges of `old` and of `new` that differ, or `None` when the two
/// lines share less than a third of their non-blank text.
pub(super) fn changed(old: &str, new: &str) -> Option<(Spans, Spans)> {
    let a = tokens(old);
    let b = tokens(new);
    let text_a = |i: usize| &old[a[i].clone()];
    let text_b = |j: usize| &new[b[j].clone()];
    let mut prefix = 0;
    while prefix < a.len() && prefix < b.len() && text_a(prefix) == text_b(prefix) {
        prefix += 1;
    }
    let mut suffix = 0;
    while suffix < a.len() - prefix
        && suffix < b.len() - prefix
        && text_a(a.len() - 1 - suffix) == text_b(b.len() - 1 - suffix)
    {
        suffix += 1;
    }
    let mut same_a = vec![false; a.len()];
    let mut same_b = vec![false; b.len()];
    for i in (0..prefix).chain(a.len() - suffix..a.len()) {
        same_a[i] = true;
    }
    for j in (0..prefix).chain(b.len() - suffix..b.len()) {
        same_b[j] = true;
    }
    let (mid_a, mid_b) = (prefix..a.len() - suffix, prefix..b.len() - suffix);
    if mid_a.len() * mid_b.len() <= MAX_CELLS {
        for (i, j) in common(mid_a.len(), mid_b.len(), |i, j| {
            text_a(mid_a.start + i) == text_b(mid_b.start + j)
        }) {
            same_a[mid_a.start + i] = true;
            same_b[mid_b.start + j] = true;
        }
    }
    let similar = |text: &str, spans: &[Range<usize>], same: &[bool]| {
        let solid = |range: &Range<usize>| text[range.clone()].trim().len();
        let total: usize = spans.iter().map(solid).sum();
        let kept: usize = spans
            .iter()
            .zip(same)
            .filter(|(_, s)| **s)
            .map(|(r, _)| solid(r))
            .sum();
        kept * 3 >= total
    };
    if !(similar(old, &a, &same_a) && similar(new, &b, &same_b)) {
        return None;
    }
    Some((ranges(old, &a, &same_a), ranges(new, &b, &same_b)))
}

/// The tokens of `text`, as byte ranges.
fn tokens(text: &str) -> Vec<Range<usize>> {
    #[derive(PartialEq)]
    enum Kind {
        Word,
        Blank,
        Other,
    }
    let kind = |c: char| match c {
        c if c.is_alphanumeric() || c == '_' => Kind::Word,
        c if c.is_whitespace() => Kind::Blank,
        _ => Kind::Other,
    };
    let mut out: Vec<Range<usize>> = Vec::new();
    let mut last = None;
    for (at, c) in text.char_indices() {
        let this = kind(c);
        let end = at + c.len_utf8();
        match out.last_mut() {
            Some(range) if this != Kind::Other && last.as_ref() == Some(&this) => range.end = end,
            _ => out.push(at..end),
        }
        last = Some(this);
    }
    out
}

/// The pairs (index in the first, index in the second) of a longest common
/// subsequence of two sequences of `n` and `m` items.
fn common(n: usize, m: usize, same: impl Fn(usize, usize) -> bool) -> Vec<(usize, usize)> {
    // lengths[i][j]: the longest common subsequence of the items from i and j on.
    let width = m + 1;
    let mut lengths = vec![0u16; (n + 1) * width];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lengths[i * width + j] = if same(i, j) {
                lengths[(i + 1) * width + j + 1] + 1
            } else {
                lengths[(i + 1) * width + j].max(lengths[i * width + j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut pairs = Vec::new();
    while i < n && j < m {
        if same(i, j) {
            pairs.push((i, j));
            i += 1;
            j += 1;
        } else if lengths[(i + 1) * width + j] >= lengths[i * width + j + 1] {
            i += 1;
        } else {
            j += 1;
        }
    }
    pairs
}

/// The changed tokens as ranges, neighbours joined; blank space between two
/// changed tokens counts as changed, so that a changed phrase shows as one.
fn ranges(text: &str, spans: &[Range<usize>], same: &[bool]) -> Vec<Range<usize>> {
    let mut changed: Vec<bool> = same.iter().map(|s| !s).collect();
    for at in 1..spans.len().saturating_sub(1) {
        if text[spans[at].clone()].trim().is_empty() && changed[at - 1] && changed[at + 1] {
            changed[at] = true;
        }
    }
    let mut out: Vec<Range<usize>> = Vec::new();
    for (span, changed) in spans.iter().zip(changed) {
        if !changed {
            continue;
        }
        match out.last_mut() {
            Some(last) if last.end == span.start => last.end = span.end,
            _ => out.push(span.clone()),
        }
    }
    out
}
