use std::fs::Permissions;
use std::os::unix::fs::PermissionsExt;

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

/// Takes two pictures of `root`: one that watches, one that walks at every
/// scan (the oracle).
fn both(root: &Path) -> (Index, Index) {
    let watching = Index::take(root).unwrap_or_else(|e| panic!("{e}"));
    assert!(watching.watch.is_some(), "inotify works on this host");
    let mut walking = Index::take(root).unwrap_or_else(|e| panic!("{e}"));
    walking.watch = None;
    (watching, walking)
}

fn must(result: io::Result<()>) {
    result.unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn a_watching_scan_does_not_walk() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let root = dir.path();
    must(fs::create_dir(root.join("d")));
    must(fs::write(root.join("d/f"), "1"));
    let mut index = Index::take(root).unwrap_or_else(|e| panic!("{e}"));
    // A path only a walk would find gone.
    let phantom = index.entries.get(b"d/f".as_slice()).copied();
    index.entries.insert(
        b"phantom".to_vec(),
        phantom.unwrap_or_else(|| panic!("d/f")),
    );
    must(fs::write(root.join("d/f"), "2"));
    assert_eq!(
        names(&scan(&mut index)),
        [("d/f".to_string(), EntryKind::File)]
    );
    // The kernel's queue overflowing (16,384 events by default; events
    // alike in a row count once) makes the next scan walk.
    let queue = fs::read_to_string("/proc/sys/fs/inotify/max_queued_events");
    let queue: usize = queue
        .ok()
        .and_then(|q| q.trim().parse().ok())
        .unwrap_or(16_384);
    for i in 0..=queue / 2 + 1 {
        must(fs::set_permissions(
            root.join("d/f"),
            Permissions::from_mode(0o600 + (i as u32 % 2) * 0o100),
        ));
        must(fs::set_permissions(
            root.join("d"),
            Permissions::from_mode(0o700 + (i as u32 % 2) * 0o50),
        ));
    }
    must(fs::set_permissions(
        root.join("d/f"),
        Permissions::from_mode(0o644),
    ));
    must(fs::set_permissions(
        root.join("d"),
        Permissions::from_mode(0o755),
    ));
    assert_eq!(
        names(&scan(&mut index)),
        [
            ("phantom".to_string(), EntryKind::Gone),
            ("d/f".to_string(), EntryKind::File)
        ]
    );
}

#[test]
fn a_change_through_another_name_of_a_file_is_seen() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let root = dir.path();
    must(fs::create_dir(root.join("x")));
    must(fs::write(root.join("a"), "one"));
    let (mut index, _) = both(root);
    must(fs::hard_link(root.join("a"), root.join("x/b")));
    let found = names(&scan(&mut index));
    assert!(
        found.contains(&("x/b".to_string(), EntryKind::File)),
        "{found:?}"
    );
    must(fs::write(root.join("x/b"), "two"));
    let found = scan(&mut index);
    assert_eq!(
        names(&found),
        [
            ("a".to_string(), EntryKind::File),
            ("x/b".to_string(), EntryKind::File)
        ]
    );
    assert_eq!(found[0].1, b"two");
    must(fs::set_permissions(
        root.join("a"),
        Permissions::from_mode(0o600),
    ));
    let found = scan(&mut index);
    assert_eq!(
        found.iter().map(|(e, _)| e.mode).collect::<Vec<_>>(),
        [0o600, 0o600]
    );
}

#[test]
fn a_folder_the_host_made_is_watched() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let root = dir.path();
    let mut index = Index::take(root).unwrap_or_else(|e| panic!("{e}"));
    let mut data = || Ok(b"h".to_vec());
    let put = entry(b"new/deep/file", EntryKind::File, 0o644, 1, Vec::new());
    assert_eq!(index.put(&put, &mut data).ok(), Some(Ok(())));
    assert!(scan(&mut index).is_empty());
    must(fs::write(root.join("new/other"), "o"));
    must(fs::write(root.join("new/deep/more"), "m"));
    assert_eq!(
        names(&scan(&mut index)),
        [
            ("new/deep/more".to_string(), EntryKind::File),
            ("new/other".to_string(), EntryKind::File)
        ]
    );
}

/// A small generator of the same steps at every run.
struct Steps(u64);

impl Steps {
    fn next(&mut self, below: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % below
    }
}

/// One change of the kinds commands make, on paths drawn from a few names.
fn change(root: &Path, steps: &mut Steps) {
    const NAMES: [&str; 12] = [
        "a", "b", "a/c", "a/d", "b/c", "a/c/e", "a/c/f", "b/c/e", "g", "a-b", "a/d/h", "b/i",
    ];
    let path = root.join(NAMES[steps.next(NAMES.len())]);
    let other = root.join(NAMES[steps.next(NAMES.len())]);
    let kind = steps.next(10);
    if std::env::var_os("AH_TRACE_STEPS").is_some() {
        eprintln!("{kind} {} {}", path.display(), other.display());
    }
    let _ = match kind {
        0 => fs::create_dir_all(&path),
        1 => fs::write(&path, format!("{}", steps.next(1000))),
        2 => fs::remove_dir_all(&path).or_else(|_| fs::remove_file(&path)),
        3 => fs::rename(&path, &other),
        4 => std::os::unix::fs::symlink("a", &path),
        5 => fs::hard_link(&path, &other),
        6 => fs::set_permissions(
            &path,
            Permissions::from_mode(0o700 + steps.next(0o77) as u32),
        ),
        7 => fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .and_then(|mut f| {
                use std::io::Write as _;
                f.write_all(b"+")
            }),
        8 => fs::create_dir_all(path.join("n/m")).and_then(|()| fs::write(path.join("n/m/z"), "z")),
        // A change through a second name that is gone again.
        _ => fs::hard_link(&path, root.join("second")).and_then(|()| {
            let other = root.join("second");
            let mut file = fs::OpenOptions::new().append(true).open(&other)?;
            std::io::Write::write_all(&mut file, b"!")?;
            fs::remove_file(&other)
        }),
    };
}

#[test]
fn a_watching_scan_reports_what_a_walking_one_does() {
    for seed in 0..60u64 {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let root = dir.path();
        must(fs::create_dir_all(root.join("a/c")));
        must(fs::write(root.join("a/c/e"), "e"));
        let (mut watching, mut walking) = both(root);
        let mut steps = Steps(seed);
        for round in 0..12 {
            for _ in 0..1 + steps.next(4) {
                change(root, &mut steps);
            }
            let (seen, truth) = (scan(&mut watching), scan(&mut walking));
            if std::env::var_os("AH_TRACE_STEPS").is_some() {
                eprintln!("-- scanned; {:?}", names(&truth));
            }
            let kinds = |index: &Index| -> Vec<(Vec<u8>, EntryKind, u32)> {
                index
                    .entries
                    .iter()
                    .map(|(p, m)| (p.clone(), m.kind, m.mode))
                    .collect()
            };
            assert_eq!(
                kinds(&watching),
                kinds(&walking),
                "seed {seed}, round {round}: the indexes"
            );
            assert_eq!(
                seen.iter()
                    .map(|(e, b)| (e.clone(), b.clone()))
                    .collect::<Vec<_>>(),
                truth,
                "seed {seed}, round {round}: {:?} against {:?}",
                names(&seen),
                names(&truth)
            );
        }
    }
}
