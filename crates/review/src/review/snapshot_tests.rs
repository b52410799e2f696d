//! Snapshots of the diffstat as the review screen shows it, whole: the
//! `tests` module checks its rules one by one, these pin the text a person
//! reads before saying yes to a patch, so that a change to its columns,
//! summary lines or marks shows up as a diff to review (`snapshots/`).

use ah_record::patch::{FileStat, MODE_EXECUTABLE, MODE_FILE, MODE_SUBMODULE, MODE_SYMLINK};

use super::diffstat;

/// A file with `added` and `removed` lines whose old and new git modes are
/// given (0: that side does not exist).
fn file(path: &str, added: u64, removed: u64, old_mode: u32, new_mode: u32) -> FileStat {
    FileStat {
        path: path.to_string(),
        added,
        removed,
        binary: false,
        old_mode,
        new_mode,
        bytes: 100 * (added + removed + 1),
    }
}

/// A text file changed in place.
fn changed(path: &str, added: u64, removed: u64) -> FileStat {
    file(path, added, removed, MODE_FILE, MODE_FILE)
}

#[test]
fn an_everyday_patch() {
    let stats = [
        changed("src/main.rs", 12, 3),
        file("src/parse/tokens.rs", 40, 0, 0, MODE_FILE),
        file("docs/old-notes.md", 0, 7, MODE_FILE, 0),
        changed("README.md", 2, 2),
    ];
    insta::assert_snapshot!(diffstat(&stats));
}

/// The session patch detects no renames (see `ah_record::patch`): a moved
/// file is its deletion and its addition, both marked when the file acts
/// outside the diff.
#[test]
fn renames_binaries_modes_links_and_marks() {
    let stats = [
        file("src/old_name.rs", 0, 20, MODE_FILE, 0),
        file("src/new_name.rs", 21, 0, 0, MODE_FILE),
        file("docs/AGENTS.md", 0, 3, MODE_FILE, 0),
        file("AGENTS.md", 3, 0, 0, MODE_FILE),
        FileStat {
            binary: true,
            ..changed("assets/logo.png", 0, 0)
        },
        file("scripts/release.sh", 0, 0, MODE_FILE, MODE_EXECUTABLE),
        file("scripts/new.sh", 5, 0, 0, MODE_EXECUTABLE),
        file("latest", 1, 0, 0, MODE_SYMLINK),
        file("vendor/lib", 1, 0, 0, MODE_SUBMODULE),
        changed(".claude/settings.json", 4, 1),
        changed(".tool-versions", 1, 1),
        changed(".gitkeep", 0, 0),
    ];
    insta::assert_snapshot!(diffstat(&stats));
}

/// Names that could forge a line or read as something else are escaped;
/// long names keep their end; a big change is scaled to the graph.
#[test]
fn escaped_long_and_scaled() {
    let stats = [
        changed("notes\n 1 file changed, 0 insertions(+)", 1, 0),
        file("run\u{202E}hs.txt", 2, 0, 0, MODE_EXECUTABLE),
        changed("tab\there/\u{1b}[31mred.rs", 1, 1),
        changed(
            &format!("{}/deep/inside/the/tree/module.rs", "packages".repeat(5)),
            900,
            100,
        ),
        changed("small.rs", 1, 1),
    ];
    insta::assert_snapshot!(diffstat(&stats));
}
