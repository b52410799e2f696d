//! An OpenAI-API model driving a real podman sandbox: `apply_patch` edits
//! the work copy from the host side, the container sees the result (mode
//! bits included) and runs it, and the reviewed patch reaches the host.
//!
//! Skipped only when podman is absent and `AH_REQUIRE_PODMAN` is unset (see
//! `support::podman`).

use crate::support::host::{Host, describe, json_file};
use crate::support::mock::{MockServer, Reply, Turn};
use crate::support::podman::podman_ready_blocking;
use serde_json::json;

#[test]
fn apply_patch_in_the_sandbox_keeps_modes_and_reaches_the_host() {
    if podman_ready_blocking().is_none() {
        return;
    }
    let host = Host::git(&[("bin/run.sh", "#!/bin/sh\necho old\n")]);
    std::process::Command::new("chmod")
        .args(["+x", "bin/run.sh"])
        .current_dir(&host.project)
        .status()
        .unwrap_or_else(|e| panic!("chmod: {e}"));
    host.commit_all("executable");
    let patch = "*** Begin Patch\n\
        *** Update File: /work/bin/run.sh\n #!/bin/sh\n-echo old\n+echo new from the patch\n\
        *** Add File: notes.txt\n+made by apply_patch\n\
        *** End Patch";
    let mock = MockServer::start(vec![
        Turn::reply(Reply::new().tool_use("call_1", "apply_patch", json!({ "input": patch }))),
        Turn::reply(Reply::new().tool_use(
            "call_2",
            "bash",
            json!({"command": "./bin/run.sh && cat notes.txt"}),
        )),
        Turn::reply(Reply::new().text("Done.")),
    ]);
    let out = host
        .ah_openai(&mock.openai_url())
        .args([
            "--review",
            "auto",
            "-m",
            "openai:gpt-4.1",
            "update the script",
        ])
        .output()
        .unwrap_or_else(|e| panic!("run ah: {e}"));
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));

    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    let ran = requests[2].last_message();
    assert_eq!(ran["role"], json!("tool"), "{ran}");
    assert_eq!(ran["tool_call_id"], json!("call_2"), "{ran}");
    let told = ran["content"].as_str().unwrap_or_default();
    assert!(
        told.contains("new from the patch") && told.contains("made by apply_patch"),
        "{told}"
    );
    assert_eq!(
        host.read("bin/run.sh"),
        "#!/bin/sh\necho new from the patch\n"
    );
    assert_eq!(host.read("notes.txt"), "made by apply_patch\n");
    // The script kept its executable bit: no mode change left uncommitted.
    assert_eq!(host.git_out(&["status", "--porcelain"]), "");
    let mode = host.git_out(&["ls-files", "-s", "bin/run.sh"]);
    assert!(mode.starts_with("100755"), "{mode}");
    let manifest = json_file(&host.run().join("manifest.json"));
    assert_eq!(manifest["backend"], json!("podman"));
    assert_eq!(manifest["model"], json!("openai:gpt-4.1"));
    assert_eq!(manifest["applied"], json!(true));
}
