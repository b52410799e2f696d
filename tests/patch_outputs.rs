//! Build and cache outputs through the real binary (`--backend none`, a
//! scripted mock model, a real git host repo): what a run's tests leave
//! behind in a project without a `.gitignore` is kept out of the patch (so
//! `--review auto` still applies the source edit), copied to the run's
//! artifacts and counted; what the project already tracks stays in it.

use crate::support::host::{Host, describe, json_file};
use crate::support::mock::MockServer;
use crate::support::steps::{bash, script, write};
use serde_json::{Value, json};

/// A test run's leftovers: a compiled module (binary) and pytest's cache.
const RUN_TESTS: &str = "mkdir -p pkg/__pycache__ .pytest_cache/v && \
     printf 'B\\r\\n\\0\\0\\0\\1\\2\\3' > pkg/__pycache__/m.cpython-311.pyc && \
     printf '[]\\n' > .pytest_cache/v/x";

fn events(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

#[test]
fn outputs_of_a_test_run_stay_out_of_an_auto_applied_patch() {
    let host = Host::git(&[
        ("pkg/m.py", "def f():\n    return 1\n"),
        ("tests/test_m.py", "from pkg.m import f\n"),
    ]);
    let mock = MockServer::start(script(vec![
        write("pkg/m.py", "def f():\n    return 2\n"),
        bash(RUN_TESTS),
        // An output folder is no way around the write policy.
        bash("echo TOKEN=x > pkg/__pycache__/.env"),
    ]));
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "auto", "--json", "fix f"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let run = host.run();
    let artifacts = run.join("artifacts");
    assert!(
        stderr.contains(&format!(
            "2 build/cache files left out of the patch (kept in {})",
            artifacts.display()
        )),
        "{stderr}"
    );

    // The source edit reached the project, the outputs did not.
    assert_eq!(host.read("pkg/m.py"), "def f():\n    return 2\n");
    assert!(!host.project.join("pkg/__pycache__").exists());
    assert!(!host.project.join(".pytest_cache").exists());
    let patch = std::fs::read(run.join("session.patch")).unwrap();
    let patch = String::from_utf8_lossy(&patch);
    assert!(
        patch.contains("pkg/m.py") && !patch.contains("pyc"),
        "{patch}"
    );
    assert!(!patch.contains(".pytest_cache"), "{patch}");

    // They are artifacts, byte for byte.
    assert_eq!(
        std::fs::read(artifacts.join("pkg/__pycache__/m.cpython-311.pyc")).unwrap(),
        b"B\r\n\0\0\0\x01\x02\x03"
    );
    assert_eq!(
        std::fs::read_to_string(artifacts.join(".pytest_cache/v/x")).unwrap(),
        "[]\n"
    );

    let manifest = json_file(&run.join("manifest.json"));
    assert_eq!(
        manifest["left_out"],
        json!([".pytest_cache/v/x", "pkg/__pycache__/m.cpython-311.pyc"])
    );
    assert_eq!(manifest["applied"], json!(true));
    assert_eq!(manifest["patch"]["files"], json!(1));
    assert_eq!(
        manifest["violations"][0]["path"],
        json!("pkg/__pycache__/.env")
    );
    assert!(!artifacts.join("pkg/__pycache__/.env").exists());

    let events = events(&out.stdout);
    let review = events
        .iter()
        .find(|e| e["type"] == "review_done")
        .expect("a review_done event");
    assert_eq!(review["left_out"], json!(2));
    assert_eq!(review["files"], json!(1));
    assert_eq!(review["applied"], json!(true));
}

#[test]
fn a_build_folder_the_project_tracks_stays_in_the_patch() {
    let host = Host::git(&[
        ("build/gen.py", "VERSION = 1\n"),
        ("setup.cfg", "[metadata]\nname = m\n"),
    ]);
    let mock = MockServer::start(script(vec![
        write("build/gen.py", "VERSION = 2\n"),
        write("build/extra.py", "EXTRA = True\n"),
        // An untracked output folder below it is still an output.
        bash("mkdir -p build/__pycache__ && printf '\\0\\1' > build/__pycache__/gen.pyc"),
    ]));
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "auto", "bump the version"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(host.read("build/gen.py"), "VERSION = 2\n");
    assert_eq!(host.read("build/extra.py"), "EXTRA = True\n");
    assert!(!host.project.join("build/__pycache__").exists());
    let manifest = json_file(&host.run().join("manifest.json"));
    assert_eq!(manifest["patch"]["files"], json!(2));
    assert_eq!(manifest["left_out"], json!(["build/__pycache__/gen.pyc"]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("1 build/cache file left out of the patch"),
        "{stderr}"
    );
}
