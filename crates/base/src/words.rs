//! Counts in words, for every line ah prints: `1 tick`, `2 ticks`.

use std::fmt::Display;

/// `n` with the noun that agrees with it: `one` for exactly one, else
/// `many` (`count(1, "tool call", "tool calls")` is `1 tool call`).
pub fn count<N: Display + PartialEq + From<u8>>(n: N, one: &str, many: &str) -> String {
    let noun = if n == N::from(1) { one } else { many };
    format!("{n} {noun}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(count(1u32, "tick", "ticks"), "1 tick");
        assert_eq!(count(0usize, "tick", "ticks"), "0 ticks");
        assert_eq!(count(2u64, "branch", "branches"), "2 branches");
    }
}
