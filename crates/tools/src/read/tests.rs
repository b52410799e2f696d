//! The `read` tool against real files.

use serde_json::{Value, json};

use super::*;
use crate::test_exec::TestExec;

/// The tool as the model reaches it: through [`crate::call`] and its
/// schema check.
async fn call(input: &Value, exec: &TestExec) -> ToolOutput {
    crate::call("read", input, exec).await
}

fn numbered(lines: usize) -> String {
    (1..=lines).map(|i| format!("line {i}\n")).collect()
}

#[tokio::test]
async fn shows_numbered_lines_like_cat_n() {
    let exec = TestExec::new();
    std::fs::write(exec.path("f.txt"), "alpha\nbeta\n\ngamma").unwrap();
    let out = call(&json!({"path": "/work/f.txt"}), &exec).await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(
        out.content,
        "     1\talpha\n     2\tbeta\n     3\t\n     4\tgamma\n"
    );
    assert_eq!(
        out.details,
        json!({"path": "/work/f.txt", "lines_shown": 4, "total_lines": 4})
    );
    assert!(!out.may_change_files);
}

#[tokio::test]
async fn default_limit_pages_and_says_where_to_continue() {
    let exec = TestExec::new();
    std::fs::write(exec.path("big.txt"), numbered(5000)).unwrap();
    let out = call(&json!({"path": "big.txt"}), &exec).await;
    assert!(out.content.starts_with("     1\tline 1\n"));
    assert!(out.content.contains("  2000\tline 2000\n"));
    assert!(!out.content.contains("line 2001"));
    assert!(
        out.content
            .ends_with("(file has 5000 lines; showing 1-2000; use offset=2001 to continue)"),
        "{}",
        &out.content[out.content.len() - 200..]
    );
    assert_eq!(out.details["lines_shown"], json!(2000));
    assert_eq!(out.details["total_lines"], json!(5000));
}

#[tokio::test]
async fn offset_and_limit_select_lines() {
    let exec = TestExec::new();
    std::fs::write(exec.path("f.txt"), numbered(10)).unwrap();
    let out = call(&json!({"path": "f.txt", "offset": 4, "limit": 2}), &exec).await;
    assert_eq!(
        out.content,
        "     4\tline 4\n     5\tline 5\n\n(file has 10 lines; showing 4-5; use offset=6 to continue)"
    );
    let out = call(&json!({"path": "f.txt", "offset": 9}), &exec).await;
    assert_eq!(out.content, "     9\tline 9\n    10\tline 10\n");
    let out = call(&json!({"path": "f.txt", "offset": 11}), &exec).await;
    assert!(out.is_error);
    assert_eq!(
        out.content,
        "offset 11 is past the end of /work/f.txt, which has 10 lines"
    );
    let out = call(&json!({"path": "f.txt", "offset": "2", "limit": 0}), &exec).await;
    assert!(out.is_error);
    assert_eq!(
        out.content,
        "invalid input for read: field \"limit\" must be at least 1, got 0; \
         field \"offset\" must be an integer, got a string"
    );
}

#[tokio::test]
async fn long_lines_are_cut_with_a_marker() {
    let exec = TestExec::new();
    let long = "é".repeat(2500);
    std::fs::write(exec.path("f.txt"), format!("{long}\nshort\n")).unwrap();
    let out = call(&json!({"path": "f.txt"}), &exec).await;
    let first = out.content.lines().next().unwrap();
    assert_eq!(
        first,
        format!("     1\t{}… [line cut: 500 more chars]", "é".repeat(2000))
    );
    assert!(out.content.contains("     2\tshort\n"));
}

#[tokio::test]
async fn a_page_stops_before_the_output_limit_and_says_where_to_continue() {
    let exec = TestExec::new();
    let line = "x".repeat(1000);
    std::fs::write(exec.path("f.txt"), format!("{line}\n").repeat(200)).unwrap();
    let out = call(&json!({"path": "f.txt"}), &exec).await;
    // 49 numbered lines of 1008 characters fit in 50 000.
    let (page, note) = out.content.rsplit_once('\n').unwrap();
    assert!(page.chars().count() <= crate::OutputLimits::default().read);
    assert!(page.starts_with("     1\t"));
    assert!(page.ends_with(&format!("    49\t{line}\n")));
    assert_eq!(
        note,
        "(file has 200 lines; showing 1-49; use offset=50 to continue)"
    );
    assert_eq!(out.details["lines_shown"], json!(49));
    assert_eq!(out.stdout, page.as_bytes());
}

#[tokio::test]
async fn a_big_file_is_paged_without_counting_its_lines() {
    let exec = TestExec::new();
    let mut text = numbered(2_000_000);
    text.push_str(&"y".repeat(3_000_000));
    std::fs::write(exec.path("big.txt"), &text).unwrap();
    let out = call(
        &json!({"path": "big.txt", "offset": 1_999_999, "limit": 5}),
        &exec,
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    let size = crate::bounds::size(text.len() as u64);
    assert_eq!(
        out.content,
        format!(
            "1999999\tline 1999999\n2000000\tline 2000000\n2000001\t{}… [line cut: \
             2998000 more chars]\n",
            "y".repeat(2000)
        )
    );
    assert_eq!(out.details["total_lines"], json!(2_000_001));

    let out = call(&json!({"path": "big.txt", "limit": 3}), &exec).await;
    assert!(
        out.content.ends_with(&format!(
            "(file is {size}, too big to count its lines; showing 1-3; use offset=4 to continue)"
        )),
        "{}",
        out.content
    );
    assert_eq!(out.details["total_lines"], Value::Null);
}

#[tokio::test]
async fn directories_missing_binary_and_empty_files() {
    let exec = TestExec::new();
    std::fs::create_dir(exec.path("dir")).unwrap();
    let out = call(&json!({"path": "dir"}), &exec).await;
    assert!(
        out.is_error && out.content.contains("/work/dir is a directory"),
        "{}",
        out.content
    );

    let out = call(&json!({"path": "nope.txt"}), &exec).await;
    assert!(
        out.is_error && out.content.contains("/work/nope.txt does not exist"),
        "{}",
        out.content
    );

    let mut binary = b"ELF header".to_vec();
    binary.push(0);
    binary.extend_from_slice(b"more");
    std::fs::write(exec.path("bin"), binary).unwrap();
    let out = call(&json!({"path": "bin"}), &exec).await;
    assert!(
        out.is_error && out.content.contains("binary file"),
        "{}",
        out.content
    );

    std::fs::write(exec.path("empty"), "").unwrap();
    let out = call(&json!({"path": "empty"}), &exec).await;
    assert!(!out.is_error);
    assert_eq!(out.content, "(/work/empty is empty)");
    assert_eq!(out.details["total_lines"], json!(0));
}

#[tokio::test]
async fn a_nul_after_the_first_8_kib_is_still_text() {
    let exec = TestExec::new();
    let mut bytes = vec![b'a'; BINARY_SNIFF];
    bytes.push(0);
    std::fs::write(exec.path("late-nul"), bytes).unwrap();
    let out = call(&json!({"path": "late-nul"}), &exec).await;
    assert!(!out.is_error, "{}", out.content);
}

#[tokio::test]
async fn symlinks_outside_are_refused_inside_followed() {
    let exec = TestExec::new();
    std::os::unix::fs::symlink("/etc/passwd", exec.path("passwd")).unwrap();
    let out = call(&json!({"path": "passwd"}), &exec).await;
    assert!(
        out.is_error && out.content.contains("outside /work"),
        "{}",
        out.content
    );
    assert!(!out.content.contains("root:"));

    std::fs::write(exec.path("real.txt"), "inside\n").unwrap();
    std::os::unix::fs::symlink("real.txt", exec.path("alias.txt")).unwrap();
    let out = call(&json!({"path": "alias.txt"}), &exec).await;
    assert_eq!(out.content, "     1\tinside\n");
    assert_eq!(out.details["path"], json!("/work/real.txt"));
}

#[tokio::test]
async fn a_fifo_is_refused_without_blocking() {
    let exec = TestExec::new();
    let fifo = exec.path("pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        call(&json!({"path": "pipe"}), &exec),
    )
    .await
    .expect("read blocked on a FIFO");
    assert!(
        out.is_error && out.content.contains("not a regular file"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn read_file_never_follows_a_symlink_swapped_in_after_resolve() {
    // `rel` as `resolve` computed it before the swap: the open refuses the link.
    let exec = TestExec::new();
    let secret = exec.outside("secret");
    std::fs::write(&secret, "secret").unwrap();
    std::os::unix::fs::symlink(&secret, exec.path("swapped")).unwrap();
    let raced = Resolved {
        host: exec.path("swapped"),
        rel: "swapped".to_string(),
    };
    let err = read_file(exec.root(), &raced, false, "read")
        .await
        .unwrap_err();
    assert!(
        err.starts_with(
            "/work/swapped changed while it was being opened: a folder or file in \
             its path was replaced (e.g. by a symlink) after the path was checked; nothing was \
             read. Try again."
        ),
        "{err}"
    );
}

#[tokio::test]
async fn a_small_output_limit_shortens_the_page_and_stdout_keeps_what_was_shown() {
    let limits = crate::OutputLimits {
        read: 500,
        ..crate::OutputLimits::default()
    };
    let exec = TestExec::new().with_limits(limits);
    std::fs::write(exec.path("f.txt"), numbered(100)).unwrap();
    let out = call(&json!({"path": "f.txt", "limit": 50}), &exec).await;
    // 9 lines of 14 characters and 24 of 15 make 486; one more would pass 500.
    let page: String = (1..=33).map(|i| format!("{i:>6}\tline {i}\n")).collect();
    assert_eq!(String::from_utf8(out.stdout).unwrap(), page);
    assert_eq!(
        out.content,
        format!("{page}\n(file has 100 lines; showing 1-33; use offset=34 to continue)")
    );

    // A page within the cap is what the model sees, whole.
    let out = call(&json!({"path": "f.txt", "offset": 99}), &exec).await;
    assert_eq!(out.content, "    99\tline 99\n   100\tline 100\n");
    assert_eq!(out.stdout, out.content.as_bytes());
}

#[tokio::test]
async fn a_first_line_longer_than_the_output_limit_is_cut_head_and_tail() {
    let limits = crate::OutputLimits {
        read: 500,
        ..crate::OutputLimits::default()
    };
    let exec = TestExec::new()
        .with_limits(limits)
        .with_full_output("/runs/r1/steps/step-4.out");
    std::fs::write(exec.path("f.txt"), format!("{}\nshort\n", "z".repeat(1500))).unwrap();
    let out = call(&json!({"path": "f.txt"}), &exec).await;
    assert!(out.content.starts_with("     1\tzzz"), "{}", out.content);
    assert!(
        out.content.contains(
            "[output cut; the whole output is kept in the run's step file \
             (/runs/r1/steps/step-4.out); read fewer lines at a time (offset and limit) to see \
             the rest]\n(file has 2 lines; showing 1-1; use offset=2 to continue)"
        ),
        "{}",
        out.content
    );
}
