//! What the user gives the agent besides the task, checked in the request
//! the mock model received: AGENTS.md / CLAUDE.md files in the system prompt,
//! skills listed there and loaded on demand, `/` commands expanded; plus the
//! shell completion scripts.

use crate::support::host::{Host, describe};
use crate::support::mock::{MockServer, Reply, Turn};
use serde_json::{Value, json};

fn answer() -> Vec<Turn> {
    vec![Turn::reply(Reply::new().text("ok"))]
}

/// The text blocks of the first user message.
fn user_texts(body: &Value) -> Vec<String> {
    body["messages"][0]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["text"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn system(body: &Value) -> String {
    match &body["system"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .map(|p| p["text"].as_str().unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n"),
        other => panic!("no system prompt: {other}"),
    }
}

#[test]
fn instruction_files_skills_and_commands_reach_the_model() {
    let host = Host::git(&[
        ("AGENTS.md", "Use tabs in this repository."),
        ("pkg/CLAUDE.md", "The pkg tests run with make check."),
        ("pkg/lib.txt", "x\n"),
    ]);
    let pkg = host.project.join("pkg");
    let write = |path: &std::path::Path, text: &str| {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        &pkg.join(".ah/skills/release/SKILL.md"),
        "---\nname: release\ndescription: Cut a release\n---\nBump the version first.\n",
    );
    write(
        &host.home.join(".config/ah/skills/db/SKILL.md"),
        "---\nname: db\ndescription: \"Migrations: how\"\n---\nNever edit old migrations.\n",
    );
    write(
        &host.home.join(".config/ah/skills/bad/SKILL.md"),
        "---\nname: bad\n",
    );
    write(
        &pkg.join(".ah/commands/fix.md"),
        "Fix issue $ARGUMENTS carefully.",
    );
    let mock = MockServer::start(answer());
    let out = host
        .ah(&mock.url())
        .args([
            "-C",
            pkg.to_str().unwrap(),
            "--backend",
            "none",
            "--review",
            "never",
        ])
        .args(["--skill", "db", "/fix #12 in the parser"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr
            .contains("skills/bad/SKILL.md skipped: the header opened with `---` is never closed"),
        "{stderr}"
    );

    let body = &mock.requests()[0].body;
    let system = system(body);
    let root_rules = system
        .find("## AGENTS.md\n\nUse tabs")
        .expect("root AGENTS.md");
    let pkg_rules = system
        .find("## pkg/CLAUDE.md\n\nThe pkg tests run with make check.")
        .expect("pkg CLAUDE.md");
    assert!(root_rules < pkg_rules, "outermost first");
    assert!(system.contains("- db: Migrations: how\n- release: Cut a release"));
    assert!(
        !system.contains("Bump the version"),
        "skill bodies load on demand"
    );

    let texts = user_texts(body);
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert_eq!(
        texts[0],
        "[ah: the user loaded the skill \"db\": Migrations: how]\n\nNever edit old migrations."
    );
    assert_eq!(texts[1], "Fix issue #12 in the parser carefully.");
}

#[test]
fn skill_prefix_loads_a_skill_before_the_rest_of_the_prompt() {
    let host = Host::git(&[("a.txt", "a\n")]);
    let skill = host.project.join(".ah/skills/r/SKILL.md");
    std::fs::create_dir_all(skill.parent().unwrap()).unwrap();
    std::fs::write(
        &skill,
        "---\nname: release\ndescription: Releases\n---\nTag it.",
    )
    .unwrap();
    let mock = MockServer::start(answer());
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "never"])
        .arg("/skill:release version 2.0")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let texts = user_texts(&mock.requests()[0].body);
    assert!(texts[0].ends_with("Tag it."), "{texts:?}");
    assert_eq!(texts[1], "version 2.0");
}

#[test]
fn an_unknown_command_is_a_usage_error_before_anything_runs() {
    let host = Host::git(&[("a.txt", "a\n")]);
    let commands = host.project.join(".ah/commands");
    std::fs::create_dir_all(&commands).unwrap();
    std::fs::write(commands.join("deploy.md"), "Deploy").unwrap();
    let mock = MockServer::start(answer());
    for (prompt, needle) in [
        (
            "/deplo now",
            "unknown command /deplo: the commands are /deploy, /review, /test",
        ),
        (
            "--skill=nope",
            "unknown skill \"nope\": there are no skills",
        ),
    ] {
        let mut cmd = host.ah(&mock.url());
        cmd.args(["--backend", "none", "--review", "never"]);
        if prompt.starts_with("--") {
            cmd.args([prompt, "task"]);
        } else {
            cmd.arg(prompt);
        }
        let out = cmd.output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(needle),
            "{}",
            describe(&out)
        );
    }
    assert!(mock.requests().is_empty());
    assert!(host.runs().is_empty(), "nothing was copied or run");
}

#[test]
fn a_double_slash_sends_the_prompt_as_written() {
    let host = Host::git(&[("a.txt", "a\n")]);
    let mock = MockServer::start(answer());
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "never", "//etc is odd"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(user_texts(&mock.requests()[0].body), ["/etc is odd"]);
    assert_eq!(
        mock.requests()[0].body["messages"][0]["role"],
        json!("user")
    );
}

#[test]
fn completion_scripts_for_bash_zsh_and_fish() {
    let host = Host::plain(&[]);
    for (shell, marker, flag) in [
        ("bash", "complete -F _ah", "--skill"),
        ("zsh", "#compdef ah", "--skill="),
        ("fish", "complete -c ah", "-l skill"),
    ] {
        let out = host
            .ah("http://127.0.0.1:9")
            .args(["completions", shell])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        let script = String::from_utf8_lossy(&out.stdout);
        assert!(script.contains(marker), "{shell}: {script}");
        assert!(script.contains(flag), "{shell} completes run flags");
    }
}
