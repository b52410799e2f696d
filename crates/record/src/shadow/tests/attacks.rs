//! What a hostile step cannot do to the record: get a rejected commit into
//! the run's history, disguise or rewrite content with `.gitattributes`, make
//! the host hash a huge file, or block a revert with read-only folders.

use std::fs;
use std::path::Path;
use std::process::Command;

use super::*;
use crate::patch::patch_text;

fn blob_at(repo: &ShadowRepo, commit: Oid, path: &str) -> Vec<u8> {
    let tree = repo.commit_tree(commit).unwrap();
    let entry = tree.get_path(Path::new(path)).unwrap();
    repo.git().find_blob(entry.id()).unwrap().content().to_vec()
}

#[test]
fn a_rejected_commit_left_at_head_is_never_the_parent_of_the_next_step() {
    let f = fixture();
    let base = f.repo.head().unwrap();
    fs::create_dir(f.work.join(".github")).unwrap();
    fs::write(f.work.join(".github/evil.yml"), "on: push\n").unwrap();
    let bad = f
        .repo
        .commit_step(base, "violating", MAX_FILE_BYTES)
        .unwrap();
    let bad = bad.commit.unwrap();
    // The revert failed: HEAD and the work tree still hold the rejected step.
    assert_eq!(f.repo.head().unwrap(), bad);
    fs::write(f.work.join("src/ok.rs"), "ok\n").unwrap();

    let next = f.repo.commit_step(base, "next", MAX_FILE_BYTES).unwrap();
    let commit = next.commit.unwrap();
    // The rejected file is part of this step again, so the policy sees it.
    assert_eq!(
        next.changes,
        [
            change(".github/evil.yml", ChangeKind::Added, false),
            change("src/ok.rs", ChangeKind::Added, false),
        ]
    );
    let parents: Vec<Oid> = f
        .repo
        .git()
        .find_commit(commit)
        .unwrap()
        .parent_ids()
        .collect();
    assert_eq!(parents, [base]);
    assert_eq!(f.repo.head().unwrap(), commit);

    // A step that brings the tree back to its parent moves HEAD there too.
    fs::remove_dir_all(f.work.join(".github")).unwrap();
    fs::remove_file(f.work.join("src/ok.rs")).unwrap();
    f.repo.commit_step(commit, "other", MAX_FILE_BYTES).unwrap();
    let back = f.repo.commit_step(base, "back", MAX_FILE_BYTES).unwrap();
    assert_eq!(back.commit, None);
    assert_eq!(f.repo.head().unwrap(), base);
}

#[test]
fn gitattributes_cannot_turn_a_text_change_into_a_binary_one() {
    let f = fixture();
    fs::write(f.work.join(".gitattributes"), "*.rs binary\n*.md -diff\n").unwrap();
    let before = record(&f.repo, "attributes").commit.unwrap();
    fs::write(f.work.join("src/lib.rs"), "fn main() { evil() }\n").unwrap();
    fs::write(f.work.join("README.md"), "hello\nworld\n").unwrap();
    let after = record(&f.repo, "edit").commit.unwrap();
    let (patch, text) = patch_text(&f.repo, before, after).unwrap();
    assert!(!text.contains("Binary files"), "{text}");
    assert!(!text.contains("GIT binary patch"), "{text}");
    assert!(text.contains("\n+fn main() { evil() }\n"), "{text}");
    assert!(text.contains("\n+world\n"), "{text}");
    assert_eq!((patch.added_lines, patch.removed_lines), (2, 1));
}

#[test]
fn gitattributes_cannot_change_what_is_stored_or_restored() {
    let f = fixture();
    let attributes = "* text=auto eol=lf\n*.crlf eol=crlf\n*.txt ident\n";
    fs::write(f.work.join(".gitattributes"), attributes).unwrap();
    let dos = b"one\r\ntwo\r\n$Id: kept as written $\r\n".to_vec();
    let unix = b"one\ntwo\n".to_vec();
    fs::write(f.work.join("dos.txt"), &dos).unwrap();
    fs::write(f.work.join("unix.crlf"), &unix).unwrap();
    let commit = record(&f.repo, "files").commit.unwrap();
    assert_eq!(blob_at(&f.repo, commit, "dos.txt"), dos);
    assert_eq!(blob_at(&f.repo, commit, "unix.crlf"), unix);
    // Hashing the work tree agrees with what was stored: no phantom change.
    assert_eq!(record(&f.repo, "again").commit, None);
    // A revert writes the files back byte for byte.
    fs::write(f.work.join("dos.txt"), "x").unwrap();
    fs::write(f.work.join("unix.crlf"), "y").unwrap();
    record(&f.repo, "edit").commit.unwrap();
    f.repo.revert_to(commit).unwrap();
    assert_eq!(fs::read(f.work.join("dos.txt")).unwrap(), dos);
    assert_eq!(fs::read(f.work.join("unix.crlf")).unwrap(), unix);
}

#[test]
fn files_over_the_cap_are_left_out_and_reported() {
    let f = fixture();
    let base = f.repo.head().unwrap();
    fs::write(f.work.join("fits.bin"), vec![b'x'; 100]).unwrap();
    fs::write(f.work.join("big.bin"), vec![b'x'; 101]).unwrap();
    fs::write(f.work.join("README.md"), vec![b'x'; 200]).unwrap();
    let step = f.repo.commit_step(base, "big", 100).unwrap();
    assert_eq!(step.too_large, ["README.md", "big.bin"]);
    assert_eq!(step.changes, [change("fits.bin", ChangeKind::Added, false)]);
    let commit = step.commit.unwrap();
    assert_eq!(blob_at(&f.repo, commit, "README.md"), b"hello\n");
    // A revert removes what was never staged and restores what was.
    f.repo.revert_to(base).unwrap();
    assert!(!f.work.join("big.bin").exists());
    assert_eq!(fs::read(f.work.join("README.md")).unwrap(), b"hello\n");

    // A sparse 50 GiB file costs nothing: its size is checked before reading.
    let huge = fs::File::create(f.work.join("huge")).unwrap();
    huge.set_len(50 << 30).unwrap();
    let started = std::time::Instant::now();
    let step = f.repo.commit_step(base, "huge", MAX_FILE_BYTES).unwrap();
    assert_eq!(step.too_large, ["huge"]);
    assert_eq!(step.commit, None);
    assert!(started.elapsed().as_secs() < 10, "{:?}", started.elapsed());
    f.repo.revert_to(base).unwrap();
    assert!(!f.work.join("huge").exists());
}

/// A step that added a file below folders it then made read-only, and
/// changed a file in another: the revert still restores the commit. Only
/// meaningful for a user whom permission bits bind (not root).
fn revert_through_read_only_folders() {
    let f = fixture();
    let base = f.repo.head().unwrap();
    fs::create_dir_all(f.work.join(".github/workflows")).unwrap();
    fs::write(f.work.join(".github/workflows/evil.yml"), "on: push\n").unwrap();
    fs::write(f.work.join("src/lib.rs"), "changed\n").unwrap();
    record(&f.repo, "violating").commit.unwrap();
    chmod(&f.work.join("src/lib.rs"), 0o444);
    for dir in [".github/workflows", ".github", "src"] {
        chmod(&f.work.join(dir), 0o555);
    }
    assert!(
        fs::remove_file(f.work.join(".github/workflows/evil.yml")).is_err(),
        "permission bits must bind this user"
    );

    let reverted = f.repo.revert_to(base).unwrap();
    assert_eq!(reverted.head, base);
    assert_eq!(f.repo.head().unwrap(), base);
    assert!(!f.work.join(".github").exists());
    assert_eq!(
        fs::read_to_string(f.work.join("src/lib.rs")).unwrap(),
        "fn main() {}\n"
    );
}

#[test]
fn a_revert_gets_through_folders_the_step_made_read_only() {
    if !rustix::process::geteuid().is_root() {
        revert_through_read_only_folders();
        return;
    }
    let Ok(user) = std::env::var("AH_TEST_USER") else {
        eprintln!(
            "skipped: root ignores permission bits; set AH_TEST_USER to an unprivileged \
             user to run this as that user"
        );
        return;
    };
    // A copy in a 0755 folder: the user may not reach the checkout.
    let dir = tempfile::tempdir().unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let exe = dir.path().join("lib-tests");
    fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
    let out = Command::new("runuser")
        .args(["-u", &user, "--", "env", "-i", "PATH=/usr/bin:/bin"])
        .arg(&exe)
        .args([
            "--exact",
            "shadow::tests::attacks::read_only_folders_as_another_user",
            "--ignored",
            "--test-threads=1",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "as {user}:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
#[ignore = "run as AH_TEST_USER by a_revert_gets_through_folders_the_step_made_read_only"]
fn read_only_folders_as_another_user() {
    assert!(
        !rustix::process::geteuid().is_root(),
        "must run unprivileged"
    );
    revert_through_read_only_folders();
}
