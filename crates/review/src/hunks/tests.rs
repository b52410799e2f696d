//! The hunk engine against real `git diff` output and real `git apply`:
//! what it cuts a patch into, the headers it writes (checked line by line
//! against the files, where `git apply` would forgive an offset), and that
//! the rest applies on top of the chosen with a 3-way merge.

use std::fs;
use std::path::{Path, PathBuf};

mod hostile;

use super::*;
use ah_record::patch::{FileStat, PatchInfo};

/// Runs git in `dir` with no user configuration; its stdout, untrimmed.
pub(super) use ah_record::testing::git_raw as git;

/// A committed repo of `before`, changed by `change`, and the patch of
/// that change as a run saves it (`git diff --binary --full-index`, and
/// `extra` arguments); the repo is back at `before`.
struct Repo {
    dir: tempfile::TempDir,
}

impl Repo {
    fn new(before: &[(&str, &[u8])]) -> Repo {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repo { dir };
        git(repo.work(), &["init", "-q"]);
        for (name, content) in before {
            repo.put(name, content);
        }
        git(repo.work(), &["add", "-A"]);
        git(repo.work(), &["commit", "-qm", "before"]);
        repo
    }

    fn work(&self) -> &Path {
        self.dir.path()
    }

    fn put(&self, name: &str, content: &[u8]) {
        let path = self.work().join(name);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }

    fn read(&self, name: &str) -> Vec<u8> {
        fs::read(self.work().join(name)).unwrap()
    }

    /// Diffs the work tree after `change`, saves the patch beside the repo
    /// and puts the work tree back.
    fn diff(&self, extra: &[&str], change: impl FnOnce(&Path)) -> PathBuf {
        change(self.work());
        git(self.work(), &["add", "-A"]);
        let mut args = vec!["diff", "--cached", "--binary", "--full-index"];
        args.extend(extra);
        let patch = git(self.work(), &args);
        git(self.work(), &["reset", "-q", "--hard"]);
        git(self.work(), &["clean", "-qfd"]);
        let path = self.work().with_extension("patch");
        fs::write(&path, patch).unwrap();
        path
    }

    /// `git apply ARGS patch` in the repo.
    fn apply(&self, args: &[&str], patch: &Path) {
        let mut all = vec!["apply"];
        all.extend(args);
        all.push(patch.to_str().unwrap());
        git(self.work(), &all);
    }
}

/// A summary of `files` sections, as the patch builder would make it.
fn info(files: usize) -> PatchInfo {
    let mut info = PatchInfo::empty();
    info.files = (0..files)
        .map(|i| FileStat {
            path: format!("f{i}"),
            added: 0,
            removed: 0,
            binary: false,
            old_mode: 0,
            new_mode: 0,
            bytes: 0,
        })
        .collect();
    info
}

/// Writes the units `chosen` of the patch (every unit split as far as it
/// goes) to `chosen.patch` and `rest.patch` beside it.
pub(super) fn cut(
    patch: &Path,
    hunks: &PatchHunks,
    chosen: impl Fn(usize) -> bool,
) -> (PathBuf, PathBuf) {
    let mut selection = Selection::none(hunks);
    for (i, unit) in atoms(hunks).into_iter().enumerate() {
        if chosen(i) {
            selection.choose(hunks, unit).unwrap();
        }
    }
    let (chosen_path, rest_path) = (patch.with_extension("chosen"), patch.with_extension("rest"));
    let _ = fs::remove_file(&chosen_path);
    let _ = fs::remove_file(&rest_path);
    write(
        patch,
        &info(hunks.files()),
        hunks,
        &selection,
        &chosen_path,
        &rest_path,
    )
    .unwrap();
    (chosen_path, rest_path)
}

/// Every unit, split as far as it goes.
fn atoms(hunks: &PatchHunks) -> Vec<Unit> {
    hunks
        .units()
        .into_iter()
        .flat_map(|unit| hunks.split(unit).unwrap_or_else(|| vec![unit]))
        .collect()
}

/// The lines `l1`…`l40` (the original of the arithmetic tests).
fn original() -> Vec<String> {
    (1..=40).map(|i| format!("l{i}")).collect()
}

/// The changes of the arithmetic tests, by original line (1-based): each
/// replaces its line with its lines, or (`insert`) adds them after it.
/// A, B and C are one hunk of three pieces (one and two lines of context
/// between them); D and E are hunks of their own, E at the file's end.
const CHANGES: [(usize, &[&str], bool); 5] = [
    (3, &["A1", "A2"], false),
    (5, &[], false),
    (8, &["C"], false),
    (20, &["D"], true),
    (40, &["E1", "E2", "E3"], false),
];

/// The original with the changes `chosen` picks made.
fn changed(chosen: impl Fn(usize) -> bool) -> Vec<String> {
    let mut lines = Vec::new();
    for (i, line) in original().into_iter().enumerate() {
        match CHANGES.iter().position(|c| c.0 == i + 1) {
            Some(c) if chosen(c) => {
                let (_, new, insert) = CHANGES[c];
                if insert {
                    lines.push(line);
                }
                lines.extend(new.iter().map(|s| s.to_string()));
            }
            _ => lines.push(line),
        }
    }
    lines
}

fn text(lines: &[String]) -> Vec<u8> {
    lines
        .iter()
        .flat_map(|l| format!("{l}\n").into_bytes())
        .collect()
}

/// Checks every hunk of `patch` exactly where its header puts it: its old
/// lines (context and `-`) in `old`, its new lines in `new`.
fn check_headers(patch: &Path, old: &[String], new: &[String]) {
    let text = String::from_utf8(fs::read(patch).unwrap()).unwrap();
    let mut hunks = text.split("\n@@ -").skip(1).peekable();
    assert!(hunks.peek().is_some(), "no hunk in {text}");
    for hunk in hunks {
        let (header, body) = hunk.split_once(" @@").unwrap();
        let (o, n) = header.split_once(" +").unwrap();
        let range = |r: &str| -> (usize, usize) {
            let (s, l) = r.split_once(',').unwrap_or((r, "1"));
            let (s, l) = (s.parse::<usize>().unwrap(), l.parse().unwrap());
            (if l == 0 { s } else { s - 1 }, l)
        };
        let ((ob, ol), (nb, nl)) = (range(o), range(n));
        let lines: Vec<&str> = body
            .lines()
            .skip(1)
            .take_while(|l| !l.starts_with("diff"))
            .collect();
        let side = |keep: char| -> Vec<String> {
            let kept = lines
                .iter()
                .filter(|l| l.starts_with(' ') || l.starts_with(keep));
            kept.map(|l| l[1..].to_string()).collect()
        };
        assert_eq!(side('-'), old[ob..ob + ol], "old side of @@ -{header}");
        assert_eq!(side('+'), new[nb..nb + nl], "new side of @@ -{header}");
    }
}

#[test]
fn a_text_file_cuts_into_hunks_and_a_hunk_splits_at_its_context() {
    let repo = Repo::new(&[("t.txt", &text(&original()))]);
    let patch = repo.diff(&[], |w| {
        fs::write(w.join("t.txt"), text(&changed(|_| true))).unwrap()
    });
    let hunks = PatchHunks::read(&patch).unwrap();
    let units = hunks.units();
    assert_eq!(units.len(), 3, "{hunks:?}");
    assert_eq!(hunks.header(units[0]).unwrap(), "@@ -1,11 +1,11 @@");
    assert_eq!(hunks.counts(units[0]).unwrap(), (3, 3));
    let pieces = hunks.split(units[0]).unwrap();
    let headers: Vec<_> = pieces.iter().map(|&p| hunks.header(p).unwrap()).collect();
    // Each piece keeps the context it shares with its neighbours.
    assert_eq!(
        headers,
        ["@@ -1,4 +1,5 @@", "@@ -4,4 +5,3 @@", "@@ -6,6 +6,6 @@"]
    );
    let (lines, cut) = hunks.lines(&patch, pieces[1]).unwrap();
    assert_eq!(
        (String::from_utf8(lines).unwrap(), cut),
        (" l4\n-l5\n l6\n l7\n".into(), false)
    );
    assert_eq!(
        hunks.split(units[1]),
        None,
        "one change group: nothing to split"
    );
    assert_eq!(hunks.split(pieces[0]), None);
    assert!(hunks.whole(0).is_none());
}

#[test]
fn every_choice_of_hunks_and_pieces_gives_exact_headers_and_the_rest_completes_it() {
    let repo = Repo::new(&[("t.txt", &text(&original()))]);
    let all = changed(|_| true);
    let patch = repo.diff(&[], |w| fs::write(w.join("t.txt"), text(&all)).unwrap());
    let hunks = PatchHunks::read(&patch).unwrap();
    assert_eq!(atoms(&hunks).len(), CHANGES.len());
    for mask in 0..1u32 << CHANGES.len() {
        let picked = |i: usize| mask & (1 << i) != 0;
        let (chosen, rest) = cut(&patch, &hunks, picked);
        let middle = changed(picked);
        if mask != 0 {
            check_headers(&chosen, &original(), &middle);
            repo.apply(&[], &chosen);
        }
        assert_eq!(repo.read("t.txt"), text(&middle), "chosen {mask:05b}");
        if mask != (1 << CHANGES.len()) - 1 {
            check_headers(&rest, &middle, &all);
            repo.apply(&[], &rest);
        }
        assert_eq!(repo.read("t.txt"), text(&all), "rest on top, {mask:05b}");
        git(repo.work(), &["checkout", "-q", "--", "."]);
    }
}

#[test]
fn the_rest_merges_three_way_on_top_of_the_chosen_after_the_user_moved_on() {
    let repo = Repo::new(&[("t.txt", &text(&original()))]);
    let all = changed(|_| true);
    let patch = repo.diff(&[], |w| fs::write(w.join("t.txt"), text(&all)).unwrap());
    let hunks = PatchHunks::read(&patch).unwrap();
    // A and C chosen, B (between them, one line of context away) and D not; E chosen.
    let picked = |i: usize| [0, 2, 4].contains(&i);
    let (chosen, rest) = cut(&patch, &hunks, picked);
    // Both keep the original's preimage id, which the 3-way apply reads.
    let index = |path: &Path| -> String {
        let text = fs::read_to_string(path).unwrap();
        text.lines()
            .find(|l| l.starts_with("index "))
            .unwrap()
            .to_string()
    };
    assert_eq!(index(&chosen), index(&patch));
    assert_eq!(index(&rest), index(&patch));
    repo.apply(&["--index", "--3way"], &chosen);
    git(repo.work(), &["commit", "-qm", "chosen"]);
    // The user edits a line a rest hunk keeps as context, and another one.
    let mut moved = changed(picked);
    for line in &mut moved {
        if line == "l7" || line == "l30" {
            line.push_str(" (user)");
        }
    }
    fs::write(repo.work().join("t.txt"), text(&moved)).unwrap();
    git(repo.work(), &["commit", "-qam", "the user's"]);
    repo.apply(&["--index", "--3way"], &rest);
    let mut expected = all.clone();
    for line in &mut expected {
        if line == "l7" || line == "l30" {
            line.push_str(" (user)");
        }
    }
    assert_eq!(repo.read("t.txt"), text(&expected));
}

#[test]
fn sections_that_are_one_unit_are_described_and_copied_whole() {
    let binary: Vec<u8> = (0..300u32).map(|i| (i * 7) as u8).collect();
    let long: String = (1..=20).map(|i| format!("line {i}\n")).collect();
    let repo = Repo::new(&[
        ("bin.dat", &binary),
        ("gone.txt", b"bye\n"),
        ("old name.txt", long.as_bytes()),
        ("run.sh", b"echo hi\n"),
        ("t.txt", b"one\n"),
    ]);
    std::os::unix::fs::symlink("t.txt", repo.work().join("link")).unwrap();
    git(repo.work(), &["add", "-A"]);
    git(repo.work(), &["commit", "-qm", "link"]);
    let patch = repo.diff(&["-M"], |w| {
        use std::os::unix::fs::PermissionsExt;
        fs::write(w.join("bin.dat"), [&binary[..], &[0, 1, 2]].concat()).unwrap();
        fs::remove_file(w.join("gone.txt")).unwrap();
        fs::rename(w.join("old name.txt"), w.join("new\nname\u{202E}.txt")).unwrap();
        fs::set_permissions(w.join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
        fs::remove_file(w.join("link")).unwrap();
        std::os::unix::fs::symlink("elsewhere", w.join("link")).unwrap();
        fs::write(w.join("made.txt"), "a\nb\n").unwrap();
        fs::write(w.join("t.txt"), "two\n").unwrap();
    });
    let hunks = PatchHunks::read(&patch).unwrap();
    let described: Vec<String> = hunks
        .units()
        .into_iter()
        .map(|unit| hunks.header(unit).unwrap())
        .collect();
    assert_eq!(
        described,
        [
            "binary file changed",
            "deleted file (+0 −1)",
            "symlink changed (+1 −1)",
            "new file (+2 −0)",
            "rename old name.txt → new\\nname<U+202E>.txt",
            "mode 100644 → 100755",
            "@@ -1 +1 @@",
        ]
    );
    // Every whole unit but the binary one chosen: each side applies, and
    // both together give the model's version.
    let (chosen, rest) = cut(&patch, &hunks, |i| i != 0 && i != 6);
    repo.apply(&["--index"], &chosen);
    assert_eq!(repo.read("bin.dat"), binary, "not chosen");
    assert_eq!(repo.read("made.txt"), b"a\nb\n");
    assert_eq!(repo.read("t.txt"), b"one\n");
    repo.apply(&["--index", "--3way"], &rest);
    assert_eq!(repo.read("bin.dat"), [&binary[..], &[0, 1, 2]].concat());
    assert_eq!(repo.read("t.txt"), b"two\n");
    assert_eq!(
        fs::read_link(repo.work().join("link")).unwrap(),
        Path::new("elsewhere")
    );
    assert!(!repo.work().join("gone.txt").exists());
}

#[test]
fn files_without_a_final_newline_split_and_apply() {
    let repo = Repo::new(&[("t.txt", b"a\nb\nc\nd\ne")]);
    let patch = repo.diff(&[], |w| {
        fs::write(w.join("t.txt"), "A\nb\nc\nd\nE\nf").unwrap()
    });
    let hunks = PatchHunks::read(&patch).unwrap();
    let units = hunks.units();
    assert_eq!(units.len(), 1);
    assert_eq!(hunks.split(units[0]).unwrap().len(), 2);
    for (mask, middle) in [(1, "A\nb\nc\nd\ne"), (2, "a\nb\nc\nd\nE\nf")] {
        let (chosen, rest) = cut(&patch, &hunks, |i| mask & (1 << i) != 0);
        repo.apply(&[], &chosen);
        assert_eq!(repo.read("t.txt"), middle.as_bytes());
        repo.apply(&[], &rest);
        assert_eq!(repo.read("t.txt"), b"A\nb\nc\nd\nE\nf");
        git(repo.work(), &["checkout", "-q", "--", "."]);
    }
}
