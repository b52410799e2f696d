//! Step rules on a real run (none backend, real git): a read-only step's
//! changes are undone and recorded, refused tools change nothing, and a host
//! tool gets only input its schema accepts.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::*;
use crate::run::tests::fixture;
use ah_llm::models::EditFormat;

/// A host tool that keeps the inputs it was called with.
#[derive(Default)]
struct Echo {
    calls: Mutex<Vec<Value>>,
}

impl HostTool for Echo {
    fn spec(&self) -> ToolDef {
        ToolDef {
            name: "echo".to_string(),
            description: "test".to_string(),
            input_schema: json!({
                "type": "object",
                "properties": {"word": {"type": "string", "enum": ["yes", "no"]}},
                "required": ["word"],
                "additionalProperties": false
            }),
        }
    }

    fn call(&self, input: &Value) -> ToolOutput {
        self.calls.lock().unwrap().push(input.clone());
        ToolOutput::error("called")
    }
}

#[tokio::test]
async fn a_read_only_step_that_changes_work_is_undone_and_recorded() {
    let mut f = fixture();
    f.run.set_rules(StepRules::read_only());
    let outcome = f
        .run
        .tool_step(
            "bash",
            &json!({"command": "echo x >> src/lib.rs && touch new.txt"}),
        )
        .await;
    let violation = outcome.violation.expect("a violation");
    assert!(violation.starts_with("step undone"), "{violation}");
    assert!(violation.contains("\"new.txt\" was changed while /work is read-only"));
    assert!(violation.contains("\"src/lib.rs\""), "{violation}");
    assert!(!f.work.join("new.txt").exists());
    assert_eq!(
        std::fs::read_to_string(f.work.join("src/lib.rs")).unwrap(),
        "fn main() {}\n"
    );
    assert_eq!(f.run.head, f.run.baseline);
    assert_eq!(f.run.violations.len(), 2);

    // Reading is fine; writing tools are refused without running.
    let read = f.run.tool_step("cat", &json!({})).await;
    assert!(read.output.content.contains("not available"), "{read:?}");
    let write = f
        .run
        .tool_step("write", &json!({"path": "w.txt", "content": "x"}))
        .await;
    assert!(write.output.is_error);
    assert!(
        write
            .output
            .content
            .contains("/work is read-only in this phase"),
        "{}",
        write.output.content
    );
    assert!(!f.work.join("w.txt").exists());
    let names: Vec<String> = f
        .run
        .tool_specs(ah_llm::models::EditFormat::Edit)
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names, ["read", "bash"]);

    // Back to read-write: the same command stands.
    f.run.set_rules(StepRules::read_write());
    let outcome = f
        .run
        .tool_step("bash", &json!({"command": "touch new.txt"}))
        .await;
    assert!(
        outcome.commit.is_some() && outcome.violation.is_none(),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn a_host_tool_is_offered_and_called_only_with_valid_input() {
    let mut f = fixture();
    let echo = Arc::new(Echo::default());
    f.run.set_rules(
        StepRules::read_only()
            .only(&["read"])
            .with_host_tool(echo.clone()),
    );
    let names: Vec<String> = f
        .run
        .tool_specs(ah_llm::models::EditFormat::Edit)
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names, ["read", "echo"]);
    let bad = f.run.tool_step("echo", &json!({"word": "maybe"})).await;
    assert!(
        bad.output.content.starts_with("invalid input for echo"),
        "{bad:?}"
    );
    let bash = f.run.tool_step("bash", &json!({"command": "true"})).await;
    assert!(
        bash.output
            .content
            .contains("not offered to this agent or phase"),
        "{bash:?}"
    );
    let good = f.run.tool_step("echo", &json!({"word": "yes"})).await;
    assert_eq!(good.output.content, "called");
    assert_eq!(*echo.calls.lock().unwrap(), [json!({"word": "yes"})]);
    // Host calls are steps on record, with no commit.
    assert_eq!(good.step, 3);
    assert!(f.run.dir().step_file(3, "meta.json").is_file());
}

fn project_tool(name: &str) -> Arc<ProjectTool> {
    Arc::new(ProjectTool {
        name: name.to_string(),
        description: format!("the project's {name}"),
        input_schema: json!({"type": "object", "properties": {}, "additionalProperties": false}),
        command: "cat >/dev/null; echo project".to_string(),
        timeout: None,
        source: std::path::PathBuf::from(format!(".ah/tools/{name}.toml")),
        declared: format!(".ah/tools/{name}.toml"),
    })
}

/// The names offered under `rules`.
fn offered(rules: &StepRules) -> Vec<String> {
    rules
        .specs(EditFormat::Edit)
        .into_iter()
        .map(|spec| spec.name)
        .collect()
}

#[tokio::test]
async fn project_tools_join_writable_rules_replace_and_yield_to_host_tools() {
    let tools = [
        project_tool("bash"),
        project_tool("lint"),
        project_tool("echo"),
    ];
    let all = StepRules::read_write().with_project_tools(&tools);
    assert_eq!(
        offered(&all),
        ["read", "write", "edit", "bash", "lint", "echo"]
    );
    let description = all
        .specs(EditFormat::Edit)
        .into_iter()
        .find(|spec| spec.name == "bash")
        .map(|spec| spec.description)
        .unwrap_or_default();
    assert!(
        description.starts_with("the project's bash"),
        "{description}"
    );
    // Read-only phases: none of them (a project tool may write).
    let read_only = StepRules::read_only().with_project_tools(&tools);
    assert_eq!(offered(&read_only), ["read", "bash"]);
    // An agent's own set bounds them too.
    let some = StepRules::read_write()
        .only(&["read", "lint"])
        .with_project_tools(&tools);
    assert_eq!(offered(&some), ["read", "lint"]);
    // Either edit tool stands for the one of the model's edit format.
    let editing = StepRules::read_write().only(&["apply_patch"]);
    assert_eq!(offered(&editing), ["edit"]);
    // A host tool of the same name is the one offered, once.
    let hosted = StepRules::read_write()
        .with_host_tool(Arc::new(Echo::default()))
        .with_project_tools(&tools);
    let names = offered(&hosted);
    assert_eq!(
        names.iter().filter(|n| *n == "echo").count(),
        1,
        "{names:?}"
    );
    // And a call goes to the project's tool, in the work copy.
    let mut f = fixture();
    f.run.set_project_tools(tools.to_vec());
    let out = f.run.tool_step("lint", &json!({})).await;
    assert_eq!(out.output.content, "project\n", "{out:?}");
}
