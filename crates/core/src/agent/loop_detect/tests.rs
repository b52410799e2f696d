//! Unit tests of the loop detector: the repetition rule, the signatures of
//! calls and their results, and the steering message.

use super::*;
use serde_json::json;

/// A result that is not an error, telling the model `content`.
fn told(content: &str) -> ToolOutput {
    ToolOutput {
        is_error: false,
        ..ToolOutput::error(content)
    }
}

/// Feeds the calls named by the letters of `calls` (`A` reads a.txt,
/// `B` b.txt, …), each giving the same result every time, and returns what
/// the last call found.
fn feed(detector: &mut LoopDetector, calls: &str) -> Option<Repetition> {
    let mut found = None;
    for letter in calls.chars() {
        found = detector.record(
            "read",
            &json!({ "path": format!("{letter}.txt") }),
            &told(&format!("contents of {letter}")),
        );
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
            detector.record("bash", &json!({"command": "make"}), &told("exit code: 2"));
            found = detector.record("edit", &json!({"path": "a.rs"}), &told("Edited a.rs"));
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
    let b: Value =
        serde_json::from_str(r#"{"b": {"x": "s\"\n", "y": [1, {"p": null, "q": true}]}, "a": 1}"#)
            .expect("valid JSON");
    assert_eq!(
        canonical_json(&a),
        r#"{"a":1,"b":{"x":"s\"\n","y":[1,{"p":null,"q":true}]}}"#
    );
    assert_eq!(canonical_json(&a), canonical_json(&b));
    let ok = told("Edited a.rs");
    assert_eq!(
        Signature::of("edit", &a, &ok),
        Signature::of("edit", &b, &ok)
    );
}

#[test]
fn signatures_differ_by_tool_by_value_and_by_array_order() {
    let input = json!({"a": 1, "b": 2});
    let ok = told("done");
    assert_eq!(
        Signature::of("read", &input, &ok),
        Signature::of("read", &json!({"b": 2, "a": 1}), &ok)
    );
    assert_ne!(
        Signature::of("read", &input, &ok),
        Signature::of("bash", &input, &ok)
    );
    assert_ne!(
        Signature::of("read", &input, &ok),
        Signature::of("read", &json!({"a": 1, "b": 3}), &ok)
    );
    assert_ne!(
        Signature::of("read", &json!([1, 2]), &ok),
        Signature::of("read", &json!([2, 1]), &ok)
    );
}

#[test]
fn signatures_differ_by_result_text_and_by_error() {
    let input = json!({"command": "tail -n1 build.log"});
    let sig = |result: &ToolOutput| Signature::of("bash", &input, result);
    assert_eq!(
        sig(&told("step 3\nexit code: 0")),
        sig(&told("step 3\nexit code: 0"))
    );
    assert_ne!(
        sig(&told("step 3\nexit code: 0")),
        sig(&told("step 4\nexit code: 0"))
    );
    assert_ne!(sig(&told("failed")), sig(&ToolOutput::error("failed")));
}

#[test]
fn the_same_call_with_changing_results_is_not_a_loop() {
    let mut detector = LoopDetector::new(10);
    let input = json!({"command": "sleep 0.1; tail -n1 build.log"});
    for n in 0..31 {
        let result = told(&format!("compiling crate {n}\nexit code: 0"));
        assert_eq!(detector.record("bash", &input, &result), None, "call {n}");
    }
    assert!(!detector.should_stop());
}

#[test]
fn the_same_call_with_the_same_result_is_a_loop() {
    let mut detector = LoopDetector::new(10);
    let input = json!({"command": "sleep 0.1; tail -n1 build.log"});
    let result = told("compiling crate 7\nexit code: 0");
    let found: Vec<Repetition> = (0..30)
        .filter_map(|_| detector.record("bash", &input, &result))
        .collect();
    assert_eq!(found.len(), 3);
    assert_eq!(
        found[0].calls,
        [r#"bash {"command":"sleep 0.1; tail -n1 build.log"}"#]
    );
    assert!(detector.should_stop());
}

#[test]
fn a_result_that_changes_once_breaks_the_pattern() {
    let mut detector = LoopDetector::new(10);
    let input = json!({"path": "a.txt"});
    for _ in 0..9 {
        assert_eq!(detector.record("read", &input, &told("one")), None);
    }
    assert_eq!(detector.record("read", &input, &told("two")), None);
    // The window now holds 8 × "one" then "two": a full window of "two"
    // takes nine more.
    for _ in 0..8 {
        assert_eq!(detector.record("read", &input, &told("two")), None);
    }
    assert!(detector.record("read", &input, &told("two")).is_some());
}

#[test]
fn the_step_file_named_for_a_cut_output_does_not_make_results_differ() {
    let note =
        |path: &str| format!("{STEP_FILE_NOTE}{path}{STEP_FILE_NOTE_END}narrow the command]");
    let cut = |step: u32| {
        told(&format!(
            "1\n… 500 lines omitted …\n502\n{}\nexit code: 0",
            note(&format!("/runs/r1/steps/step-{step}.out"))
        ))
    };
    let input = json!({"command": "seq 1 502"});
    assert_eq!(
        stable_result(&cut(3).content),
        format!("1\n… 500 lines omitted …\n502\n{}\nexit code: 0", note(""))
    );
    assert_eq!(
        Signature::of("bash", &input, &cut(3)),
        Signature::of("bash", &input, &cut(14))
    );
    let mut detector = LoopDetector::new(4);
    let found = (1..=4).filter_map(|step| detector.record("bash", &input, &cut(step)));
    assert_eq!(found.count(), 1);
    // Only the path is left out: the rest of what the model was told counts.
    assert_ne!(
        stable_result(&format!("a\n{}", note("/s/step-1.out"))),
        stable_result(&format!("b\n{}", note("/s/step-1.out")))
    );
    assert_eq!(stable_result("no note here"), "no note here");
    let unclosed = format!("{STEP_FILE_NOTE}/unclosed");
    assert_eq!(stable_result(&unclosed), unclosed.as_str());
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
    let wrote = told("Overwrote a.txt (500 bytes)");
    detector.record("write", &json!({ "content": long }), &wrote);
    let found = detector
        .record("write", &json!({ "content": long }), &wrote)
        .expect("repeat");
    assert_eq!(found.calls[0].chars().count(), "write ".len() + 201);
    assert!(found.calls[0].ends_with('…'));
}
