//! Where symlinks may point: real links, committed in a real shadow repo,
//! and checked as committed.

use std::os::unix::fs::symlink;
use std::path::Path;

use super::*;
use crate::shadow::ShadowRepo;

fn change(path: &str, kind: ChangeKind, symlink: bool) -> Change {
    Change {
        path: path.to_string(),
        kind,
        symlink,
    }
}

/// Commits the work tree at `work` in a fresh shadow repo, then runs
/// `after_commit` (to change the disk behind the commit's back), then checks
/// `changes` against the commit's links.
fn check_committed(work: &Path, changes: &[Change], after_commit: impl FnOnce()) -> Vec<Violation> {
    let git = tempfile::tempdir().unwrap();
    let repo = ShadowRepo::init(&git.path().join("shadow.git"), work).unwrap();
    let commit = repo.baseline().unwrap();
    after_commit();
    let links = repo.committed_links(commit).unwrap();
    defaults().check_changes(work, changes, &|path| links.target(path))
}

fn check_links(work: &Path, links: &[&str]) -> Vec<Violation> {
    let changes: Vec<Change> = links
        .iter()
        .map(|path| change(path, ChangeKind::Added, true))
        .collect();
    check_committed(work, &changes, || {})
}

/// Replaces the link at `path` with one to `target`.
fn relink(path: &Path, target: &str) {
    std::fs::remove_file(path).unwrap();
    symlink(target, path).unwrap();
}

#[test]
fn symlinks_must_stay_inside_the_work_root() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path();
    std::fs::create_dir_all(root.join("a/b")).unwrap();
    std::fs::write(root.join("a/file.txt"), "x").unwrap();
    symlink("/etc/passwd", root.join("passwd")).unwrap();
    symlink("../../../outside", root.join("a/b/escape")).unwrap();
    symlink("../file.txt", root.join("a/b/inside")).unwrap();
    symlink("/work/a/file.txt", root.join("container_abs")).unwrap();
    symlink(root.join("a/file.txt"), root.join("host_abs")).unwrap();
    symlink("/work/../etc", root.join("sneaky_abs")).unwrap();
    symlink("not/there/yet", root.join("dangling")).unwrap();

    let violations = check_links(
        root,
        &[
            "passwd",
            "a/b/escape",
            "a/b/inside",
            "container_abs",
            "host_abs",
            "sneaky_abs",
            "dangling",
        ],
    );
    let outside: Vec<(&str, String)> = violations
        .iter()
        .map(|v| (v.path.as_str(), v.to_string()))
        .collect();
    assert_eq!(
        outside,
        vec![
            (
                "passwd",
                r#""passwd" is a symlink to "/etc/passwd", outside /work"#.to_string()
            ),
            (
                "a/b/escape",
                r#""a/b/escape" is a symlink to "../../../outside", outside /work"#.to_string()
            ),
            (
                "sneaky_abs",
                r#""sneaky_abs" is a symlink to "/work/../etc", outside /work"#.to_string()
            ),
        ]
    );
}

#[test]
fn symlink_chains_are_followed_inside_but_never_out() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path();
    std::fs::create_dir_all(root.join("d")).unwrap();
    std::fs::write(root.join("d/real.txt"), "x").unwrap();
    // good -> hop1 -> d/hop2 -> real.txt: all inside.
    symlink("d/hop2", root.join("hop1")).unwrap();
    symlink("real.txt", root.join("d/hop2")).unwrap();
    symlink("hop1", root.join("good")).unwrap();
    // bad -> up -> ..: the second hop leaves.
    symlink("..", root.join("up")).unwrap();
    symlink("up/etc/passwd", root.join("bad")).unwrap();
    // via a linked folder: etcdir -> /etc, sneaky -> etcdir/passwd.
    symlink("/etc", root.join("etcdir")).unwrap();
    symlink("etcdir/passwd", root.join("sneaky")).unwrap();
    // A loop.
    symlink("loop_b", root.join("loop_a")).unwrap();
    symlink("loop_a", root.join("loop_b")).unwrap();
    // Leads to a denied path inside the work root.
    symlink("sub/../.git/hooks", root.join("hooks")).unwrap();

    let violations = check_links(root, &["good", "bad", "sneaky", "loop_a", "hooks"]);
    let reasons: Vec<(&str, &Reason)> = violations
        .iter()
        .map(|v| (v.path.as_str(), &v.reason))
        .collect();
    assert_eq!(reasons.len(), 4, "{violations:?}");
    assert_eq!(
        reasons[0],
        (
            "bad",
            &Reason::SymlinkOutside {
                target: "up/etc/passwd".into()
            }
        )
    );
    assert_eq!(
        reasons[1],
        (
            "sneaky",
            &Reason::SymlinkOutside {
                target: "etcdir/passwd".into()
            }
        )
    );
    assert!(
        matches!(reasons[2], ("loop_a", Reason::SymlinkUnchecked { .. })),
        "{violations:?}"
    );
    assert_eq!(
        reasons[3],
        (
            "hooks",
            &Reason::SymlinkToDenied {
                target: "sub/../.git/hooks".into(),
                resolved: ".git/hooks".into(),
                rule: "**/.git/**".into(),
            }
        )
    );
}

#[test]
fn unflagged_links_are_still_checked_and_deletions_are_checked_too() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path();
    symlink("/etc/passwd", root.join("quiet")).unwrap();
    std::fs::write(root.join("plain.txt"), "x").unwrap();
    let changes = [
        change("quiet", ChangeKind::Modified, false),
        change("plain.txt", ChangeKind::Added, false),
        change(".git/config", ChangeKind::Deleted, false),
        change("gone.txt", ChangeKind::Deleted, true),
        change(".env", ChangeKind::Added, false),
    ];
    let violations = check_committed(root, &changes, || {});
    let paths: Vec<&str> = violations.iter().map(|v| v.path.as_str()).collect();
    assert_eq!(paths, vec!["quiet", ".git/config", ".env"]);
}

#[test]
fn a_flagged_link_that_cannot_be_read_fails_closed() {
    let work = tempfile::tempdir().unwrap();
    let violations = check_links(work.path(), &["vanished"]);
    assert_eq!(violations.len(), 1);
    assert!(matches!(
        violations[0].reason,
        Reason::SymlinkUnchecked { .. }
    ));
    // A link whose blob cannot be read fails closed too, flagged or not.
    let unreadable = |_: &Path| Err("blob missing".to_string());
    let changes = [change("plain.txt", ChangeKind::Added, false)];
    let violations = defaults().check_changes(work.path(), &changes, &unreadable);
    assert!(
        matches!(&violations[..], [Violation { reason: Reason::SymlinkUnchecked { detail, .. }, .. }] if detail == "blob missing"),
        "{violations:?}"
    );
}

#[test]
fn links_are_checked_as_committed_not_as_they_are_on_disk_later() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path();
    std::fs::write(root.join("ok.txt"), "x").unwrap();
    // Committed: a link to a denied path, and a chain whose middle link
    // leads to one.
    symlink(".env", root.join("direct")).unwrap();
    symlink("middle", root.join("chain")).unwrap();
    symlink(".git/config", root.join("middle")).unwrap();
    let changes = [
        change("direct", ChangeKind::Added, true),
        change("chain", ChangeKind::Added, true),
        change("middle", ChangeKind::Added, true),
    ];
    // A process still running flips every link to a harmless file before
    // the check.
    let violations = check_committed(root, &changes, || {
        for link in ["direct", "chain", "middle"] {
            relink(&root.join(link), "ok.txt");
        }
    });
    let resolved: Vec<(&str, Option<&str>)> = violations
        .iter()
        .map(|v| match &v.reason {
            Reason::SymlinkToDenied { resolved, .. } => (v.path.as_str(), Some(resolved.as_str())),
            _ => (v.path.as_str(), None),
        })
        .collect();
    assert_eq!(
        resolved,
        [
            ("direct", Some(".env")),
            ("chain", Some(".git/config")),
            ("middle", Some(".git/config")),
        ]
    );
    // And the other way: committed harmless, flipped to denied on disk, passes.
    let work = tempfile::tempdir().unwrap();
    let root = work.path();
    std::fs::write(root.join("ok.txt"), "x").unwrap();
    symlink("ok.txt", root.join("fine")).unwrap();
    let changes = [change("fine", ChangeKind::Added, true)];
    let violations = check_committed(root, &changes, || relink(&root.join("fine"), ".env"));
    assert_eq!(violations, []);
}
