//! The project's own tools (`.ah/tools/NAME.toml`) through the real binary:
//! a new tool and one that replaces `bash`, offered with where they come
//! from; the input on stdin and stdout as the result; every call a step
//! (recorded, and undone when it writes a denied path); schemas with
//! `oneOf` and `$ref` checked before anything runs; `ah config` lists
//! them; a text-protocol model calls them with `##tool` blocks; with
//! podman the command runs in the container, in /work; the model learns
//! where a tool was declared without a path of the host's.

use crate::support::host::{Host, describe};
use crate::support::mock::MockServer;
use crate::support::org::{call, say};
use crate::support::podman::podman_ready_blocking;
use serde_json::json;

const SHOUT: &str = "description = \"Says the words louder\"\n\
    command = \"tr a-z A-Z > shouted.txt; cat shouted.txt\"\n\
    [input_schema]\ntype = \"object\"\nrequired = [\"words\"]\n\
    additionalProperties = false\nproperties = { words = { type = \"string\" } }\n";

/// A `bash` that is the project's: it says so and runs nothing.
const BASH: &str = "description = \"The project's careful shell\"\n\
    command = \"echo project-bash-saw; cat\"\n\
    [input_schema]\ntype = \"object\"\nrequired = [\"command\"]\n\
    properties = { command = { type = \"string\" } }\n";

/// A tool whose input is a target by name or by address (`oneOf`, `$ref`).
const DEPLOY: &str = r##"description = "Deploys"
command = "cat > deployed.json"
[input_schema]
type = "object"
required = ["target"]
additionalProperties = false
"$defs" = { port = { type = "integer", minimum = 1, maximum = 65535 } }
[input_schema.properties.target]
oneOf = [
  { type = "string", pattern = "^[a-z]+$" },
  { type = "object", required = ["host", "port"], additionalProperties = false, properties = { host = { type = "string" }, port = { "$ref" = "#/$defs/port" } } },
]
"##;

fn project() -> Host {
    let host = Host::git(&[("README.md", "hello\n")]);
    for (name, text) in [("shout", SHOUT), ("bash", BASH), ("deploy", DEPLOY)] {
        std::fs::create_dir_all(host.project.join(".ah/tools")).unwrap();
        std::fs::write(host.project.join(format!(".ah/tools/{name}.toml")), text).unwrap();
    }
    host
}

#[test]
fn project_tools_are_offered_run_as_steps_and_checked() {
    let host = project();
    let mock = MockServer::start(vec![
        call("t1", "shout", json!({"words": "hello there"})),
        call("t2", "bash", json!({"command": "rm -rf /"})),
        call("t3", "deploy", json!({"target": {"host": "a", "port": 0}})),
        call("t4", "deploy", json!({"target": "prod"})),
        say("done"),
    ]);
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "auto", "use the tools"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("tool bash: the one declared in") && stderr.contains("replaces ah's own"),
        "{stderr}"
    );
    let requests = mock.requests();
    let tools = requests[0].body["tools"].as_array().unwrap().clone();
    let named = |name: &str| tools.iter().filter(|t| t["name"] == name).count();
    assert_eq!(named("bash"), 1, "one bash, the project's");
    let bash = tools.iter().find(|t| t["name"] == "bash").unwrap();
    assert!(
        bash["description"]
            .as_str()
            .unwrap()
            .contains("The project's careful shell")
            && bash["description"]
                .as_str()
                .unwrap()
                .contains(".ah/tools/bash.toml"),
        "{bash}"
    );
    assert_eq!(named("shout"), 1);
    assert_eq!(named("read"), 1);
    // The input on stdin, stdout back; the file it wrote is the run's.
    assert_eq!(requests[1].told(), "{\"WORDS\":\"HELLO THERE\"}");
    assert!(
        requests[2].told().starts_with("project-bash-saw"),
        "{}",
        requests[2].told()
    );
    // oneOf with a $ref: every reason, nothing run.
    let refused = requests[3].told();
    assert!(
        refused.starts_with(
            "invalid input for deploy: field \"target\" matches none of its 2 allowed forms"
        ),
        "{refused}"
    );
    assert!(
        refused.contains("field \"target.port\" must be at least 1, got 0"),
        "{refused}"
    );
    assert!(
        !requests[4].told().contains("invalid"),
        "{}",
        requests[4].told()
    );
    assert_eq!(host.read("shouted.txt"), "{\"WORDS\":\"HELLO THERE\"}");
    assert_eq!(host.read("deployed.json"), "{\"target\":\"prod\"}");
    // Steps like any other.
    let run = host.run();
    let step = crate::support::host::json_file(&run.join("steps/step-1.meta.json"));
    assert_eq!(step["tool"], json!("shout"));
}

#[test]
fn a_project_tool_writing_a_denied_path_is_undone() {
    let host = project();
    std::fs::write(
        host.project.join(".ah/tools/leak.toml"),
        "description = \"Writes where it should not\"\ncommand = \"cat >/dev/null; echo x > secret.txt; echo ok > fine.txt\"\n",
    )
    .unwrap();
    let mock = MockServer::start(vec![call("t1", "leak", json!({})), say("done")]);
    let out = host
        .ah(&mock.url())
        .args([
            "--backend",
            "none",
            "--review",
            "auto",
            "--deny",
            "secret.txt",
            "leak",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let told = mock.requests()[1].told();
    assert!(told.contains("secret.txt"), "the model is told: {told}");
    assert!(!host.project.join("secret.txt").exists());
    assert!(
        !host.project.join("fine.txt").exists(),
        "the whole step is undone"
    );
}

#[test]
fn ah_config_lists_each_tool_and_where_it_comes_from() {
    let host = project();
    let out = host
        .ah("http://127.0.0.1:9")
        .arg("config")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("# tools\n"), "{stdout}");
    assert!(stdout.contains("read = \"ah\""), "{stdout}");
    assert!(!stdout.contains("bash = \"ah\""), "{stdout}");
    assert!(
        stdout.contains(".ah/tools/bash.toml\"  # The project's careful shell"),
        "{stdout}"
    );
    assert!(
        stdout.contains(".ah/tools/shout.toml\"  # Says the words louder"),
        "{stdout}"
    );
    // A broken tool file stops a run before anything starts.
    std::fs::write(host.project.join(".ah/tools/broken.toml"), "command = 1\n").unwrap();
    let mock = MockServer::start(vec![]);
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "go"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("broken.toml"));
    assert!(mock.requests().is_empty());
}

#[test]
fn with_podman_project_tools_run_in_the_container_and_a_denied_write_is_undone() {
    if podman_ready_blocking().is_none() {
        return;
    }
    let host = Host::git(&[("README.md", "hello\n")]);
    std::fs::create_dir_all(host.project.join(".ah/tools")).unwrap();
    std::fs::write(
        host.project.join(".ah/tools/where.toml"),
        "description = \"Says where it runs\"\ncommand = \"cat >/dev/null; pwd; echo made > made.txt\"\n",
    )
    .unwrap();
    // The project's own bash, which writes a denied path.
    std::fs::write(
        host.project.join(".ah/tools/bash.toml"),
        "description = \"A shell that leaks\"\ncommand = \"cat >/dev/null; echo x > secret.txt\"\n",
    )
    .unwrap();
    let mock = MockServer::start(vec![
        call("t1", "where", json!({})),
        call("t2", "bash", json!({})),
        say("done"),
    ]);
    let out = host
        .ah(&mock.url())
        .args(["--review", "auto", "--deny", "secret.txt", "where are you"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let requests = mock.requests();
    // On the host the work copy has a path of its own: /work is the
    // container's.
    assert_eq!(requests[1].told(), "/work\n");
    assert!(
        requests[2].told().contains("secret.txt"),
        "{}",
        requests[2].told()
    );
    assert_eq!(host.read("made.txt"), "made\n");
    assert!(!host.project.join("secret.txt").exists());
    host.assert_unnamed_in(&requests);
}

#[test]
fn the_model_is_told_where_a_tool_comes_from_without_a_host_path() {
    let host = project();
    let users = host.home.join(".config/ah/tools");
    std::fs::create_dir_all(&users).unwrap();
    std::fs::write(
        users.join("greet.toml"),
        "description = \"Says hello\"\ncommand = \"cat >/dev/null; echo hello\"\n",
    )
    .unwrap();
    let mock = MockServer::start(vec![call("t1", "greet", json!({})), say("done")]);
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "never", "greet"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let requests = mock.requests();
    let description = |name: &str| {
        requests[0].body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .and_then(|t| t["description"].as_str())
            .unwrap_or_else(|| panic!("no tool {name}"))
            .to_string()
    };
    assert!(
        description("shout")
            .ends_with("(A tool declared in .ah/tools/shout.toml; it runs in /work.)"),
        "{}",
        description("shout")
    );
    assert!(
        description("greet").ends_with(
            "(A tool declared in the user's own tools folder (greet.toml); it runs in /work.)"
        ),
        "{}",
        description("greet")
    );
    assert_eq!(requests[1].told(), "hello\n");
    host.assert_unnamed_in(&requests);
    // People still see where the file is.
    let listed = host.ah(&mock.url()).arg("config").output().unwrap();
    let stdout = String::from_utf8_lossy(&listed.stdout);
    assert!(
        stdout.contains(&format!("{}", users.join("greet.toml").display())),
        "{stdout}"
    );
}

#[test]
fn a_text_protocol_model_calls_a_project_tool_with_a_tool_block() {
    let host = project();
    let reply = "Shouting.\n##tool shout\n```json\n{\"words\": \"quiet please\"}\n```\n\
                 ##tool deploy\n```json\n{\"target\": \"Prod!\"}\n```\n";
    let mock = MockServer::start(vec![say(reply), say("Done.")]);
    let out = host
        .ah_openai(&mock.openai_url())
        .env("AH_TOOL_PROTOCOL", "text")
        .args([
            "--backend",
            "none",
            "--review",
            "auto",
            "-m",
            "ollama:coder",
            "shout",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let requests = mock.requests();
    let system = requests[0].messages()[0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(system.contains("##tool NAME"), "{system}");
    assert!(
        system.contains("- shout: Says the words louder"),
        "{system}"
    );
    assert!(system.contains("\"required\":[\"words\"]"), "{system}");
    // The project's bash is no `##run`: it is called as the tool it is.
    assert!(!system.contains("write a line `##run`"), "{system}");
    assert!(
        system.contains("- bash: The project's careful shell"),
        "{system}"
    );
    assert!(system.contains("write a line `##file:PATH`"), "{system}");
    let last = requests[1].messages().last().cloned().unwrap_or_default();
    let results = last["content"].as_str().unwrap_or_default();
    assert!(
        results.contains("1. ##tool shout: done")
            && results.contains("{\"WORDS\":\"QUIET PLEASE\"}"),
        "{results}"
    );
    assert!(
        results.contains("2. ##tool deploy: failed")
            && results.contains("matches none of its 2 allowed forms"),
        "{results}"
    );
    assert_eq!(host.read("shouted.txt"), "{\"WORDS\":\"QUIET PLEASE\"}");
}
