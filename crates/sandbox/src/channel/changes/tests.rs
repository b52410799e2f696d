use super::*;

/// The entries of one scan, each file with its bytes.
fn scan(index: &mut Index) -> Vec<(Entry, Vec<u8>)> {
    let mut frames = Vec::new();
    let sent = index
        .scan(&mut |frame| {
            frames.push(frame);
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut out: Vec<(Entry, Vec<u8>)> = Vec::new();
    for frame in frames {
        match frame {
            Frame::Entry(entry) => out.push((entry, Vec::new())),
            Frame::Data(bytes) => out
                .last_mut()
                .unwrap_or_else(|| panic!("data before an entry"))
                .1
                .extend(bytes),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(sent as usize, out.len());
    out
}

fn names(entries: &[(Entry, Vec<u8>)]) -> Vec<(String, EntryKind)> {
    entries
        .iter()
        .map(|(e, _)| (String::from_utf8_lossy(&e.path).into_owned(), e.kind))
        .collect()
}

#[test]
fn a_scan_reports_what_changed_once_deletions_first() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let root = dir.path();
    fs::create_dir_all(root.join("a/b")).unwrap_or_else(|e| panic!("{e}"));
    fs::write(root.join("a/b/keep"), "k").unwrap_or_else(|e| panic!("{e}"));
    fs::write(root.join("a/old"), "o").unwrap_or_else(|e| panic!("{e}"));
    fs::create_dir(root.join("gone")).unwrap_or_else(|e| panic!("{e}"));
    fs::write(root.join("gone/x"), "x").unwrap_or_else(|e| panic!("{e}"));
    let mut index = Index::take(root).unwrap_or_else(|e| panic!("{e}"));
    assert!(scan(&mut index).is_empty(), "nothing changed yet");

    fs::remove_dir_all(root.join("gone")).unwrap_or_else(|e| panic!("{e}"));
    fs::rename(root.join("a/old"), root.join("a/new")).unwrap_or_else(|e| panic!("{e}"));
    fs::write(root.join("big"), vec![7u8; 100_000]).unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::symlink("a/new", root.join("link")).unwrap_or_else(|e| panic!("{e}"));
    fs::set_permissions(root.join("a/b/keep"), Permissions::from_mode(0o755))
        .unwrap_or_else(|e| panic!("{e}"));
    let found = scan(&mut index);
    assert_eq!(
        names(&found),
        [
            ("a/old".to_string(), EntryKind::Gone),
            ("gone".to_string(), EntryKind::Gone),
            ("a/b/keep".to_string(), EntryKind::File),
            ("a/new".to_string(), EntryKind::File),
            ("big".to_string(), EntryKind::File),
            ("link".to_string(), EntryKind::Link),
        ]
    );
    assert_eq!(found[2].0.mode, 0o755);
    assert_eq!(found[3].1, b"o");
    assert_eq!(found[4].1, vec![7u8; 100_000]);
    assert_eq!(found[5].0.target, b"a/new");
    assert!(scan(&mut index).is_empty(), "reported once");
}

#[test]
fn an_unreadable_file_of_its_own_is_still_read() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut index = Index::take(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    let file = dir.path().join("secret");
    fs::write(&file, "inside").unwrap_or_else(|e| panic!("{e}"));
    fs::set_permissions(&file, Permissions::from_mode(0o000)).unwrap_or_else(|e| panic!("{e}"));
    let found = scan(&mut index);
    assert_eq!(found[0].1, b"inside");
    assert_eq!(found[0].0.mode, 0);
    let mode = fs::symlink_metadata(&file).map(|m| m.mode() & 0o7777);
    assert_eq!(mode.ok(), Some(0), "its mode is put back");
}

#[test]
fn the_hosts_puts_are_written_and_not_reported_back() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let root = dir.path();
    fs::write(root.join("was-a-file"), "f").unwrap_or_else(|e| panic!("{e}"));
    fs::create_dir_all(root.join("tree/deep")).unwrap_or_else(|e| panic!("{e}"));
    fs::write(root.join("tree/deep/x"), "x").unwrap_or_else(|e| panic!("{e}"));
    let mut index = Index::take(root).unwrap_or_else(|e| panic!("{e}"));
    let mut chunks = vec![b"lo".to_vec(), b"hel".to_vec()];
    let mut data = || Ok(chunks.pop().unwrap_or_default());
    let puts = [
        entry(b"new/dir/file", EntryKind::File, 0o640, 5, Vec::new()),
        entry(b"was-a-file", EntryKind::Dir, 0o700, 0, Vec::new()),
        entry(b"tree", EntryKind::Gone, 0, 0, Vec::new()),
        entry(b"ln", EntryKind::Link, 0o777, 0, b"../outside".to_vec()),
    ];
    for put in &puts {
        let done = index.put(put, &mut data).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(done, Ok(()));
    }
    assert_eq!(
        fs::read(root.join("new/dir/file")).ok().as_deref(),
        Some(&b"hello"[..])
    );
    assert!(root.join("was-a-file").is_dir());
    assert!(!root.join("tree").exists());
    assert_eq!(
        fs::read_link(root.join("ln")).ok(),
        Some(PathBuf::from("../outside"))
    );
    assert!(
        scan(&mut index).is_empty(),
        "{:?}",
        names(&scan(&mut index))
    );
}
