//! Loop detection: notices when the model keeps making the same tool calls,
//! so the loop can tell it to change approach, and stop the run when telling
//! it does not help.
//!
//! A call's [`Signature`] is its tool name and a SHA-256 digest of its input
//! as canonical JSON (object keys sorted at every level), so the same input
//! with its keys in another order is the same call.
//!
//! The rule: the detector keeps the signatures of the last `window` calls
//! that ran since the run started or since the last detection. A repetition
//! is found when that window is full and the whole of it is one pattern of
//! 1, 2 or 3 calls repeated from its first call on, the last repeat possibly
//! cut short (`AAAAAAAAAA`, `ABABABABAB`, `ABCABCABCA`), and the pattern fits
//! in the window at least twice. The shortest such pattern is reported. A
//! detection empties the window, so the same repetition is found again only
//! after another `window` calls that repeat. A window of 0 turns detection
//! off; a window of 1 can never hold a pattern twice, so it finds nothing.
//! Only calls that ran count: one cut off by the output limit or refused by
//! `--max-tools` is not recorded.
//!
//! The loop adds each detection's steering text after the tool results of
//! the turn it happened in, and ends the run after that turn once
//! [`MAX_DETECTIONS`] were made in it ([`LoopDetector::should_stop`]).

use std::collections::VecDeque;

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::event::Event;
use crate::llm::Block;
use crate::session::BlockRecord;

/// How many calls the detector looks at unless told otherwise.
pub const DEFAULT_WINDOW: usize = 10;

/// After this many detections in one run the run is stopped.
pub const MAX_DETECTIONS: u32 = 3;

/// The longest pattern of calls looked for.
const LONGEST_PATTERN: usize = 3;

/// How much of a call's input the steering message quotes.
const SHOWN_INPUT_CHARS: usize = 200;

/// What makes two tool calls the same call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    tool: String,
    input_digest: [u8; 32],
}

impl Signature {
    pub fn of(tool: &str, input: &Value) -> Signature {
        Signature {
            tool: tool.to_string(),
            input_digest: Sha256::digest(canonical_json(input).as_bytes()).into(),
        }
    }
}

/// `value` as compact JSON with the keys of every object sorted, whatever
/// order they arrived in. serde_json's own order depends on a crate feature
/// (`preserve_order`) that any dependency may turn on, so it is not relied on.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(item, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// One call as the detector remembers it.
#[derive(Debug, Clone)]
struct Call {
    signature: Signature,
    /// The tool and a short form of its input, for the steering message.
    shown: String,
}

/// A repetition that was found: the pattern and how often it filled the
/// window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repetition {
    /// How many calls the window held.
    pub window: usize,
    /// How many calls the repeated pattern has (1 to 3).
    pub pattern_len: usize,
    /// How many whole times the pattern fills the window.
    pub repeats: usize,
    /// The tool of each call of the pattern, in order.
    pub tools: Vec<String>,
    /// Each call of the pattern: its tool and (shortened) canonical input.
    pub calls: Vec<String>,
    /// Which detection of the run this is (1 for the first).
    pub detection: u32,
}

impl Repetition {
    /// The event that reports it.
    pub fn event(&self) -> Event {
        Event::LoopDetected {
            pattern_len: self.pattern_len as u32,
            repeats: self.repeats as u32,
            tools: self.tools.clone(),
        }
    }

    /// What the model is told, after the results of the turn's calls.
    pub fn steering(&self) -> String {
        let what = if self.pattern_len == 1 {
            "the same call".to_string()
        } else {
            format!("the same {} calls", self.pattern_len)
        };
        let mut text = format!(
            "[ah: loop detected] Your last {} tool calls repeat {what} {} times:\n",
            self.window, self.repeats
        );
        for (i, call) in self.calls.iter().enumerate() {
            text.push_str(&format!("  {}. {call}\n", i + 1));
        }
        text.push_str(&format!(
            "Repeating them will not give you anything new. Change approach: re-read the task and \
             the results you got, try a different tool or different input, or, if you are blocked, \
             say what blocks you and end your turn. This is warning {} of {MAX_DETECTIONS}: ah stops \
             the run after {MAX_DETECTIONS} such warnings.",
            self.detection
        ));
        text
    }

    /// The steering message as a block of the user message that carries the
    /// turn's tool results.
    pub fn steering_block(&self) -> BlockRecord {
        BlockRecord::from(Block::Text {
            text: self.steering(),
        })
    }
}

/// Watches the calls of one run (one user input) for repetitions.
#[derive(Debug)]
pub struct LoopDetector {
    window: usize,
    recent: VecDeque<Call>,
    detections: u32,
}

impl LoopDetector {
    /// A detector looking at the last `window` calls; 0 turns it off.
    pub fn new(window: usize) -> LoopDetector {
        LoopDetector {
            window,
            recent: VecDeque::with_capacity(window),
            detections: 0,
        }
    }

    /// Notes a call that ran; returns the repetition it completes, if any.
    pub fn record(&mut self, tool: &str, input: &Value) -> Option<Repetition> {
        if self.window == 0 {
            return None;
        }
        if self.recent.len() == self.window {
            self.recent.pop_front();
        }
        self.recent.push_back(Call {
            signature: Signature::of(tool, input),
            shown: shown(tool, input),
        });
        if self.recent.len() < self.window {
            return None;
        }
        let pattern_len = (1..=LONGEST_PATTERN)
            .filter(|len| 2 * len <= self.window)
            .find(|&len| self.repeats_with_period(len))?;
        self.detections += 1;
        let pattern: Vec<Call> = self.recent.drain(..).take(pattern_len).collect();
        Some(Repetition {
            window: self.window,
            pattern_len,
            repeats: self.window / pattern_len,
            tools: pattern.iter().map(|c| c.signature.tool.clone()).collect(),
            calls: pattern.into_iter().map(|c| c.shown).collect(),
            detection: self.detections,
        })
    }

    /// Whether the run has repeated itself often enough to be stopped.
    pub fn should_stop(&self) -> bool {
        self.detections >= MAX_DETECTIONS
    }

    /// Every call in the window equals the one `len` calls before it.
    fn repeats_with_period(&self, len: usize) -> bool {
        (len..self.recent.len()).all(|i| self.recent[i].signature == self.recent[i - len].signature)
    }
}

/// `tool {input}` on one line, the input cut to a readable length.
fn shown(tool: &str, input: &Value) -> String {
    let json = canonical_json(input);
    let mut short: String = json.chars().take(SHOWN_INPUT_CHARS).collect();
    if short.len() < json.len() {
        short.push('…');
    }
    format!("{tool} {short}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Feeds the calls named by the letters of `calls` (`A` reads a.txt,
    /// `B` b.txt, …) and returns what the last call found.
    fn feed(detector: &mut LoopDetector, calls: &str) -> Option<Repetition> {
        let mut found = None;
        for letter in calls.chars() {
            found = detector.record("read", &json!({ "path": format!("{letter}.txt") }));
        }
        found
    }

    fn detect(window: usize, calls: &str) -> Option<Repetition> {
        feed(&mut LoopDetector::new(window), calls)
    }

    #[test]
    fn one_call_repeated_over_the_whole_window_is_found() {
        let found = detect(10, "AAAAAAAAAA").expect("a repetition");
        assert_eq!(found.pattern_len, 1);
        assert_eq!(found.repeats, 10);
        assert_eq!(found.tools, ["read"]);
        assert_eq!(found.calls, [r#"read {"path":"A.txt"}"#]);
        assert_eq!(found.detection, 1);
        assert_eq!(
            found.event(),
            Event::LoopDetected {
                pattern_len: 1,
                repeats: 10,
                tools: vec!["read".to_string()],
            }
        );
    }

    #[test]
    fn patterns_of_two_and_three_calls_are_found() {
        let two = detect(10, "ABABABABAB").expect("pattern of 2");
        assert_eq!((two.pattern_len, two.repeats), (2, 5));
        assert_eq!(
            two.calls,
            [r#"read {"path":"A.txt"}"#, r#"read {"path":"B.txt"}"#]
        );
        let three = detect(10, "ABCABCABCA").expect("pattern of 3, last repeat cut short");
        assert_eq!((three.pattern_len, three.repeats), (3, 3));
        assert_eq!(three.calls.len(), 3);
        let mixed_tools = {
            let mut detector = LoopDetector::new(4);
            let mut found = None;
            for _ in 0..2 {
                detector.record("bash", &json!({"command": "make"}));
                found = detector.record("edit", &json!({"path": "a.rs"}));
            }
            found.expect("pattern of 2 tools")
        };
        assert_eq!(mixed_tools.tools, ["bash", "edit"]);
    }

    #[test]
    fn the_shortest_pattern_is_reported() {
        // AAAAAA is also ABAB.. with A == B; it is a pattern of one call.
        assert_eq!(detect(6, "AAAAAA").map(|r| r.pattern_len), Some(1));
    }

    #[test]
    fn near_misses_are_not_loops() {
        assert_eq!(detect(10, "AAAAAAAAA"), None, "window not full yet");
        assert_eq!(
            detect(10, "AAAAAAAAAB"),
            None,
            "one call differs at the end"
        );
        assert_eq!(
            detect(10, "BAAAAAAAAA"),
            None,
            "one call differs at the start"
        );
        assert_eq!(detect(10, "ABABABABAA"), None);
        assert_eq!(detect(10, "ABCABCABCB"), None);
        assert_eq!(detect(10, "ABCDABCDAB"), None, "pattern of 4 is too long");
        assert_eq!(detect(4, "ABCA"), None, "a pattern must fit twice");
        assert_eq!(detect(10, "ABCDEFGHIJ"), None);
    }

    #[test]
    fn the_window_slides_past_calls_that_do_not_repeat() {
        let mut detector = LoopDetector::new(10);
        assert_eq!(feed(&mut detector, "XAAAAAAAAA"), None);
        assert_eq!(feed(&mut detector, "A").map(|r| r.pattern_len), Some(1));
    }

    #[test]
    fn a_detection_resets_the_window() {
        let mut detector = LoopDetector::new(10);
        assert!(feed(&mut detector, "AAAAAAAAAA").is_some());
        assert!(!detector.should_stop());
        assert_eq!(feed(&mut detector, "A"), None, "not again on the next call");
        assert_eq!(
            feed(&mut detector, "AAAAAAAA"),
            None,
            "nine since the reset"
        );
        let second = feed(&mut detector, "A").expect("a full window again");
        assert_eq!(second.detection, 2);
        assert!(!detector.should_stop());
        let third = feed(&mut detector, "ABABABABAB").expect("a third repetition");
        assert_eq!(third.detection, MAX_DETECTIONS);
        assert!(detector.should_stop());
    }

    #[test]
    fn a_window_of_zero_disables_detection() {
        let mut detector = LoopDetector::new(0);
        assert_eq!(feed(&mut detector, &"A".repeat(50)), None);
        assert!(!detector.should_stop());
        assert_eq!(detect(1, "AAAA"), None, "no pattern fits twice in one call");
        assert_eq!(detect(2, "AA").map(|r| r.repeats), Some(2));
    }

    #[test]
    fn canonical_json_sorts_keys_at_every_level() {
        let a = json!({"a": 1, "b": {"y": [1, {"q": true, "p": null}], "x": "s\"\n"}});
        let b: Value = serde_json::from_str(
            r#"{"b": {"x": "s\"\n", "y": [1, {"p": null, "q": true}]}, "a": 1}"#,
        )
        .expect("valid JSON");
        assert_eq!(
            canonical_json(&a),
            r#"{"a":1,"b":{"x":"s\"\n","y":[1,{"p":null,"q":true}]}}"#
        );
        assert_eq!(canonical_json(&a), canonical_json(&b));
        assert_eq!(Signature::of("edit", &a), Signature::of("edit", &b));
    }

    #[test]
    fn signatures_differ_by_tool_by_value_and_by_array_order() {
        let input = json!({"a": 1, "b": 2});
        assert_eq!(
            Signature::of("read", &input),
            Signature::of("read", &json!({"b": 2, "a": 1}))
        );
        assert_ne!(Signature::of("read", &input), Signature::of("bash", &input));
        assert_ne!(
            Signature::of("read", &input),
            Signature::of("read", &json!({"a": 1, "b": 3}))
        );
        assert_ne!(
            Signature::of("read", &json!([1, 2])),
            Signature::of("read", &json!([2, 1]))
        );
    }

    #[test]
    fn the_steering_message_names_the_calls_and_the_count() {
        let found = detect(10, "ABABABABAB").expect("pattern of 2");
        let text = found.steering();
        assert!(
            text.contains("Your last 10 tool calls repeat the same 2 calls 5 times"),
            "{text}"
        );
        assert!(text.contains(r#"1. read {"path":"A.txt"}"#), "{text}");
        assert!(text.contains(r#"2. read {"path":"B.txt"}"#), "{text}");
        assert!(text.contains("Change approach"), "{text}");
        assert!(text.contains("warning 1 of 3"), "{text}");
        let long = "x".repeat(500);
        let mut detector = LoopDetector::new(2);
        detector.record("write", &json!({ "content": long }));
        let found = detector
            .record("write", &json!({ "content": long }))
            .expect("repeat");
        assert_eq!(found.calls[0].chars().count(), "write ".len() + 201);
        assert!(found.calls[0].ends_with('…'));
    }
}
