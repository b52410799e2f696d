//! Secrets in the project, proved through the real binary on both backends
//! (issue 13 §6): a git-ignored `.env` holding the API key and an SSH key
//! are withheld from the work copy, so no command the model runs reaches
//! them, however it looks (`cat`, `rev`, which gets past the redaction of
//! the exact key, `find /`, the project's own path); the model, the
//! terminal and the manifest are told which files were withheld; `[read]
//! allow` in the user's own `--policy` re-admits a template (and the run
//! says so), while a project's `.ah/policy.toml` can only add to the read
//! policy. With `--backend none`, ah's own environment and memory are out
//! of reach of the commands it runs, and their environment holds no key.

use std::path::Path;
use std::process::Output;

use crate::support::host::{Host, describe, json_file};
use crate::support::mock::MockServer;
use crate::support::podman::{TestUser, podman_ready_blocking};
use crate::support::steps::{bash, script};
use serde_json::json;

/// The API key the test harness gives ah (`Host::ah`), and how a command
/// that reverses it would print it.
const KEY: &str = "test-key";
const KEY_REVERSED: &str = "yek-tset";

/// What the model is told of the withheld files.
const NOTE: &str = "[ah: these files were withheld from the work copy by the read policy: \
                    .env, id_rsa (ask the user if you need them)]";

/// A git project whose ignored `.env` holds the API key, with an SSH key
/// pair and a `.env.example` template, and the user's own policy file
/// ([`user_policy`]) that re-admits it.
fn project_with_secrets() -> Host {
    let host = Host::git(&[
        (".gitignore", ".env\nid_rsa\n"),
        ("src/main.rs", "fn main() {}\n"),
        (".env.example", "ANTHROPIC_API_KEY=put-yours-here\n"),
        ("id_rsa.pub", "ssh-ed25519 AAAA public\n"),
    ]);
    host.write(".env", &format!("ANTHROPIC_API_KEY={KEY}\n"));
    host.write("id_rsa", &format!("-----BEGIN PRIVATE KEY-----\n{KEY}\n"));
    std::fs::write(
        user_policy(&host),
        "[read]\nallow = [\"**/.env.example\"]\n",
    )
    .unwrap();
    host
}

/// The user's own policy file (outside the project).
fn user_policy(host: &Host) -> std::path::PathBuf {
    host.home.join("policy.toml")
}

/// Commands that look for the secrets in the work copy.
const LOOK: &str = "cat .env; rev .env; rev id_rsa; cat .env.example; \
                    find . \\( -name '.env*' -o -name 'id_rsa*' \\) | sort; true";

/// Runs ah on `host` with `backend` and the steps `look` (bash) then a
/// `read` of `.env`; checks what every backend must show and returns the
/// bash step's result.
fn run_and_check(host: &Host, backend: &str, look: &str) -> String {
    let mock = MockServer::start(script(vec![
        bash(look),
        ("read", json!({ "path": ".env" })),
    ]));
    let out = host
        .ah(&mock.url())
        .args(["--backend", backend, "--review", "never", "look around"])
        .arg("--policy")
        .arg(user_policy(host))
        .output()
        .unwrap_or_else(|e| panic!("run ah: {e}"));
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "the read policy lets into the sandbox what it withholds by default: \
                         allow +**/.env.example"
        ),
        "{stderr}"
    );
    check_told_and_recorded(host, &mock, &out);
    mock.requests()[1].told()
}

/// What the model, the terminal and the run record say of the withheld
/// files, and that the model never saw them.
fn check_told_and_recorded(host: &Host, mock: &MockServer, out: &Output) {
    let requests = mock.requests();
    assert_eq!(requests.len(), 3, "{}", describe(out));
    let system = requests[0].body["system"].to_string();
    assert!(system.contains(NOTE), "{system}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("withheld from the work copy by the read policy: .env, id_rsa"),
        "{stderr}"
    );

    let look = requests[1].told();
    assert!(!look.contains(KEY_REVERSED), "the key got out:\n{look}");
    assert!(!look.contains("REDACTED"), "the key was there:\n{look}");
    assert!(look.contains(".env: No such file or directory"), "{look}");
    assert!(look.contains("put-yours-here"), "allowed template:\n{look}");
    let found: Vec<&str> = look.lines().filter(|l| l.starts_with("./")).collect();
    assert_eq!(found, ["./.env.example", "./id_rsa.pub"], "{look}");
    let read = requests[2].told();
    assert!(!read.contains(KEY) && !read.contains("REDACTED"), "{read}");

    let run = host.run();
    let manifest = json_file(&run.join("manifest.json"));
    assert_eq!(
        manifest["withheld"],
        json!([".env", "id_rsa"]),
        "{manifest}"
    );
    let patch = std::fs::read_to_string(run.join("session.patch")).unwrap_or_default();
    assert!(
        !patch.contains(".env") && !patch.contains("id_rsa"),
        "{patch}"
    );
    assert_eq!(host.read(".env"), format!("ANTHROPIC_API_KEY={KEY}\n"));
}

#[test]
fn withheld_files_are_not_in_the_work_copy_with_backend_none() {
    let host = project_with_secrets();
    run_and_check(&host, "none", LOOK);
}

#[test]
fn withheld_files_are_nowhere_in_the_podman_sandbox() {
    if podman_ready_blocking().is_none() {
        return;
    }
    let host = project_with_secrets();
    let look = format!(
        "{LOOK}; cat /project/.env; \
         find / \\( -path /proc -o -path /sys \\) -prune -o \\( -name .env -o -name id_rsa \\) \
         -print 2>/dev/null; echo searched"
    );
    let told = run_and_check(&host, "podman", &look);
    assert!(
        told.contains("/project/.env: No such file or directory"),
        "{told}"
    );
    assert!(
        told.contains("searched") && !told.contains("/.env\n") && !told.contains("/id_rsa\n"),
        "{told}"
    );
}

/// Finds ah up the command's parent chain, reads its environment (twice:
/// as `$PPID` and by the pid found; reversed, past any redaction) and opens
/// its memory; then prints the command's own environment (reversed) and
/// open descriptors.
const PRY: &str = "p=$PPID; \
                   while [ \"$p\" -gt 1 ] && [ \"$(cat /proc/$p/comm)\" != ah ]; do \
                     p=$(cut -d' ' -f4 /proc/$p/stat); \
                   done; \
                   echo \"ah is $p, parent $PPID\"; \
                   cat /proc/$PPID/environ | rev; \
                   tr '\\0' '\\n' < /proc/$p/environ | rev; \
                   (exec 3< /proc/$p/mem) && echo \"memory opened\"; \
                   echo env:; env | rev; echo fds:; ls -l /proc/self/fd";

#[test]
fn with_backend_none_ah_is_out_of_reach_of_its_commands() {
    // A process of root has CAP_SYS_PTRACE and reads any process; the
    // protection is for a user's processes, so the run is a user's.
    let root = rustix::process::geteuid().is_root();
    let user = match root {
        true => match TestUser::from_env() {
            Some(user) => Some(user),
            None => {
                eprintln!("skipped: as root this needs AH_TEST_USER (CI sets it)");
                return;
            }
        },
        false => None,
    };
    let host = project_with_secrets();
    let mock = MockServer::start(script(vec![bash(PRY)]));
    let args = ["--backend", "none", "--review", "never", "pry"];
    // Everything the user touches must be reachable by it.
    let (_keep, out) = match &user {
        None => (None, host.ah(&mock.url()).args(args).output()),
        Some(user) => {
            let (dir, ah) = user.reachable_copy(Path::new(env!("CARGO_BIN_EXE_ah")));
            give(&host, user);
            let url = mock.url();
            let env = [
                ("ANTHROPIC_BASE_URL", url.as_str()),
                ("ANTHROPIC_API_KEY", KEY),
                ("NO_COLOR", "1"),
            ];
            let mut cmd = user.command(&ah, &env);
            cmd.arg("-C").arg(&host.project).args(args);
            (Some(dir), cmd.output())
        }
    };
    let out = out.unwrap_or_else(|e| panic!("run ah: {e}"));
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let told = mock.requests()[1].told();
    let first = told.lines().next().unwrap_or_default();
    let pids: Vec<&str> = first
        .strip_prefix("ah is ")
        .map(|rest| rest.split(", parent ").collect())
        .unwrap_or_default();
    assert!(
        pids.len() == 2 && pids[0] == pids[1] && pids[0] != "1",
        "the command's parent is ah:\n{told}"
    );
    assert!(
        told.contains("environ: Permission denied") && told.contains("mem: Permission denied"),
        "{told}"
    );
    assert!(!told.contains("memory opened"), "{told}");
    assert!(!told.contains(KEY_REVERSED), "the key got out:\n{told}");
    assert!(!told.contains("REDACTED"), "the key was there:\n{told}");
    assert!(!told.contains("YEK_IPA"), "an API key variable:\n{told}");
    // No descriptor of ah's (the session database, the run directory, the
    // lock, its sockets) is open in the command.
    let fds = told.split("fds:").nth(1).unwrap_or_default();
    for ah_side in [".ah/", ".db", "socket:"] {
        assert!(!fds.contains(ah_side), "{ah_side} is open:\n{fds}");
    }
    assert!(fds.contains("/proc/"), "ls ran:\n{told}");
}

/// Hands the project to `user` (ah writes `.ah/` in it).
fn give(host: &Host, user: &TestUser) {
    let status = std::process::Command::new("chown")
        .args(["-R", &format!("{0}:{0}", user.name)])
        .arg(host.root.path())
        .status()
        .unwrap_or_else(|e| panic!("chown: {e}"));
    assert!(status.success());
}
