//! What changed between two trees, file by file, visiting only the folders
//! whose ids differ: a step that changed one file of a 70k-file tree costs a
//! few folder reads, where a full diff walks every entry of both trees.
//!
//! The result is what a git diff of the two trees with type changes
//! reports: a file or link added, deleted, or modified (content, mode, or
//! file ↔ link); a folder replaced by a file is its files deleted and the
//! file added, and the other way round. Sorted by path, bytewise.

use git2::{FileMode, ObjectType, Repository, Tree, TreeEntry};

use crate::{Change, ChangeKind};

/// The changes from `from` to `to`, sorted by path.
pub(super) fn changes(
    repo: &Repository,
    from: &Tree<'_>,
    to: &Tree<'_>,
) -> Result<Vec<Change>, git2::Error> {
    Ok(changed(repo, from, to)?
        .into_iter()
        .map(|(_, change)| change)
        .collect())
}

/// [`changes`] with each path as its bytes (a [`Change`]'s path is text).
pub(super) fn changed(
    repo: &Repository,
    from: &Tree<'_>,
    to: &Tree<'_>,
) -> Result<Vec<(Vec<u8>, Change)>, git2::Error> {
    let mut out = Vec::new();
    folder(repo, Some(from), Some(to), b"", &mut out)?;
    out.sort_by(|a: &(Vec<u8>, Change), b| a.0.cmp(&b.0));
    Ok(out)
}

type Found = Vec<(Vec<u8>, Change)>;

fn folder(
    repo: &Repository,
    from: Option<&Tree<'_>>,
    to: Option<&Tree<'_>>,
    prefix: &[u8],
    out: &mut Found,
) -> Result<(), git2::Error> {
    if let (Some(a), Some(b)) = (from, to)
        && a.id() == b.id()
    {
        return Ok(());
    }
    let mut names = std::collections::BTreeSet::new();
    for tree in [from, to].into_iter().flatten() {
        names.extend(tree.iter().map(|e| e.name_bytes().to_vec()));
    }
    for name in names {
        let old = from.and_then(|t| t.get_name_bytes(&name));
        let new = to.and_then(|t| t.get_name_bytes(&name));
        if let (Some(a), Some(b)) = (&old, &new)
            && a.id() == b.id()
            && a.filemode() == b.filemode()
        {
            continue;
        }
        let mut path = prefix.to_vec();
        if !path.is_empty() {
            path.push(b'/');
        }
        path.extend_from_slice(&name);
        entry(repo, old.as_ref(), new.as_ref(), path, out)?;
    }
    Ok(())
}

fn entry(
    repo: &Repository,
    old: Option<&TreeEntry<'_>>,
    new: Option<&TreeEntry<'_>>,
    path: Vec<u8>,
    out: &mut Found,
) -> Result<(), git2::Error> {
    let tree_of = |e: Option<&TreeEntry<'_>>| -> Result<Option<Tree<'_>>, git2::Error> {
        match e.filter(|e| e.kind() == Some(ObjectType::Tree)) {
            Some(e) => Ok(Some(repo.find_tree(e.id())?)),
            None => Ok(None),
        }
    };
    let blob =
        |e: Option<&TreeEntry<'_>>| e.filter(|e| e.kind() == Some(ObjectType::Blob)).is_some();
    let (old_tree, new_tree) = (tree_of(old)?, tree_of(new)?);
    if old_tree.is_some() || new_tree.is_some() {
        folder(repo, old_tree.as_ref(), new_tree.as_ref(), &path, out)?;
    }
    let is_link = new.is_some_and(|e| e.filemode() == i32::from(FileMode::Link));
    let kind = match (blob(old), blob(new)) {
        (true, true) => ChangeKind::Modified,
        (true, false) => ChangeKind::Deleted,
        (false, true) => ChangeKind::Added,
        (false, false) => return Ok(()),
    };
    let change = Change {
        path: String::from_utf8_lossy(&path).into_owned(),
        kind,
        symlink: kind != ChangeKind::Deleted && is_link,
    };
    out.push((path, change));
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::symlink;

    use git2::{Delta, DiffOptions};

    use super::*;
    use crate::shadow::{MAX_FILE_BYTES, ShadowRepo};

    /// libgit2's diff of the two trees, as the record lists changes.
    fn git_diff(repo: &Repository, from: &Tree<'_>, to: &Tree<'_>) -> Vec<Change> {
        let mut opts = DiffOptions::new();
        opts.include_typechange(true);
        let diff = repo
            .diff_tree_to_tree(Some(from), Some(to), Some(&mut opts))
            .unwrap();
        diff.deltas()
            .map(|d| {
                let (kind, file) = match d.status() {
                    Delta::Added => (ChangeKind::Added, d.new_file()),
                    Delta::Deleted => (ChangeKind::Deleted, d.old_file()),
                    _ => (ChangeKind::Modified, d.new_file()),
                };
                Change {
                    path: String::from_utf8_lossy(file.path_bytes().unwrap()).into_owned(),
                    kind,
                    symlink: kind != ChangeKind::Deleted && d.new_file().mode() == FileMode::Link,
                }
            })
            .collect()
    }

    #[test]
    fn the_changes_are_those_a_git_diff_reports() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        let w = |p: &str, text: &str| {
            let path = work.join(p);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        };
        w("a.txt", "a\n");
        w("dir/x.txt", "x\n");
        w("dir/sub/y.txt", "y\n");
        w("b", "file\n");
        w("dir.txt", "sorts between dir and dir/\n");
        let repo = ShadowRepo::init(&dir.path().join("s.git"), &work).unwrap();
        repo.baseline().unwrap();
        let steps: [&dyn Fn(); 5] = [
            &|| w("a.txt", "changed\n"),
            &|| {
                fs::remove_file(work.join("b")).unwrap();
                w("b/inside.txt", "now a folder\n");
            },
            &|| {
                fs::remove_dir_all(work.join("dir")).unwrap();
                w("dir", "now a file\n");
            },
            &|| {
                fs::remove_file(work.join("a.txt")).unwrap();
                symlink("dir.txt", work.join("a.txt")).unwrap();
            },
            &|| {
                use std::os::unix::fs::PermissionsExt;
                fs::set_permissions(work.join("dir"), fs::Permissions::from_mode(0o755)).unwrap();
                w("new/deep/z.txt", "z\n");
            },
        ];
        for step in steps {
            let before = repo.head().unwrap();
            step();
            let after = repo
                .commit_step(before, "step", MAX_FILE_BYTES)
                .unwrap()
                .commit
                .unwrap();
            let (from, to) = (
                repo.commit_tree(before).unwrap(),
                repo.commit_tree(after).unwrap(),
            );
            let ours = changes(repo.git(), &from, &to).unwrap();
            assert!(!ours.is_empty());
            assert_eq!(ours, git_diff(repo.git(), &from, &to));
        }
    }
}
