//! A violating step that cannot be undone poisons the run: no more tools
//! run, the agent stops, the patch is never applied (not by the review, not
//! by `ah apply`), and the manifest says why. The undo is made to fail with
//! `chattr +i` (immutable, binding even root), so this needs root and a file
//! system with attributes; it skips otherwise.

use std::path::Path;
use std::process::Command;

use crate::support::host::{Host, describe, json_file, query};
use crate::support::mock::{MockServer, Reply, Turn};
use serde_json::json;

fn chattr_works(dir: &Path) -> bool {
    let probe = dir.join("chattr-probe");
    std::fs::write(&probe, "x").unwrap();
    let ok = Command::new("chattr")
        .arg("+i")
        .arg(&probe)
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        let _ = Command::new("chattr").arg("-i").arg(&probe).status();
    }
    let _ = std::fs::remove_file(&probe);
    ok
}

/// Makes every immutable file under `dir` mutable again, so the temp dir
/// can be removed.
fn release(dir: &Path) {
    let _ = Command::new("chattr").arg("-R").arg("-i").arg(dir).status();
}

#[test]
fn an_undo_that_fails_poisons_the_run_and_its_patch_is_never_applied() {
    let host = Host::git(&[("a.txt", "one\n")]);
    if !chattr_works(host.root.path()) {
        assert!(
            std::env::var_os("CI").is_none(),
            "chattr must work in CI (root on ext4)"
        );
        eprintln!("skipping: chattr +i is not available here");
        return;
    }
    let mock = MockServer::start(vec![
        Turn::reply(Reply::new().tool_use(
            "toolu_1",
            "write",
            json!({"path": "a.txt", "content": "two\n"}),
        )),
        Turn::reply(
            Reply::new()
                .tool_use(
                    "toolu_2",
                    "bash",
                    json!({"command": "echo SECRET=1 > .env && chattr +i .env"}),
                )
                .tool_use("toolu_3", "bash", json!({"command": "echo more > b.txt"})),
        ),
    ]);
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "auto", "poison"])
        .output()
        .unwrap();
    release(host.root.path());
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("must not be applied"), "{stderr}");
    assert_eq!(
        mock.requests().len(),
        2,
        "the agent stops: no request after the poisoning"
    );
    assert_eq!(host.read("a.txt"), "one\n", "nothing applied");
    assert!(!host.project.join("b.txt").exists());

    let run = host.run();
    let manifest = json_file(&run.join("manifest.json"));
    assert!(
        manifest["poisoned"].as_str().is_some_and(|p| !p.is_empty()),
        "{manifest}"
    );
    assert_eq!(manifest["applied"], json!(false));
    assert_eq!(manifest["review"]["decision"], json!("refused"));
    let results = query(
        &host.sessions()[0],
        "SELECT tool_id, content FROM content_blocks WHERE block_type = 'tool_result' ORDER BY tool_id",
    );
    assert_eq!(results.len(), 3, "every call answered");
    assert!(
        results[1][1].as_str().unwrap().contains("NOT undone"),
        "{:?}",
        results[1]
    );
    assert!(
        results[2][1].as_str().unwrap().contains("not run"),
        "{:?}",
        results[2]
    );

    let run_id = run.file_name().unwrap().to_str().unwrap().to_string();
    let again = host
        .ah(&mock.url())
        .args(["apply", &run_id, "--force"])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(1), "{}", describe(&again));
    assert!(String::from_utf8_lossy(&again.stderr).contains("must not be applied"));
    assert_eq!(host.read("a.txt"), "one\n");
}
