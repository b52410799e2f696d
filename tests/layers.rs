//! The layer rule of DESIGN.md, enforced: a module may refer only to modules
//! of its own or a lower layer (`llm` → `session` → `tools` → `sandbox` →
//! `agent` → `work` → `cli`). Any `crate::NAME` path counts, not only `use`
//! lines, so a fully qualified call cannot slip past.

use std::path::{Path, PathBuf};

const LAYERS: &[&str] = &["llm", "session", "tools", "sandbox", "agent", "work", "cli"];

fn rank(module: &str) -> Option<usize> {
    LAYERS.iter().position(|m| *m == module)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every `crate::NAME` in `text`, with its line number.
fn crate_refs(text: &str) -> Vec<(usize, String)> {
    let mut refs = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or_default();
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            refs.push((n + 1, name));
        }
    }
    refs
}

fn violations(src: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for layer in LAYERS {
        let dir = src.join(layer);
        let mut files = Vec::new();
        if dir.is_dir() {
            rust_files(&dir, &mut files);
        }
        let single = src.join(format!("{layer}.rs"));
        if single.is_file() {
            files.push(single);
        }
        let own = rank(layer).unwrap();
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for (line, name) in crate_refs(&text) {
                if rank(&name).is_some_and(|r| r > own) {
                    found.push(format!(
                        "{}:{line}: layer `{layer}` refers to higher layer `{name}`",
                        file.display()
                    ));
                }
            }
        }
    }
    found
}

#[test]
fn no_layer_imports_a_higher_one() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = violations(&src);
    assert!(found.is_empty(), "layer rule broken:\n{}", found.join("\n"));
}

#[test]
fn the_check_catches_an_upward_reference() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("tools")).unwrap();
    std::fs::write(
        dir.path().join("tools/x.rs"),
        "use ah_llm::Block;\nfn f() { ah_core::agent::run(); } // crate::cli in a comment\n",
    )
    .unwrap();
    let found = violations(dir.path());
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("x.rs:2: layer `tools` refers to higher layer `agent`"));
}

#[test]
fn every_module_of_the_crate_has_a_layer() {
    let lib =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    for line in lib.lines() {
        if let Some(name) = line.trim().strip_prefix("pub mod ") {
            let name = name.trim_end_matches(';');
            assert!(
                rank(name).is_some(),
                "module `{name}` is not in the layer list"
            );
        }
    }
}
