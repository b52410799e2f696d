//! Every `tests/NAME.rs` must be declared as `mod NAME;` in `tests/all.rs`.
//!
//! With `autotests = false` cargo builds only `tests/all.rs`, so a test file
//! left out of it is never compiled and its tests never run, silently. This
//! test lists the folder and fails naming such files.

use std::collections::BTreeSet;
use std::path::Path;

/// The modules `all_rs` declares with a plain `mod NAME;` line (commented-out
/// lines do not count).
fn declared(all_rs: &str) -> BTreeSet<String> {
    all_rs
        .lines()
        .filter_map(|line| {
            let name = line.trim().strip_prefix("mod ")?.strip_suffix(';')?;
            Some(name.trim().to_string())
        })
        .collect()
}

/// The test files among the entries of the tests folder: `NAME.rs` gives
/// `NAME`; `all.rs` (the root) and anything else (folders, data) are left out.
fn test_files<'a>(entries: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
    entries
        .into_iter()
        .filter_map(|entry| entry.strip_suffix(".rs"))
        .filter(|name| *name != "all")
        .map(str::to_string)
        .collect()
}

/// The test files in `entries` that `all_rs` does not declare.
fn undeclared<'a>(entries: impl IntoIterator<Item = &'a str>, all_rs: &str) -> Vec<String> {
    let declared = declared(all_rs);
    test_files(entries)
        .into_iter()
        .filter(|name| !declared.contains(name))
        .collect()
}

#[test]
fn every_test_file_is_a_module_of_all_rs() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let entries: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            let entry = entry.unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
            entry.file_name().to_string_lossy().into_owned()
        })
        .collect();
    let all_rs = std::fs::read_to_string(dir.join("all.rs"))
        .unwrap_or_else(|e| panic!("{}/all.rs: {e}", dir.display()));

    // Not vacuous: the listing holds this very file and the parse finds it.
    let files = test_files(entries.iter().map(String::as_str));
    assert!(files.contains("included"), "tests/ listed as {entries:?}");
    assert!(declared(&all_rs).contains("included"), "{all_rs}");

    let missing = undeclared(entries.iter().map(String::as_str), &all_rs);
    assert!(
        missing.is_empty(),
        "tests/all.rs does not declare {missing:?}, so cargo never builds them; \
         add `mod NAME;` for each"
    );
}

#[test]
fn a_file_missing_from_all_rs_is_named() {
    let entries = [
        "all.rs",
        "abort.rs",
        "new_test.rs",
        "commented.rs",
        "support",
        "mock_server",
        "golden",
        "notes.txt",
    ];
    let all_rs =
        "//! The root.\n\nmod support;\n\nmod abort;\n// mod commented;\nmod mock_server;\n";
    assert_eq!(
        declared(all_rs),
        BTreeSet::from(["support", "abort", "mock_server"].map(String::from))
    );
    assert_eq!(
        test_files(entries),
        BTreeSet::from(["abort", "commented", "new_test"].map(String::from))
    );
    assert_eq!(undeclared(entries, all_rs), ["commented", "new_test"]);

    let fixed = format!("{all_rs}mod commented;\nmod new_test;\n");
    assert_eq!(undeclared(entries, &fixed), Vec::<String>::new());
}
