//! The `edit` tool against real files and a denying write policy.

use serde_json::{Value, json};

use super::*;
use crate::test_exec::{DENIED, TestExec};

/// The tool as the model reaches it: through [`crate::call`] and its
/// schema check.
async fn call(input: &Value, exec: &TestExec) -> ToolOutput {
    crate::call("edit", input, exec).await
}

fn edit_input(path: &str, old: &str, new: &str) -> Value {
    json!({"path": path, "old_string": old, "new_string": new})
}

#[tokio::test]
async fn one_match_is_replaced_and_the_region_shown() {
    let exec = TestExec::new();
    let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    std::fs::write(exec.path("f.txt"), &text).unwrap();
    let out = call(&edit_input("f.txt", "line 5\n", "five\nFIVE\n"), &exec).await;
    assert!(!out.is_error, "{}", out.content);
    let expected = text.replace("line 5\n", "five\nFIVE\n");
    assert_eq!(
        std::fs::read_to_string(exec.path("f.txt")).unwrap(),
        expected
    );
    assert_eq!(
        out.details,
        json!({"path": "/work/f.txt", "replacements": 1, "lines_removed": 1, "lines_added": 2})
    );
    assert_eq!(
        out.content,
        "Edited /work/f.txt: 1 replacement, 1 line removed, 2 added.\n\
         \x20    2\tline 2\n     3\tline 3\n     4\tline 4\n     5\tfive\n     6\tFIVE\n\
         \x20    7\tline 6\n     8\tline 7\n     9\tline 8\n"
    );
    assert!(out.may_change_files);
}

#[tokio::test]
async fn zero_matches_is_an_error_with_a_hint() {
    let exec = TestExec::new();
    std::fs::write(exec.path("f.rs"), "fn main() {\n    call();\n}\n").unwrap();
    let out = call(&edit_input("f.rs", "call();\n}  ", "go();"), &exec).await;
    assert!(out.is_error);
    assert!(
        out.content
            .starts_with("old_string was not found in /work/f.rs"),
        "{}",
        out.content
    );
    assert!(out.content.contains("after trimming"), "{}", out.content);
    let out = call(&edit_input("f.rs", "absent", "x"), &exec).await;
    assert!(
        out.content.contains("copy the text exactly"),
        "{}",
        out.content
    );

    std::fs::write(exec.path("crlf.txt"), "a\r\nb\r\n").unwrap();
    let out = call(&edit_input("crlf.txt", "a\nb", "c"), &exec).await;
    assert!(out.content.contains("CRLF"), "{}", out.content);
    assert_eq!(
        std::fs::read_to_string(exec.path("crlf.txt")).unwrap(),
        "a\r\nb\r\n"
    );
}

#[tokio::test]
async fn many_matches_need_replace_all() {
    let exec = TestExec::new();
    std::fs::write(exec.path("f.txt"), "x = 1\nx = 2\nx = 3\n").unwrap();
    let out = call(&edit_input("f.txt", "x =", "y ="), &exec).await;
    assert!(out.is_error);
    assert!(out.content.contains("occurs 3 times"), "{}", out.content);
    assert!(out.content.contains("replace_all"), "{}", out.content);
    assert_eq!(
        std::fs::read_to_string(exec.path("f.txt")).unwrap(),
        "x = 1\nx = 2\nx = 3\n"
    );

    let mut input = edit_input("f.txt", "x =", "y =");
    input["replace_all"] = json!(true);
    let out = call(&input, &exec).await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(
        std::fs::read_to_string(exec.path("f.txt")).unwrap(),
        "y = 1\ny = 2\ny = 3\n"
    );
    assert_eq!(out.details["replacements"], json!(3));
    assert_eq!(out.details["lines_removed"], json!(3));
}

#[tokio::test]
async fn empty_or_identical_strings_are_errors() {
    let exec = TestExec::new();
    std::fs::write(exec.path("f.txt"), "abc").unwrap();
    let out = call(&edit_input("f.txt", "", "x"), &exec).await;
    assert!(
        out.is_error && out.content.contains("old_string is empty"),
        "{}",
        out.content
    );
    let out = call(&edit_input("f.txt", "abc", "abc"), &exec).await;
    assert!(
        out.is_error && out.content.contains("are the same"),
        "{}",
        out.content
    );
    let input = json!({"path": "f.txt", "new_string": "b", "replace_all": "yes"});
    let out = call(&input, &exec).await;
    assert!(out.is_error && !out.may_change_files);
    assert_eq!(
        out.content,
        "invalid input for edit: missing required field \"old_string\"; \
         field \"replace_all\" must be a boolean, got a string"
    );
    assert_eq!(std::fs::read_to_string(exec.path("f.txt")).unwrap(), "abc");
}

#[tokio::test]
async fn policy_refusal_leaves_the_file_untouched() {
    let exec = TestExec::new();
    std::fs::create_dir(exec.path(DENIED)).unwrap();
    let file = exec.path(&format!("{DENIED}/config"));
    std::fs::write(&file, "key = old\n").unwrap();
    let before = std::fs::metadata(&file).unwrap().modified().unwrap();
    let out = call(
        &edit_input(&format!("/work/{DENIED}/config"), "old", "new"),
        &exec,
    )
    .await;
    assert!(out.is_error);
    assert!(out.content.contains("is not allowed"), "{}", out.content);
    assert!(!out.may_change_files);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "key = old\n");
    assert_eq!(
        std::fs::metadata(&file).unwrap().modified().unwrap(),
        before
    );

    // A link inside the root is checked where it points, not by its name.
    std::os::unix::fs::symlink(format!("{DENIED}/config"), exec.path("innocent")).unwrap();
    let out = call(&edit_input("innocent", "old", "new"), &exec).await;
    assert!(
        out.is_error && out.content.contains("is not allowed"),
        "{}",
        out.content
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "key = old\n");
}

#[tokio::test]
async fn symlink_outside_is_refused() {
    let exec = TestExec::new();
    let victim = exec.outside("victim");
    std::fs::write(&victim, "old").unwrap();
    std::os::unix::fs::symlink(&victim, exec.path("link")).unwrap();
    let out = call(&edit_input("link", "old", "new"), &exec).await;
    assert!(
        out.is_error && out.content.contains("outside /work"),
        "{}",
        out.content
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "old");
}

#[test]
fn line_span_counts_touched_lines() {
    assert_eq!(line_span(""), 0);
    assert_eq!(line_span("a"), 1);
    assert_eq!(line_span("a\n"), 1);
    assert_eq!(line_span("a\nb"), 2);
}

#[tokio::test]
async fn a_cut_region_is_kept_whole_in_stdout_and_the_model_told_how_to_see_more() {
    let limits = crate::OutputLimits {
        edit: 300,
        ..crate::OutputLimits::default()
    };
    let exec = TestExec::new()
        .with_limits(limits)
        .with_full_output("/runs/r1/steps/step-2.out");
    let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    std::fs::write(exec.path("f.txt"), &text).unwrap();
    let new: String = (1..=40).map(|i| format!("new {i}\n")).collect();
    let out = call(&edit_input("f.txt", "line 5\n", &new), &exec).await;
    assert!(!out.is_error, "{}", out.content);

    let lines: Vec<String> = text
        .replace("line 5\n", &new)
        .lines()
        .map(String::from)
        .collect();
    // Lines 2..=47: three lines of context on each side of the 40 new ones.
    let region: String = (2..=47)
        .map(|n| format!("{n:>6}\t{}\n", lines[n - 1]))
        .collect();
    assert_eq!(String::from_utf8(out.stdout).unwrap(), region);
    assert!(!out.content.contains("new 1\n"), "{}", out.content);
    assert!(
        out.content.ends_with(
            "    47\tline 8\n[output cut; the whole output is kept in the run's step file \
             (/runs/r1/steps/step-2.out); read the file (offset and limit) to see the rest]"
        ),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn a_file_over_the_cap_is_refused_without_reading_it() {
    let exec = TestExec::new();
    let file = std::fs::File::create(exec.path("huge.txt")).unwrap();
    file.set_len(1 << 30).unwrap();
    let out = call(&edit_input("huge.txt", "a", "b"), &exec).await;
    assert!(out.is_error && !out.may_change_files);
    assert_eq!(
        out.content,
        "/work/huge.txt is 1.0 GiB, over the 8.0 MiB that edit works on. Use bash in the \
         sandbox for a file this big (e.g. `sed -i`, `awk`, or a script)."
    );
}

#[tokio::test]
async fn a_replace_all_that_would_blow_the_file_up_is_refused_before_building_it() {
    let exec = TestExec::new();
    std::fs::write(exec.path("a.txt"), "a".repeat(1_000_000)).unwrap();
    let input = json!({"path": "a.txt", "old_string": "a", "new_string": "b".repeat(1000),
                       "replace_all": true});
    let out = call(&input, &exec).await;
    assert!(out.is_error && !out.may_change_files);
    assert_eq!(
        out.content,
        "/work/a.txt after 1000000 replacements would be 953.7 MiB, over the 8.0 MiB that \
         edit builds. Make smaller changes, or use bash in the sandbox (e.g. `sed -i`, or a \
         script). Nothing was changed."
    );
    assert_eq!(
        std::fs::metadata(exec.path("a.txt")).unwrap().len(),
        1_000_000
    );
}

#[tokio::test]
async fn the_region_shown_cuts_long_lines() {
    let exec = TestExec::new();
    std::fs::write(
        exec.path("a.txt"),
        format!("START{}\n", "a".repeat(100_000)),
    )
    .unwrap();
    let out = call(&edit_input("a.txt", "START", "bbbb"), &exec).await;
    assert!(!out.is_error, "{}", out.content);
    let region = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        region,
        format!(
            "     1\tbbbb{}… [line cut: 98004 more chars]\n",
            "a".repeat(1996)
        )
    );
}
