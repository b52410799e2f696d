//! The sanitizer against fixed streams, then every 2- and 3-piece cut and
//! many seeded random cuts of each: the output and the calls never depend
//! on how the stream was cut, and only an undecided suffix is ever held.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use super::*;

/// A stream, the text it shows, and the calls it carries.
struct Case {
    input: &'static str,
    shown: &'static str,
    calls: Vec<SentinelCall>,
}

fn call(name: &str, input: serde_json::Value) -> SentinelCall {
    SentinelCall {
        name: name.to_string(),
        input,
    }
}

fn case(input: &'static str, shown: &'static str) -> Case {
    Case {
        input,
        shown,
        calls: Vec::new(),
    }
}

fn cases() -> Vec<Case> {
    vec![
        case(
            "plain text, nothing to remove\n",
            "plain text, nothing to remove\n",
        ),
        Case {
            input: "Let me look.<|channel|>commentary to=functions.bash<|message|>{\"command\":\"ls\"}",
            shown: "Let me look.",
            calls: vec![call("bash", json!({"command": "ls"}))],
        },
        case(
            "<|start|>assistant<|channel|>analysis<|message|>Thinking.<|end|>\
             <|start|>assistant<|channel|>final<|message|>Done.<|return|>",
            "Thinking.Done.",
        ),
        // Sentinels inside a fence are kept; around it they go.
        case(
            "Example:\n```text\n<|start|>assistant<|message|>hi<|end|>\n```\nafter<|end|>",
            "Example:\n```text\n<|start|>assistant<|message|>hi<|end|>\n```\nafter",
        ),
        case(
            "<|start|>assistant<|message|>```rust\nlet a = \"<|x|>\";\n```<|end|>",
            "```rust\nlet a = \"<|x|>\";\n```",
        ),
        case(
            "a < b, x <|not a token, <|| and <|a-b|> and a|>b <|\n",
            "a < b, x <|not a token, <|| and <|a-b|> and a|>b <|\n",
        ),
        Case {
            input: "<|start|>assistant<|channel|>commentary to=functions.write <|constrain|>json\
                    <|message|>{\"path\":\"a}.txt\",\"content\":\"x{\\\"y\\\"}<|end|>\"}<|call|>more",
            shown: "more",
            calls: vec![call(
                "write",
                json!({"path": "a}.txt", "content": "x{\"y\"}<|end|>"}),
            )],
        },
        case(
            "ok<|channel|>commentary to=functions.bash<|message|>{\"command\":\"l",
            "ok",
        ),
        case(
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello<|eot_id|>",
            "\n\nHello",
        ),
        case("<|start|>oops, no header end\nrest", "\nrest"),
        case(
            "héllo <|im_end|>wörld ``` ünïcode",
            "héllo wörld ``` ünïcode",
        ),
        case(
            "  ```\n<|end|>\n  ```\n<|end|>x\n    ```\n<|end|>y",
            "  ```\n<|end|>\n  ```\nx\n    ```\ny",
        ),
        case(
            "````md\n```\n<|end|>\n```\n````\n<|end|>z",
            "````md\n```\n<|end|>\n```\n````\nz",
        ),
        // A fence never closed keeps everything after it.
        case("```\n<|end|>", "```\n<|end|>"),
        // A call body that is not an object is dropped with its frame.
        case(
            "a<|channel|>commentary to=bash<|message|>ls -la<|call|>b",
            "ab",
        ),
        Case {
            input: "<|channel|>commentary to=functions.read<|message|> {\"path\": \"x\"} tail",
            shown: " tail",
            calls: vec![call("read", json!({"path": "x"}))],
        },
        case("ends with <|mess", "ends with <|mess"),
        case("``", "``"),
    ]
}

/// Feeds `pieces`, checking what is held after each, and returns what was
/// shown and the calls found.
fn feed(pieces: &[&str]) -> (String, Vec<SentinelCall>) {
    let mut sanitizer = Sanitizer::default();
    let mut shown = String::new();
    for piece in pieces {
        shown.push_str(&sanitizer.push(piece));
        assert_held_is_undecided(sanitizer.held(), pieces);
    }
    shown.push_str(&sanitizer.finish());
    assert!(sanitizer.held().is_empty());
    (shown, sanitizer.take_calls())
}

/// Only a possible token start or the indent and backticks at a line start
/// may be held, never whole text.
fn assert_held_is_undecided(held: &[u8], pieces: &[&str]) {
    if held.is_empty() {
        return;
    }
    let token_start = held[0] == b'<' && held.len() <= MAX_TOKEN_NAME + 3;
    let line_start = held.iter().all(|&b| b == b' ' || b == b'`');
    assert!(
        token_start || line_start,
        "held {:?} after {pieces:?}",
        String::from_utf8_lossy(held)
    );
}

/// The places a string can be cut: its char boundaries.
fn boundaries(s: &str) -> Vec<usize> {
    (0..=s.len()).filter(|&i| s.is_char_boundary(i)).collect()
}

fn pieces_at<'a>(s: &'a str, cuts: &[usize]) -> Vec<&'a str> {
    let mut pieces = Vec::new();
    let mut from = 0;
    for &cut in cuts {
        pieces.push(&s[from..cut]);
        from = cut;
    }
    pieces.push(&s[from..]);
    pieces
}

#[test]
fn fixed_streams_show_what_they_should_and_carry_their_calls() {
    for case in cases() {
        let (shown, calls) = feed(&[case.input]);
        assert_eq!(shown, case.shown, "input {:?}", case.input);
        assert_eq!(calls, case.calls, "input {:?}", case.input);
    }
}

#[test]
fn every_two_and_three_piece_cut_gives_the_same_result() {
    for case in cases() {
        let whole = feed(&[case.input]);
        let cuts = boundaries(case.input);
        for &a in &cuts {
            assert_eq!(feed(&pieces_at(case.input, &[a])), whole, "cut at {a}");
            for &b in cuts.iter().filter(|&&b| b >= a) {
                assert_eq!(
                    feed(&pieces_at(case.input, &[a, b])),
                    whole,
                    "cuts at {a}, {b} of {:?}",
                    case.input
                );
            }
        }
    }
}

#[test]
fn seeded_random_cuts_give_the_same_result() {
    let mut rng = StdRng::seed_from_u64(0x05a1_71ce);
    for case in cases() {
        let whole = feed(&[case.input]);
        let cuts = boundaries(case.input);
        for _ in 0..300 {
            let count = rng.random_range(0..cuts.len().min(24));
            let mut chosen: Vec<usize> = (0..count)
                .map(|_| cuts[rng.random_range(0..cuts.len())])
                .collect();
            chosen.sort_unstable();
            assert_eq!(
                feed(&pieces_at(case.input, &chosen)),
                whole,
                "cuts {chosen:?} of {:?}",
                case.input
            );
        }
        // One byte... one char at a time.
        let singles: Vec<&str> = pieces_at(case.input, &cuts[1..cuts.len() - 1]);
        assert_eq!(feed(&singles), whole);
    }
}

#[test]
fn text_is_shown_as_soon_as_it_is_decided() {
    let mut sanitizer = Sanitizer::default();
    assert_eq!(sanitizer.push("hello <"), "hello ");
    assert_eq!(sanitizer.push("|en"), "");
    assert_eq!(sanitizer.push("d|> world\n``"), " world\n");
    assert_eq!(sanitizer.push("`rust\n<|end|>"), "```rust\n<|end|>");
    assert_eq!(sanitizer.finish(), "");
}
