//! The layer rule, as Cargo enforces it: each crate under `crates/` may
//! depend only on crates of a lower layer, and only the `ah` binary on the
//! front-end crates (argument parsing, terminal, prompts); the binary, of
//! ah's own crates, on the core alone, so that every decision is the core's
//! and a second front-end cannot skip one. A cycle would not build at all;
//! these tests also keep an upward edge between crates that do not form a
//! cycle out, keep `crates/` and this order in step, and keep
//! ARCHITECTURE.md's crate graph true.

use std::collections::BTreeMap;
use std::path::Path;

/// The layers, lowest first; `ah` (the binary, at the root) is the top.
/// The session store sits just below core: nothing under it keeps SQLite.
const LAYERS: &[&str] = &[
    "base", "llm", "tools", "sandbox", "record", "review", "session", "core",
];

/// Crates that only the session store may use.
const SESSION_ONLY: &[&str] = &["rusqlite"];

/// Crates for a person at a terminal: only the binary may use them.
const FRONT_END: &[&str] = &["clap", "clap_complete", "console", "crossterm", "indicatif"];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The `ah-*` dependencies (as layer names, sorted, once each) and the
/// other dependencies in the `tables` of the manifest at `path`.
fn dependencies(path: &Path, tables: &[&str]) -> (Vec<String>, Vec<String>) {
    let text = std::fs::read_to_string(path).unwrap();
    let manifest: toml::Table = text.parse().unwrap();
    let mut layers = Vec::new();
    let mut others = Vec::new();
    for table in tables {
        let Some(deps) = manifest.get(*table).and_then(|t| t.as_table()) else {
            continue;
        };
        for name in deps.keys() {
            match name.strip_prefix("ah-") {
                Some(layer) => layers.push(layer.to_string()),
                None => others.push(name.clone()),
            }
        }
    }
    layers.sort();
    layers.dedup();
    (layers, others)
}

/// Each layer crate's `ah-*` dependencies and its other dependencies, read
/// from `crates/NAME/Cargo.toml`.
fn manifests(crates: &Path) -> BTreeMap<String, (Vec<String>, Vec<String>)> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(crates).unwrap() {
        let dir = entry.unwrap().path();
        let tables = ["dependencies", "dev-dependencies", "build-dependencies"];
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        out.insert(name, dependencies(&dir.join("Cargo.toml"), &tables));
    }
    out
}

/// What the binary at `root` may not do: depend on one of ah's crates
/// besides the core (its tests and benches may, as dev-dependencies), or
/// name one in its source, where its unit tests could reach a
/// dev-dependency.
fn binary_violations(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let tables = ["dependencies", "build-dependencies"];
    let (layers, _) = dependencies(&root.join("Cargo.toml"), &tables);
    for layer in layers.iter().filter(|l| *l != "core") {
        found.push(format!(
            "the binary depends on `ah-{layer}`, not only on `ah-core`"
        ));
    }
    for file in rust_files(&root.join("src")) {
        let text = std::fs::read_to_string(&file).unwrap();
        for layer in LAYERS.iter().filter(|l| **l != "core") {
            if text.contains(&format!("ah_{layer}")) {
                let shown = file.strip_prefix(root).unwrap_or(&file).display();
                found.push(format!("{shown} names `ah_{layer}`"));
            }
        }
    }
    found
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

fn violations(crates: &Path) -> Vec<String> {
    let rank = |name: &str| LAYERS.iter().position(|l| *l == name);
    let mut found = Vec::new();
    for (name, (layers, others)) in manifests(crates) {
        let Some(own) = rank(&name) else {
            found.push(format!("crates/{name} is not in the layer list"));
            continue;
        };
        for dep in layers {
            match rank(&dep) {
                Some(r) if r < own => {}
                _ => found.push(format!(
                    "`{name}` depends on `{dep}`, which is not below it"
                )),
            }
        }
        for dep in others.iter().filter(|d| FRONT_END.contains(&d.as_str())) {
            found.push(format!("`{name}` depends on the front-end crate `{dep}`"));
        }
        for dep in others.iter().filter(|d| SESSION_ONLY.contains(&d.as_str())) {
            if name != "session" {
                found.push(format!("`{name}` depends on `{dep}`, the session store's"));
            }
        }
    }
    found
}

#[test]
fn every_crate_depends_only_on_lower_layers() {
    let found = violations(&root().join("crates"));
    assert!(found.is_empty(), "layer rule broken:\n{}", found.join("\n"));
}

#[test]
fn the_binary_stands_on_the_core_alone() {
    let found = binary_violations(root());
    assert!(found.is_empty(), "layer rule broken:\n{}", found.join("\n"));
}

#[test]
fn the_binary_check_catches_a_lower_crate_in_the_manifest_and_the_source() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src/cli")).unwrap();
    let manifest = "[package]\nname = \"ah\"\n\n[dependencies]\n\
        ah-core = { path = \"crates/core\" }\nah-review = { path = \"crates/review\" }\n\n\
        [dev-dependencies]\nah-sandbox = { path = \"crates/sandbox\" }\n";
    std::fs::write(dir.path().join("Cargo.toml"), manifest).unwrap();
    std::fs::write(dir.path().join("src/main.rs"), "fn main() {}\n").unwrap();
    let source = "#[cfg(test)]\nuse ah_sandbox::podman;\nuse ah_core::run;\n";
    std::fs::write(dir.path().join("src/cli/mod.rs"), source).unwrap();
    assert_eq!(
        binary_violations(dir.path()),
        [
            "the binary depends on `ah-review`, not only on `ah-core`",
            "src/cli/mod.rs names `ah_sandbox`",
        ]
    );
}

#[test]
fn every_layer_is_a_crate() {
    let names: Vec<String> = manifests(&root().join("crates")).into_keys().collect();
    let mut expected: Vec<String> = LAYERS.iter().map(|l| l.to_string()).collect();
    expected.sort();
    assert_eq!(names, expected);
}

#[test]
fn the_check_catches_an_upward_edge_and_a_front_end_crate() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, deps: &str| {
        std::fs::create_dir_all(dir.path().join(name)).unwrap();
        let text = format!("[package]\nname = \"ah-{name}\"\n\n[dependencies]\n{deps}");
        std::fs::write(dir.path().join(name).join("Cargo.toml"), text).unwrap();
    };
    write("llm", "serde = \"1\"\n");
    write(
        "tools",
        "ah-llm = { path = \"../llm\" }\nah-core = { path = \"../core\" }\n",
    );
    write("record", "clap = \"4\"\n");
    write(
        "sandbox",
        "ah-session = { path = \"../session\" }\nrusqlite = \"0.41\"\n",
    );
    let found = violations(dir.path());
    assert_eq!(
        found,
        [
            "`record` depends on the front-end crate `clap`",
            "`sandbox` depends on `session`, which is not below it",
            "`sandbox` depends on `rusqlite`, the session store's",
            "`tools` depends on `core`, which is not below it",
        ]
    );
}

#[test]
fn architecture_md_draws_the_same_graph() {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    // Each line's start, and the `ah-*` crates it must list.
    let mut graph: Vec<(String, Vec<String>)> = manifests(&root().join("crates"))
        .into_iter()
        .map(|(name, (layers, _))| (format!("ah-{name} →"), layers))
        .collect();
    let (binary, _) = dependencies(&root().join("Cargo.toml"), &["dependencies"]);
    graph.push(("ah (binary) →".to_string(), binary));
    for (line, layers) in graph {
        let drawn = text
            .lines()
            .find(|l| l.trim_start().trim_start_matches("- ").starts_with(&line))
            .unwrap_or_else(|| panic!("ARCHITECTURE.md has no line `{line} …`"));
        let mut listed: Vec<&str> = drawn
            .split('→')
            .nth(1)
            .unwrap()
            .split(',')
            .map(|s| s.trim().trim_start_matches("ah-"))
            .filter(|s| !s.is_empty() && *s != "(nothing)")
            .collect();
        listed.sort();
        let mut actual: Vec<&str> = layers.iter().map(String::as_str).collect();
        actual.sort();
        assert_eq!(listed, actual, "ARCHITECTURE.md's line `{line} …`");
    }
}
