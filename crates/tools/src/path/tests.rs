//! Path confinement against real directories, files and symlinks.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use tempfile::TempDir;

use super::*;

/// A temp dir holding `work/` (the root) and `outside/` (a sibling with a secret).
struct Fixture {
    _dir: TempDir,
    root: PathBuf,
    outside: PathBuf,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    // Canonical from the start so expected host paths compare equal.
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let root = base.join("work");
    let outside = base.join("outside");
    std::fs::create_dir_all(root.join("src/deep")).unwrap();
    std::fs::write(root.join("src/main.rs"), "fn main() {}").unwrap();
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("secret"), "secret").unwrap();
    Fixture {
        _dir: dir,
        root,
        outside,
    }
}

fn ok(root: &Path, path: &str) -> Resolved {
    resolve(root, path).unwrap_or_else(|e| panic!("{path:?} refused: {e}"))
}

fn refused(root: &Path, path: &str) -> String {
    match resolve(root, path) {
        Ok(r) => panic!("{path:?} accepted as {r:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn relative_and_work_alias_paths_resolve_inside() {
    let f = fixture();
    let r = ok(&f.root, "src/main.rs");
    assert_eq!(r.host, f.root.join("src/main.rs"));
    assert_eq!(r.rel, "src/main.rs");
    assert_eq!(r.display(), "/work/src/main.rs");
    assert_eq!(ok(&f.root, "/work/src/main.rs"), r);
    assert_eq!(ok(&f.root, "./src//./main.rs"), r);
    assert_eq!(ok(&f.root, "src/deep/../main.rs"), r);
    // Missing files resolve too (write creates them).
    assert_eq!(ok(&f.root, "/work/a/b").rel, "a/b");
    for root_itself in ["/work", "/work/", ".", "src/.."] {
        let r = ok(&f.root, root_itself);
        assert_eq!((r.host.as_path(), r.rel.as_str()), (f.root.as_path(), ""));
    }
}

#[test]
fn empty_nul_and_foreign_absolute_paths_are_refused() {
    let f = fixture();
    assert!(refused(&f.root, "").contains("path is empty"));
    assert!(refused(&f.root, "a\0b").contains("NUL"));
    for path in ["/etc/passwd", "/", "/workshop/x", "/tmp/work"] {
        let message = refused(&f.root, path);
        assert_eq!(
            message,
            format!("path {path:?} is outside /work: paths must stay inside the work directory")
        );
    }
    // The host path of the root is not an alias: the model only knows /work.
    refused(&f.root, f.root.join("src/main.rs").to_str().unwrap());
}

#[test]
fn dot_dot_escaping_the_root_is_refused_lexically() {
    let f = fixture();
    assert_eq!(
        refused(&f.root, "../x"),
        "path \"../x\" is outside /work: paths must stay inside the work directory"
    );
    for path in [
        "..",
        "/work/..",
        "/work/../outside/secret",
        "src/../../outside",
        "a/../../b",
    ] {
        assert!(
            refused(&f.root, path).contains("is outside /work"),
            "{path}"
        );
    }
}

#[test]
fn symlinks_inside_the_root_are_followed() {
    let f = fixture();
    symlink("src/main.rs", f.root.join("rel-link")).unwrap();
    symlink(f.root.join("src"), f.root.join("abs-dir-link")).unwrap();
    symlink("/work/src/main.rs", f.root.join("container-link")).unwrap();
    // A chain: link → link → dir, with `..` inside a target.
    symlink("deep/../../abs-dir-link", f.root.join("src/up-link")).unwrap();
    symlink("src/up-link", f.root.join("chain")).unwrap();
    for path in [
        "rel-link",
        "abs-dir-link/main.rs",
        "container-link",
        "chain/main.rs",
    ] {
        let r = ok(&f.root, path);
        assert_eq!(r.rel, "src/main.rs", "{path}");
        assert_eq!(r.host, f.root.join("src/main.rs"), "{path}");
    }
    // A dangling link pointing inside resolves to where the file would be.
    symlink("src/new.rs", f.root.join("dangling-inside")).unwrap();
    assert_eq!(ok(&f.root, "dangling-inside").rel, "src/new.rs");
}

#[test]
fn symlinks_pointing_outside_are_refused_at_any_component() {
    let f = fixture();
    symlink("/etc/passwd", f.root.join("passwd")).unwrap();
    symlink(&f.outside, f.root.join("out-dir")).unwrap();
    symlink("../outside/secret", f.root.join("rel-out")).unwrap();
    symlink(f.outside.join("missing"), f.root.join("dangling-out")).unwrap();
    symlink("/", f.root.join("slash")).unwrap();
    // Inside link → inside link → outside.
    symlink("../../rel-out", f.root.join("src/deep/hop")).unwrap();
    symlink("src/deep/hop", f.root.join("chain-out")).unwrap();
    let cases = [
        ("passwd", "/work/passwd"),
        ("/work/passwd", "/work/passwd"),
        ("out-dir/secret", "/work/out-dir"),
        ("out-dir/not-there/x", "/work/out-dir"),
        ("rel-out", "/work/rel-out"),
        ("dangling-out", "/work/dangling-out"),
        ("slash/etc/passwd", "/work/slash"),
        ("chain-out", "/work/rel-out"),
    ];
    for (path, link) in cases {
        let message = refused(&f.root, path);
        assert!(
            message.contains(&format!("goes through the symlink {link} whose target")),
            "{path}: {message}"
        );
        assert!(message.contains("outside /work"), "{message}");
    }
}

#[test]
fn symlink_loops_are_refused() {
    let f = fixture();
    symlink("loop-b", f.root.join("loop-a")).unwrap();
    symlink("loop-a", f.root.join("loop-b")).unwrap();
    symlink("self", f.root.join("self")).unwrap();
    for path in ["loop-a", "self/x"] {
        assert!(
            refused(&f.root, path).contains("too many levels of symbolic links"),
            "{path}"
        );
    }
}

#[test]
fn a_symlinked_root_is_canonicalized_once() {
    let f = fixture();
    let alias = f.outside.join("root-alias");
    symlink(&f.root, &alias).unwrap();
    let r = ok(&alias, "/work/src/main.rs");
    assert_eq!(r.host, f.root.join("src/main.rs"));
    // A link whose target names the canonical root is inside.
    symlink(f.root.join("src"), f.root.join("via-canonical")).unwrap();
    assert_eq!(ok(&alias, "via-canonical/main.rs").rel, "src/main.rs");
}

#[test]
fn a_missing_root_is_a_clear_error() {
    let f = fixture();
    let message = refused(&f.root.join("nope"), "x");
    assert!(message.contains("work directory"), "{message}");
}
