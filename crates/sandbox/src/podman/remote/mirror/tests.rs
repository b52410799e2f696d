use super::*;

fn entry(path: &[u8], kind: EntryKind, size: u64, target: &[u8]) -> Entry {
    Entry {
        path: path.to_vec(),
        kind,
        mode: 0o644,
        size,
        target: target.to_vec(),
    }
}

#[test]
fn entries_are_written_without_following_what_the_sandbox_made() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let outside = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let root = dir.path();
    // A link the sandbox made, pointing out of the mirror.
    std::os::unix::fs::symlink(outside.path(), root.join("escape"))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut mirror = Mirror::new(root);
    mirror
        .entry(&entry(b"escape/planted", EntryKind::File, 3, b""))
        .unwrap_or_else(|e| panic!("{e}"));
    mirror.data(b"bad").unwrap_or_else(|e| panic!("{e}"));
    assert!(
        std::fs::read_dir(outside.path()).map(|d| d.count()).ok() == Some(0),
        "nothing written through the link"
    );
    assert_eq!(
        std::fs::read(root.join("escape/planted")).ok().as_deref(),
        Some(&b"bad"[..]),
        "the link was replaced by a folder of the mirror"
    );
    mirror
        .entry(&entry(b"l", EntryKind::Link, 0, b"/etc/passwd"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        std::fs::read_link(root.join("l")).ok(),
        Some(PathBuf::from("/etc/passwd")),
        "a link is made, never followed"
    );
    mirror
        .entry(&entry(b"escape", EntryKind::Gone, 0, b""))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!root.join("escape").exists());
    assert_eq!(mirror.touched, ["escape/planted", "l", "escape"]);
}

#[test]
fn paths_that_are_not_plain_and_relative_are_refused() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut mirror = Mirror::new(dir.path());
    for bad in [
        &b"../x"[..],
        b"/etc/passwd",
        b"a//b",
        b"a/./b",
        b"",
        b"a/\0b",
        b"a/..",
    ] {
        let refused = mirror.entry(&entry(bad, EntryKind::File, 0, b""));
        assert!(refused.is_err(), "{bad:?}");
    }
    assert!(mirror.data(b"x").is_err(), "bytes with no file");
}

#[test]
fn the_hosts_view_is_read_back_as_puts_a_folder_whole() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let root = dir.path();
    std::fs::create_dir_all(root.join("d/e")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(root.join("d/e/f"), "deep").unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::symlink("d", root.join("ln")).unwrap_or_else(|e| panic!("{e}"));
    let puts = read_puts(
        root,
        &["d".to_string(), "ln".to_string(), "missing/x".to_string()],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let seen: Vec<(String, EntryKind, Vec<u8>)> = puts
        .iter()
        .map(|(e, bytes)| {
            (
                String::from_utf8_lossy(&e.path).into_owned(),
                e.kind,
                bytes.clone(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("d".to_string(), EntryKind::Dir, Vec::new()),
            ("d/e".to_string(), EntryKind::Dir, Vec::new()),
            ("d/e/f".to_string(), EntryKind::File, b"deep".to_vec()),
            ("ln".to_string(), EntryKind::Link, Vec::new()),
            ("missing/x".to_string(), EntryKind::Gone, Vec::new()),
        ]
    );
    assert_eq!(puts[3].0.target, b"d");
}
