//! The host git ah runs to apply and commit a patch, attacked through the
//! real binary (`--backend none`, a scripted mock model, a real host repo):
//! the repository's hooks (in `.git/hooks` or a tracked `core.hooksPath`)
//! call a tracked script the model rewrites to dump its environment, and an
//! fsmonitor program does the same; none of them may run. A filter driver
//! (a program git must still run) shows what environment git children get:
//! no API key. `GIT_DIR` and `GIT_INDEX_FILE` in ah's environment must not
//! redirect the apply.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::support::host::{Host, describe, git};
use crate::support::mock::MockServer;
use crate::support::steps::{script, write};

/// The API key ah runs with: it must never show up in a git child.
const CANARY_KEY: &str = "sk-ant-canary-4711";

/// Hooks git would run around an apply and a commit.
const HOOKS: [&str; 8] = [
    "pre-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "post-index-change",
    "reference-transaction",
    "pre-auto-gc",
    "post-rewrite",
];

/// Where hooks and programs leave their markers (outside the project).
fn markers(host: &Host) -> PathBuf {
    let dir = host.root.path().join("markers");
    std::fs::create_dir_all(&dir).expect("markers dir");
    dir
}

fn markers_left(host: &Host) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(markers(host))
        .expect("read markers")
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn executable(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// A host repo whose tracked `scripts/check.sh` every hook in `hooks_dir`
/// (relative to the project) calls, each hook leaving a marker first; an
/// fsmonitor program leaves one too.
fn hooked_host(hooks_dir: &str) -> Host {
    let host = Host::git(&[("a.txt", "one\n"), ("scripts/check.sh", "exit 0\n")]);
    let marks = markers(&host);
    for hook in HOOKS {
        executable(
            &host.project.join(hooks_dir).join(hook),
            &format!(
                "#!/bin/sh\nenv > '{}/{hook}.hook'\nsh scripts/check.sh {hook}\n",
                marks.display()
            ),
        );
    }
    let monitor = host.root.path().join("fsmonitor.sh");
    executable(
        &monitor,
        &format!("#!/bin/sh\nenv > '{}/fsmonitor'\n", marks.display()),
    );
    let monitor = monitor.display().to_string();
    git(&host.project, &["config", "core.fsmonitor", &monitor]);
    host
}

/// The model's attack: the tracked script the hooks call now dumps the
/// environment, API key included; and an ordinary edit.
fn attack(host: &Host) -> MockServer {
    let dump = format!("env > \"{}/$1.script\"\n", markers(host).display());
    MockServer::start(script(vec![
        write("scripts/check.sh", &dump),
        write("a.txt", "two\n"),
    ]))
}

fn run_auto(host: &Host, mock: &MockServer, extra: &[&str]) -> Output {
    host.ah(&mock.url())
        .env("ANTHROPIC_API_KEY", CANARY_KEY)
        .args(["--backend", "none", "--review", "auto"])
        .args(extra)
        .arg("change a")
        .output()
        .unwrap_or_else(|e| panic!("run ah: {e}"))
}

#[test]
fn ah_commit_runs_no_hook_and_no_fsmonitor_of_the_host_repo() {
    let host = hooked_host(".git/hooks");
    let mock = attack(&host);
    let out = run_auto(&host, &mock, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(
        host.git_out(&["log", "-1", "--format=%s"]).trim(),
        "ah: change a"
    );
    assert!(host.read("scripts/check.sh").contains("env >"));
    assert_eq!(markers_left(&host), Vec::<String>::new());
}

#[test]
fn ah_commit_runs_no_hook_from_a_tracked_hooks_path() {
    let host = hooked_host(".githooks");
    git(&host.project, &["config", "core.hooksPath", ".githooks"]);
    host.commit_all("hooks");
    // The fixture's own commit ran them: only what ah runs counts.
    std::fs::remove_dir_all(markers(&host)).expect("clear markers");
    let mock = attack(&host);
    let out = run_auto(&host, &mock, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(
        host.git_out(&["log", "-1", "--format=%s"]).trim(),
        "ah: change a"
    );
    assert_eq!(markers_left(&host), Vec::<String>::new());
}

#[test]
fn no_commit_apply_fires_no_post_index_change() {
    let host = hooked_host(".git/hooks");
    let mock = attack(&host);
    let out = run_auto(&host, &mock, &["--no-commit"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(host.read("a.txt"), "two\n");
    assert_eq!(host.git_out(&["log", "--format=%s"]).trim(), "initial");
    assert_eq!(markers_left(&host), Vec::<String>::new());
}

#[test]
fn git_children_never_see_ahs_api_key() {
    // A clean filter is a program the user configured and git must run:
    // it sees exactly the environment ah gives git.
    let host = Host::git(&[("a.txt", "one\n")]);
    let seen = markers(&host).join("filter.env");
    let filter = format!("sh -c 'env > \"{}\"; cat'", seen.display());
    git(&host.project, &["config", "filter.dump.clean", &filter]);
    host.write(".gitattributes", "*.txt filter=dump\n");
    // Cleaned again whatever a.txt's stat data says (git skips a file it
    // thinks unchanged, unless its time stamp is as recent as the index).
    git(&host.project, &["add", "--renormalize", "."]);
    host.commit_all("filter");
    std::fs::remove_file(&seen).expect("the fixture's own commit ran the filter");
    let mock = MockServer::start(script(vec![write("a.txt", "two\n")]));
    let out = host
        .ah(&mock.url())
        .env("ANTHROPIC_API_KEY", CANARY_KEY)
        .env("OPENAI_API_KEY", CANARY_KEY)
        .env("AH_UNRELATED_CANARY", "canary-value")
        .env("GIT_CONFIG_PARAMETERS", "'core.hookspath'='/nonexistent'")
        .args(["--backend", "none", "--review", "auto", "change a"])
        .output()
        .unwrap_or_else(|e| panic!("run ah: {e}"));
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let env = std::fs::read_to_string(&seen).expect("git ran the filter during the apply");
    assert!(env.contains("PATH="), "{env}");
    for absent in [
        CANARY_KEY,
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "canary-value",
        // (git passes its own `-c` options on as GIT_CONFIG_PARAMETERS.)
        "/nonexistent",
    ] {
        assert!(!env.contains(absent), "{absent} reached git:\n{env}");
    }
}

#[test]
fn git_dir_and_index_file_in_ahs_environment_do_not_redirect_the_apply() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let elsewhere = host.root.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).expect("mkdir");
    git(&elsewhere, &["init", "-q", "-b", "main"]);
    let index = host.root.path().join("stray-index");
    let mock = MockServer::start(script(vec![write("a.txt", "two\n")]));
    let out = host
        .ah(&mock.url())
        .env("GIT_DIR", elsewhere.join(".git"))
        .env("GIT_WORK_TREE", &elsewhere)
        .env("GIT_INDEX_FILE", &index)
        .env("GIT_OBJECT_DIRECTORY", elsewhere.join("objects"))
        .args(["--backend", "none", "--review", "auto", "change a"])
        .output()
        .unwrap_or_else(|e| panic!("run ah: {e}"));
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(host.read("a.txt"), "two\n");
    assert_eq!(
        host.git_out(&["log", "-1", "--format=%s"]).trim(),
        "ah: change a"
    );
    assert_eq!(host.git_out(&["status", "--porcelain"]), "");
    assert!(!index.exists(), "an index was written at GIT_INDEX_FILE");
    assert!(!elsewhere.join("objects").exists());
    assert_eq!(
        git(&elsewhere, &["count-objects"]).trim(),
        "0 objects, 0 kilobytes"
    );
    assert!(!elsewhere.join(".git/index").exists());
}
