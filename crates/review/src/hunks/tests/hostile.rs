//! Patches as a hostile model could shape them: malformed hunks and
//! headers, quoted names with controls and bidi characters, a last line
//! without its newline, more units than anyone could choose.

use std::fs;
use std::path::Path;

use super::super::*;
use super::{cut, git};

fn parse(text: &str) -> Result<PatchHunks, HunkError> {
    PatchHunks::parse(text.as_bytes(), Path::new("p.patch"))
}

#[test]
fn malformed_patches_are_errors_that_name_the_line() {
    let head = "diff --git a/x b/x\nindex 1..2 100644\n--- a/x\n+++ b/x\n";
    for (body, line, what) in [
        ("@@ -1,2 +1,2 @@\n-a\n+b\n", 7, "ends inside a hunk"),
        ("@@ -1 +1 @@\n-a\n+b\n+c\n", 8, "after a hunk"),
        ("@@ -1 +1 @@\n-a\n b\n", 7, "more lines than its header"),
        ("@@ -1 +1 @@\nxa\n", 6, "starts with"),
        ("@@ -1 +1\n-a\n+b\n", 5, "hunk header"),
        ("@@ -0,2 +1 @@\n-a\n+b\n", 5, "hunk header"),
        ("@@ -99999999999999999 +1 @@\n-a\n+b\n", 5, "hunk header"),
        (
            "@@ -5 +5 @@\n-a\n+b\n@@ -1 +1 @@\n-a\n+b\n",
            10,
            "out of order",
        ),
        ("", 0, ""),
    ] {
        let result = parse(&format!("{head}{body}"));
        if what.is_empty() {
            assert!(result.is_ok());
            continue;
        }
        match result {
            Err(HunkError::Malformed {
                line: at,
                what: said,
                ..
            }) => {
                assert_eq!(at, line, "{body:?}: {said}");
                assert!(said.contains(what), "{body:?}: {said}");
            }
            other => panic!("{body:?}: {other:?}"),
        }
    }
    let stray = parse("not a patch\n").unwrap_err().to_string();
    assert!(
        stray.contains("line 1 of p.patch") && stray.contains("choose files"),
        "{stray}"
    );
    let odd = parse("diff --git a/x b/x\nwhat is this\n").unwrap_err();
    assert!(odd.to_string().contains("header"), "{odd}");
    let long = format!("diff --git a/x b/x\nrename from {}\n", "x".repeat(20_000));
    assert!(parse(&long).unwrap_err().to_string().contains("too long"));
}

#[test]
fn names_with_quotes_and_controls_are_unquoted_then_escaped() {
    let text = "diff --git a/x b/y\nsimilarity index 100%\nrename from \"a\\\"q\\033[31m\\342\\200\\256\"\nrename to plain\n";
    let hunks = parse(text).unwrap();
    assert_eq!(
        hunks.header(hunks.units()[0]).unwrap(),
        "rename a\"q^[[31m<U+202E> → plain"
    );
}

#[test]
fn units_are_bounded_and_unknown_ones_refused() {
    let mut text = String::from("diff --git a/x b/x\n--- a/x\n+++ b/x\n");
    for i in 0..=MAX_UNITS {
        text.push_str(&format!("@@ -{} +{} @@\n-a\n+b\n", i + 1, i + 1));
    }
    assert!(matches!(parse(&text), Err(HunkError::TooMany { .. })));
    let hunks = parse("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n").unwrap();
    let mut selection = Selection::none(&hunks);
    for unit in [
        Unit {
            file: 1,
            part: Part::Hunk(0),
        },
        Unit {
            file: 0,
            part: Part::Hunk(1),
        },
        Unit {
            file: 0,
            part: Part::Whole,
        },
        Unit {
            file: 0,
            part: Part::Piece { hunk: 0, piece: 0 },
        },
    ] {
        assert!(matches!(
            selection.choose(&hunks, unit),
            Err(HunkError::NoSuchUnit(_))
        ));
    }
    assert!(selection.is_none() && !selection.is_all());
}

#[test]
fn a_patch_whose_last_line_has_no_newline_is_read_and_written_whole() {
    let dir = tempfile::tempdir().unwrap();
    let patch = dir.path().join("p.patch");
    let body = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new";
    fs::write(&patch, body).unwrap();
    let hunks = PatchHunks::read(&patch).unwrap();
    let (chosen, _) = cut(&patch, &hunks, |_| true);
    assert_eq!(fs::read_to_string(chosen).unwrap(), format!("{body}\n"));
    fs::write(dir.path().join("x"), "old\n").unwrap();
    git(dir.path(), &["apply", "p.chosen"]);
    assert_eq!(fs::read_to_string(dir.path().join("x")).unwrap(), "new\n");
}
