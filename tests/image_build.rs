//! `ah image build` through the real binary and real podman, piped (no
//! terminal): stderr carries the phase lines and where the full log is,
//! never the build tool's output, which goes to the log. A proxy that
//! refuses every connection makes the registry build fail within seconds,
//! so the test costs no image build; skipped without podman.

use std::process::Command;

#[test]
fn piped_a_build_shows_phases_and_logs_the_output() {
    if which::which("podman").is_err() {
        let required = std::env::var("AH_REQUIRE_PODMAN").is_ok_and(|v| !v.is_empty() && v != "0");
        assert!(
            !required,
            "AH_REQUIRE_PODMAN is set but podman is not installed"
        );
        eprintln!("skipped: podman is not installed");
        return;
    }
    let cache = tempfile::tempdir().unwrap();
    let refused = "http://127.0.0.1:9";
    let out = Command::new(env!("CARGO_BIN_EXE_ah"))
        .args(["image", "build", "--registry"])
        .args(["--image", "localhost/ah-test-never-built:latest"])
        .env("XDG_CACHE_HOME", cache.path())
        .env("NO_COLOR", "1")
        .env_remove("NO_PROXY")
        .env_remove("no_proxy")
        .env("HTTPS_PROXY", refused)
        .env("https_proxy", refused)
        .env("HTTP_PROXY", refused)
        .env("http_proxy", refused)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");

    let logs: Vec<_> = std::fs::read_dir(cache.path().join("ah"))
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    assert_eq!(logs.len(), 1, "{logs:?}");
    let log_path = &logs[0];
    let name = log_path.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with("image-build-") && name.ends_with(".log"),
        "{name}"
    );
    let log = std::fs::read_to_string(log_path).unwrap();

    // Before the error: the log's path and the phase, nothing of podman's.
    let (progress, error) = stderr.split_once("ah: ").expect("an error line");
    assert_eq!(
        progress,
        format!(
            "image: the build's full log is {}\nimage: podman build (1/1)\n",
            log_path.display()
        )
    );
    assert!(
        error.contains("podman build failed")
            && error.contains(&format!("the build's full log: {}", log_path.display())),
        "{error}"
    );
    // The log has the phase and every line podman printed.
    assert!(
        log.starts_with("== image: podman build (1/1) ==\nSTEP 1/"),
        "{log}"
    );
    let podman_lines = log.lines().skip(1).count();
    assert!(podman_lines >= 2, "{log}");
}
