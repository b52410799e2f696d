//! The files ah reads for itself from the project, attacked through the real
//! binary (`--backend none`; the reader is the same for every backend): a
//! prompt override, instruction file, agent, skill, command, tool,
//! configuration or policy file that is a link out of the project, a link
//! to a file the read policy withholds or into `.git`, a device, a `/proc`
//! file or simply huge. Each is refused with an error (or a warning where
//! the file is optional) naming it, ah stays small, and nothing of the
//! secrets reaches the model.

use std::os::unix::fs::symlink;
use std::process::Output;
use std::time::{Duration, Instant};

use crate::support::host::{Host, describe};
use crate::support::mock::{MockServer, Reply, Turn};

/// What a secret in the project or ah's own environment looks like.
const SECRET: &str = "ghp_0wnedTokenValue1234567890";

fn answer() -> Vec<Turn> {
    vec![Turn::reply(Reply::new().text("ok"))]
}

/// A project holding secrets: a `.env`, a clone token in `.git/config`.
fn host() -> Host {
    let host = Host::git(&[("README.md", "hello\n")]);
    host.write(".env", &format!("GITHUB_TOKEN={SECRET}\n"));
    let config = host.project.join(".git/config");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!(
        "[remote \"origin\"]\n\turl = https://x-access-token:{SECRET}@github.com/o/r\n"
    ));
    std::fs::write(&config, text).unwrap();
    std::fs::create_dir_all(host.project.join(".ah/sys")).unwrap();
    host
}

/// Runs `ah` on `host` with `args`, a secret in its environment; its output
/// and every request the model got (as text), bounded in time.
fn run(host: &Host, args: &[&str]) -> (Output, String) {
    let mock = MockServer::start(answer());
    let started = Instant::now();
    let out = host
        .ah(&mock.url())
        .env("GITHUB_TOKEN", SECRET)
        .args(["--backend", "none", "--review", "never"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "ah took {:?}",
        started.elapsed()
    );
    let sent: Vec<String> = mock
        .requests()
        .iter()
        .map(|request| request.body.to_string())
        .collect();
    (out, sent.join("\n"))
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The run stopped before asking the model, naming `file` and `why`.
fn refused(out: &Output, sent: &str, file: &str, why: &str) {
    assert_ne!(out.status.code(), Some(0), "{}", describe(out));
    let err = stderr(out);
    assert!(
        err.contains(file) && err.contains(why),
        "{file}: {why}\n{err}"
    );
    assert!(!sent.contains(SECRET), "the secret reached the model");
    assert!(!err.contains(SECRET), "the secret was printed: {err}");
}

/// The run went on without the file, warning with `file` and `why`.
fn skipped(out: &Output, sent: &str, file: &str, why: &str) {
    assert_eq!(out.status.code(), Some(0), "{}", describe(out));
    let err = stderr(out);
    assert!(
        err.contains(file) && err.contains(why),
        "{file}: {why}\n{err}"
    );
    assert!(!sent.is_empty(), "the model was asked");
    assert!(!sent.contains(SECRET), "the secret reached the model");
}

#[test]
fn a_prompt_override_linking_to_proc_is_refused() {
    let host = host();
    symlink("/proc/self/environ", host.project.join(".ah/sys/system.md")).unwrap();
    let (out, sent) = run(&host, &["say hi"]);
    refused(&out, &sent, ".ah/sys/system.md", "out of the project");
    assert!(sent.is_empty());
}

#[test]
fn instruction_files_linking_to_secrets_inside_the_project_are_not_sent() {
    for target in [".env", ".git/config"] {
        let host = host();
        symlink(target, host.project.join("AGENTS.md")).unwrap();
        let (out, sent) = run(&host, &["say hi"]);
        skipped(&out, &sent, "AGENTS.md", "not sent to the model");
        assert!(!sent.contains("Project instructions"), "{target}");
    }
}

#[test]
fn an_agent_file_linking_to_the_env_file_is_refused() {
    let host = host();
    std::fs::create_dir_all(host.project.join(".ah/agents")).unwrap();
    symlink("../../.env", host.project.join(".ah/agents/lead.md")).unwrap();
    let mock = MockServer::start(answer());
    let out = host
        .ah(&mock.url())
        .args(["org", "--backend", "none", "--review", "never"])
        .args(["--agents", "lead", "plan it"])
        .output()
        .unwrap();
    let sent: Vec<String> = mock.requests().iter().map(|r| r.body.to_string()).collect();
    refused(&out, &sent.join("\n"), "lead.md", "withholds");
}

#[test]
fn devices_and_proc_files_are_refused_without_reading_them() {
    let cases = [
        (".ah/config.toml", "/dev/zero", "not a regular file"),
        (".ah/policy.toml", "/dev/zero", "not a regular file"),
        (".ah/sys/claude.md", "/dev/zero", "not a regular file"),
        (".ah/sys/compact.md", "/dev/urandom", "not a regular file"),
    ];
    for (file, target, why) in cases {
        let host = host();
        let path = host.project.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        symlink(target, &path).unwrap();
        let (out, sent) = run(&host, &["say hi"]);
        refused(&out, &sent, file, "out of the project");
        // A device the project ships itself (as root can make one).
        std::fs::remove_file(&path).unwrap();
        let made = std::process::Command::new("mknod")
            .arg(&path)
            .args(["c", "1", "5"])
            .status()
            .unwrap();
        if made.success() {
            let (out, sent) = run(&host, &["say hi"]);
            refused(&out, &sent, file, why);
        }
    }
}

#[test]
fn a_skill_linking_to_proc_is_skipped_and_the_run_goes_on() {
    let host = host();
    std::fs::create_dir_all(host.project.join(".ah/skills/pages")).unwrap();
    symlink(
        "/proc/self/pagemap",
        host.project.join(".ah/skills/pages/SKILL.md"),
    )
    .unwrap();
    let (out, sent) = run(&host, &["say hi"]);
    skipped(&out, &sent, "SKILL.md", "out of the project");
}

#[test]
fn a_command_or_tool_linking_to_a_withheld_file_is_refused() {
    let host = host();
    std::fs::create_dir_all(host.project.join(".ah/commands")).unwrap();
    symlink("../../.env", host.project.join(".ah/commands/leak.md")).unwrap();
    let (out, sent) = run(&host, &["/leak now"]);
    refused(&out, &sent, "leak.md", "withholds");

    let host = self::host();
    std::fs::create_dir_all(host.project.join(".ah/tools")).unwrap();
    symlink("../../.env", host.project.join(".ah/tools/leak.toml")).unwrap();
    let (out, sent) = run(&host, &["say hi"]);
    refused(&out, &sent, "leak.toml", "withholds");
}

#[test]
fn huge_files_are_refused_by_their_size() {
    let host = host();
    let huge = "x".repeat(2 * 1024 * 1024);
    host.write("AGENTS.md", &huge);
    let (out, sent) = run(&host, &["say hi"]);
    skipped(&out, &sent, "AGENTS.md", "larger than 1 MiB");
    std::fs::remove_file(host.project.join("AGENTS.md")).unwrap();

    host.write(".ah/config.toml", &format!("# {huge}\n"));
    let (out, sent) = run(&host, &["say hi"]);
    refused(&out, &sent, ".ah/config.toml", "larger than 1 MiB");
}

#[test]
fn links_inside_the_project_still_work() {
    let host = host();
    host.write("docs/agents.md", "Run make check before you finish.");
    symlink("docs/agents.md", host.project.join("AGENTS.md")).unwrap();
    host.write("docs/prompt.md", "You are a careful agent. {{workspace}}");
    symlink(
        "../../docs/prompt.md",
        host.project.join(".ah/sys/system.md"),
    )
    .unwrap();
    let (out, sent) = run(&host, &["say hi"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(sent.contains("Run make check before you finish."), "{sent}");
    assert!(sent.contains("You are a careful agent."), "{sent}");
}
