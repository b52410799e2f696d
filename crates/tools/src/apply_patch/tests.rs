//! `apply_patch` through [`crate::call`] on a real temp directory:
//! the parser, matching, all-or-nothing, confinement and the policy.

use std::os::unix::fs::PermissionsExt as _;

use serde_json::json;

use super::matching::{self, Miss};
use super::parse::{Hunk, Line, Op, ParseError, parse};
use crate::fs_beneath::BeneathError;
use crate::fs_beneath::folder::folder_of;
use crate::test_exec::{DENIED, TestExec};
use crate::{Exec, ToolOutput};

async fn apply(exec: &TestExec, patch: &str) -> ToolOutput {
    crate::call("apply_patch", &json!({ "input": patch }), exec).await
}

fn read(exec: &TestExec, rel: &str) -> String {
    std::fs::read_to_string(exec.path(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
}

fn ctx(t: &str) -> Line {
    Line::Context(t.into())
}

#[test]
fn every_section_kind_parses() {
    let ops = parse(
        "\n*** Begin Patch\n*** Add File: a/new.txt\n+one\n+\n*** Delete File: old.txt\n\
         *** Update File: src/m.py\n*** Move to: src/n.py\n@@ class A\n@@ def f():\n \
         x = 1\n-y = 2\n+y = 3\n\n*** End of File\n*** Update File: b.txt\n keep\n+more\n\
         *** End Patch\n\n",
    )
    .expect("parses");
    assert_eq!(
        ops,
        vec![
            Op::Add {
                path: "a/new.txt".into(),
                content: "one\n\n".into()
            },
            Op::Delete {
                path: "old.txt".into()
            },
            Op::Update {
                path: "src/m.py".into(),
                move_to: Some("src/n.py".into()),
                hunks: vec![Hunk {
                    headers: vec!["class A".into(), "def f():".into()],
                    lines: vec![
                        ctx("x = 1"),
                        Line::Remove("y = 2".into()),
                        Line::Add("y = 3".into()),
                        ctx("")
                    ],
                    end_of_file: true,
                }],
            },
            Op::Update {
                path: "b.txt".into(),
                move_to: None,
                hunks: vec![Hunk {
                    headers: Vec::new(),
                    lines: vec![ctx("keep"), Line::Add("more".into())],
                    end_of_file: false,
                }],
            },
        ]
    );
}

#[test]
fn malformed_patches_name_the_line() {
    let cases = [
        ("", 1, "the patch is empty"),
        ("*** Update File: a\n", 1, "must start with"),
        ("*** Begin Patch\n*** Delete File: a\n", 2, "must end with"),
        ("*** Begin Patch\n*** End Patch", 1, "changes no file"),
        (
            "*** Begin Patch\n*** Add File: a\nno plus\n*** End Patch",
            3,
            "must start with '+'",
        ),
        (
            "*** Begin Patch\n*** Update File: a\n@@\n*** End Patch",
            3,
            "no lines",
        ),
        (
            "*** Begin Patch\n*** Update File: a\n*** End Patch",
            2,
            "has no hunk",
        ),
        (
            "*** Begin Patch\n*** Update File: a\n x\n?y\n*** End Patch",
            4,
            "must start with ' ', '-' or '+'",
        ),
        (
            "*** Begin Patch\n*** Remove File: a\n*** End Patch",
            2,
            "expected \"*** Add File: \"",
        ),
        (
            "*** Begin Patch\n*** Add File:  \n*** End Patch",
            2,
            "no path",
        ),
    ];
    for (patch, line, text) in cases {
        let ParseError { line: got, message } = parse(patch).expect_err(patch);
        assert_eq!(got, line, "{patch:?}: {message}");
        assert!(message.contains(text), "{patch:?}: {message}");
    }
}

fn hunk(headers: &[&str], lines: Vec<Line>) -> Hunk {
    Hunk {
        headers: headers.iter().map(|h| (*h).to_string()).collect(),
        lines,
        end_of_file: false,
    }
}

#[test]
fn matching_is_exact_first_then_tolerates_only_trailing_whitespace() {
    let text = "fn a() {\n    one();  \n}\nfn b() {\n    one();\n}\n";
    let change = |lines| vec![hunk(&["fn b() {"], lines)];
    // The header picks the second `one();`; the first is not touched.
    let out = matching::apply(
        text,
        &change(vec![
            Line::Remove("    one();".into()),
            Line::Add("    two();".into()),
        ]),
    )
    .expect("applies");
    assert_eq!(out, "fn a() {\n    one();  \n}\nfn b() {\n    two();\n}\n");
    // Trailing spaces in the file do not stop a match, and context lines
    // keep the file's own text.
    let out = matching::apply(
        text,
        &[hunk(
            &[],
            vec![
                ctx("fn a() {"),
                ctx("    one();"),
                Line::Add("    x();".into()),
            ],
        )],
    )
    .expect("applies");
    assert!(
        out.starts_with("fn a() {\n    one();  \n    x();\n}\n"),
        "{out:?}"
    );
    // Indentation is never guessed.
    let miss = matching::apply(text, &[hunk(&[], vec![Line::Remove("one();".into())])])
        .expect_err("no match");
    assert_eq!(
        miss,
        Miss {
            hunk: 1,
            looked_for: vec!["one();".into()],
            header: false
        }
    );
}

#[test]
fn line_endings_end_of_file_and_pure_additions() {
    let crlf = "a\r\nb\r\nc\r\n";
    let out = matching::apply(crlf, &[hunk(&[], vec![ctx("b"), Line::Add("b2".into())])])
        .expect("applies");
    assert_eq!(out, "a\r\nb\r\nb2\r\nc\r\n");

    let no_final_newline = "x\ny";
    let out = matching::apply(
        no_final_newline,
        &[hunk(
            &[],
            vec![Line::Remove("y".into()), Line::Add("z".into())],
        )],
    )
    .expect("applies");
    assert_eq!(out, "x\nz");

    let repeated = "end\nmid\nend\n";
    let mut at_end = hunk(
        &[],
        vec![Line::Remove("end".into()), Line::Add("END".into())],
    );
    at_end.end_of_file = true;
    assert_eq!(
        matching::apply(repeated, &[at_end]).expect("applies"),
        "end\nmid\nEND\n"
    );
    // A trailing blank context line stands for the end of the file.
    let out = matching::apply(
        "a\nb\n",
        &[hunk(&[], vec![ctx("b"), Line::Add("c".into()), ctx("")])],
    )
    .expect("applies");
    assert_eq!(out, "a\nb\nc\n");

    let out = matching::apply("a\n", &[hunk(&[], vec![Line::Add("z".into())])]).expect("applies");
    assert_eq!(out, "a\nz\n");
    let out =
        matching::apply("h\nx\n", &[hunk(&["h"], vec![Line::Add("y".into())])]).expect("applies");
    assert_eq!(out, "h\ny\nx\n");
    assert_eq!(
        matching::apply("", &[hunk(&[], vec![Line::Add("first".into())])]).expect("applies"),
        "first\n"
    );
}

#[tokio::test]
async fn add_update_move_and_delete_in_one_patch() {
    let exec = TestExec::new();
    std::fs::write(exec.path("keep.txt"), "one\ntwo\nthree\n").unwrap();
    std::fs::write(exec.path("old.sh"), "#!/bin/sh\necho old\n").unwrap();
    std::fs::set_permissions(exec.path("old.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(exec.path("gone.txt"), "bye\n").unwrap();
    let out = apply(
        &exec,
        "*** Begin Patch\n\
         *** Add File: deep/new/file.txt\n+hello\n+world\n\
         *** Update File: /work/keep.txt\n@@\n one\n-two\n+TWO\n three\n\
         *** Update File: old.sh\n*** Move to: bin/new.sh\n@@\n-echo old\n+echo new\n\
         *** Delete File: gone.txt\n\
         *** End Patch",
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(out.may_change_files);
    assert_eq!(
        out.content,
        "Applied the patch:\nA /work/deep/new/file.txt\nM /work/keep.txt\n\
         M /work/bin/new.sh (moved from /work/old.sh)\nD /work/gone.txt\n"
    );
    assert_eq!(read(&exec, "deep/new/file.txt"), "hello\nworld\n");
    assert_eq!(read(&exec, "keep.txt"), "one\nTWO\nthree\n");
    assert_eq!(read(&exec, "bin/new.sh"), "#!/bin/sh\necho new\n");
    let mode = std::fs::metadata(exec.path("bin/new.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755, "a moved file keeps its mode");
    assert!(!exec.path("old.sh").exists() && !exec.path("gone.txt").exists());
    assert_eq!(out.details["files"][2]["moved_from"], json!("/work/old.sh"));
    // No staging file is left anywhere.
    let leftovers = std::process::Command::new("find")
        .arg(exec.path(""))
        .arg("-name")
        .arg(".ah-patch-*")
        .output()
        .unwrap();
    assert!(leftovers.stdout.is_empty(), "{leftovers:?}");
}

#[tokio::test]
async fn a_failing_hunk_leaves_every_file_untouched_and_names_file_and_hunk() {
    let exec = TestExec::new();
    std::fs::write(exec.path("a.txt"), "alpha\n").unwrap();
    std::fs::write(exec.path("b.txt"), "one\ntwo\n").unwrap();
    let out = apply(
        &exec,
        "*** Begin Patch\n*** Add File: c.txt\n+new\n\
         *** Update File: a.txt\n-alpha\n+ALPHA\n\
         *** Update File: b.txt\n@@\n-one\n+ONE\n@@ two\n-three\n+THREE\n\
         *** Delete File: a2.txt\n*** End Patch",
    )
    .await;
    assert!(out.is_error && !out.may_change_files);
    assert_eq!(
        out.content,
        "hunk 2 of 2 (@@ two) does not match /work/b.txt: its context and '-' lines were not \
         found after hunk 1. It looked for:\n    three\nRead the file again and copy those \
         lines exactly (indentation included); only trailing whitespace may differ. Nothing \
         was changed."
    );
    assert_eq!(read(&exec, "a.txt"), "alpha\n");
    assert_eq!(read(&exec, "b.txt"), "one\ntwo\n");
    assert!(!exec.path("c.txt").exists());
}

#[tokio::test]
async fn refusals_come_before_anything_is_written() {
    let exec = TestExec::new();
    std::fs::write(exec.path("a.txt"), "a\n").unwrap();
    std::fs::write(exec.path("exists.txt"), "x\n").unwrap();
    let cases = [
        (
            format!("*** Update File: a.txt\n*** Move to: {DENIED}/a.txt\n-a\n+b\n"),
            "writing /work/protected/a.txt is not allowed",
        ),
        (
            "*** Update File: ../outside.txt\n-a\n+b\n".to_string(),
            "is outside /work",
        ),
        (
            "*** Add File: exists.txt\n+y\n".to_string(),
            "cannot add /work/exists.txt: it exists already",
        ),
        (
            "*** Update File: missing.txt\n-a\n+b\n".to_string(),
            "/work/missing.txt does not exist",
        ),
        (
            "*** Update File: a.txt\n-a\n+b\n*** Delete File: /work/a.txt\n".to_string(),
            "/work/a.txt appears twice in the patch",
        ),
    ];
    for (body, expected) in cases {
        let patch = format!("*** Begin Patch\n*** Add File: first.txt\n+1\n{body}*** End Patch");
        let out = apply(&exec, &patch).await;
        assert!(out.is_error && !out.may_change_files, "{}", out.content);
        assert!(out.content.contains(expected), "{}", out.content);
        assert!(
            out.content.ends_with("Nothing was changed."),
            "{}",
            out.content
        );
        assert!(!exec.path("first.txt").exists(), "{body}");
        assert_eq!(read(&exec, "a.txt"), "a\n");
    }
    assert!(!exec.path(DENIED).exists());
}

#[tokio::test]
async fn links_out_are_refused_and_folders_are_never_opened_through_a_link() {
    let exec = TestExec::new();
    let victim = exec.outside("victim.txt");
    std::fs::write(&victim, "original\n").unwrap();
    std::os::unix::fs::symlink(&victim, exec.path("link.txt")).unwrap();
    let out = apply(
        &exec,
        "*** Begin Patch\n*** Update File: link.txt\n-original\n+pwned\n*** End Patch",
    )
    .await;
    assert!(
        out.is_error && out.content.contains("outside /work"),
        "{}",
        out.content
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "original\n");

    // A folder swapped for a link after the path was checked: the folder
    // is not opened through it, so nothing is staged outside.
    std::os::unix::fs::symlink(exec.outside(""), exec.path("dir")).unwrap();
    assert!(matches!(
        folder_of(exec.root(), "dir/f", true),
        Err(BeneathError::Changed)
    ));
    let (_, name) = folder_of(exec.root(), "new/f", true).expect("made");
    assert_eq!(name, "f");
    assert!(exec.path("new").is_dir());
}

#[test]
fn the_format_example_in_the_description_is_itself_a_valid_patch() {
    let description = super::spec().description;
    let start = description.find("*** Begin Patch").expect("example start");
    let end = description.find("*** End Patch").expect("example end") + "*** End Patch".len();
    let example: String = description[start..end]
        .lines()
        // The example annotates two lines; the annotations are not patch text.
        .map(|line| line.split("   (optional").next().unwrap_or(line))
        .collect::<Vec<_>>()
        .join("\n");
    let ops = parse(&example).unwrap_or_else(|e| panic!("{e}:\n{example}"));
    assert_eq!(ops.len(), 3, "{example}");
    assert!(example.contains("\n context line (starts with a space)\n"));
}

#[tokio::test]
async fn big_files_and_results_are_refused_before_anything_is_read_or_written() {
    let exec = TestExec::new();
    let file = std::fs::File::create(exec.path("huge.txt")).unwrap();
    file.set_len(1 << 30).unwrap();
    let out = apply(
        &exec,
        "*** Begin Patch\n*** Update File: huge.txt\n@@\n-a\n+b\n*** End Patch\n",
    )
    .await;
    assert!(out.is_error && !out.may_change_files);
    assert_eq!(
        out.content,
        "/work/huge.txt is 1.0 GiB, over the 8.0 MiB that apply_patch works on. Use bash in \
         the sandbox for a file this big (e.g. `sed -i`, `awk`, or a script). Nothing was \
         changed."
    );

    // Five new files of 7 MiB each: each within the cap, together over it.
    let body: String = format!("+{}\n", "x".repeat(1023)).repeat(7 * 1024);
    let mut patch = String::from("*** Begin Patch\n");
    for i in 0..5 {
        patch.push_str(&format!("*** Add File: new{i}.txt\n{body}"));
    }
    patch.push_str("*** End Patch\n");
    let out = apply(&exec, &patch).await;
    assert!(out.is_error && !out.may_change_files);
    assert_eq!(
        out.content,
        "the new content of the patch's files would be 35.0 MiB, over the 32.0 MiB that \
         apply_patch builds. Make smaller changes, or use bash in the sandbox (e.g. `sed -i`, \
         or a script). Nothing was changed."
    );
    assert!(!exec.path("new0.txt").exists());
}
