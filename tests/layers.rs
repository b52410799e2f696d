//! The layer rule, as Cargo enforces it: each crate under `crates/` may
//! depend only on crates of a lower layer, and only the `ah` binary on the
//! front-end crates (argument parsing, terminal, prompts). A cycle would not
//! build at all; these tests also keep an upward edge between crates that do
//! not form a cycle out, keep `crates/` and this order in step, and keep
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
const FRONT_END: &[&str] = &[
    "clap",
    "clap_complete",
    "console",
    "crossterm",
    "dialoguer",
    "indicatif",
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Each layer crate's `ah-*` dependencies and its other dependencies, read
/// from `crates/NAME/Cargo.toml`.
fn manifests(crates: &Path) -> BTreeMap<String, (Vec<String>, Vec<String>)> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(crates).unwrap() {
        let dir = entry.unwrap().path();
        let text = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        let manifest: toml::Table = text.parse().unwrap();
        let mut layers = Vec::new();
        let mut others = Vec::new();
        for table in ["dependencies", "dev-dependencies", "build-dependencies"] {
            let Some(deps) = manifest.get(table).and_then(|t| t.as_table()) else {
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
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        out.insert(name, (layers, others));
    }
    out
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
    for (name, (layers, _)) in manifests(&root().join("crates")) {
        let line = format!("ah-{name} →");
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
        assert_eq!(listed, actual, "ARCHITECTURE.md's line for ah-{name}");
    }
}
