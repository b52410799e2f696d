use super::*;
use crate::shadow::ShadowRepo;
use std::io::Read;

#[test]
fn the_baseline_travels_as_a_tar_of_its_files_keyed_by_its_tree() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir_all(work.join("src/deep")).unwrap();
    std::fs::write(work.join("src/deep/a.txt"), "alpha\n").unwrap();
    std::fs::write(work.join("run.sh"), "#!/bin/sh\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(work.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("src/deep/a.txt", work.join("link")).unwrap();
    let git_dir = dir.path().join("shadow.git");
    let shadow = ShadowRepo::init(&git_dir, &work).unwrap();
    let baseline = shadow.baseline().unwrap();
    let snapshot = BaselineSnapshot::new(&git_dir, Commit::Taken(baseline));
    let key = snapshot.key().unwrap();
    assert_eq!(key.len(), 40);
    let mut bytes = Vec::new();
    snapshot.write(&mut bytes).unwrap();
    let mut archive = tar::Archive::new(bytes.as_slice());
    let mut seen = Vec::new();
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let path = entry.path().unwrap().display().to_string();
        let mode = entry.header().mode().unwrap();
        let kind = entry.header().entry_type();
        let mut content = String::new();
        if kind.is_file() {
            entry.read_to_string(&mut content).unwrap();
        }
        let target = entry
            .link_name()
            .unwrap()
            .map(|t| t.display().to_string())
            .unwrap_or_default();
        seen.push((path, mode, content, target));
    }
    seen.sort();
    let want = |p: &str, m: u32, c: &str, t: &str| (p.to_string(), m, c.to_string(), t.to_string());
    assert_eq!(
        seen,
        [
            want("link", 0o777, "", "src/deep/a.txt"),
            want("run.sh", 0o755, "#!/bin/sh\n", ""),
            want("src", 0o755, "", ""),
            want("src/deep", 0o755, "", ""),
            want("src/deep/a.txt", 0o644, "alpha\n", ""),
        ]
    );
    // The same files, the same key.
    let again = BaselineSnapshot::new(&git_dir, Commit::Taken(baseline));
    assert_eq!(again.key().unwrap(), key);
}
