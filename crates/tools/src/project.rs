//! Tools a project (`.ah/tools/NAME.toml`) or the user declares: a
//! description, an input schema and a command. The command runs in the
//! sandbox, in `/work`, like `bash` (same timeout and output caps), with
//! the call's input as JSON on its standard input; its standard output is
//! the result, and an exit code other than 0 makes it an error result
//! (with its standard error). A call is a step like any other.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::input::Input;
use super::schema;
use super::{Exec, ExecOutput, ToolOutput, bash, note_full_output, truncate};
use ah_llm::ToolDef;

/// The largest input a project tool is given, in bytes of JSON: it travels
/// in the command line, which the kernel caps at 128 KiB per argument.
pub const MAX_INPUT_BYTES: usize = 96 * 1024;

/// The longest command line, quoting and the tool's command included: one
/// argument of `bash -c` (the kernel's `MAX_ARG_STRLEN`, less its NUL).
const MAX_COMMAND_BYTES: usize = 128 * 1024 - 1;

/// What to say when the model's copy of the output was cut.
const SEE_MORE: &str = "ask the tool for less";

/// A declared tool.
#[derive(Debug, Clone, PartialEq)]
pub struct ProjectTool {
    pub name: String,
    pub description: String,
    /// A JSON Schema of an object (compiled when the tool was loaded).
    pub input_schema: Value,
    /// A shell command line, run with `bash -c` in `/work`.
    pub command: String,
    /// Seconds before the command is killed (`bash`'s default when unset).
    pub timeout: Option<u64>,
    /// The file that declared it, as the user sees it.
    pub source: PathBuf,
    /// Where it was declared, as the model is told: the file's path in
    /// the project (`.ah/tools/lint.toml`) or a neutral name for the
    /// user's own; never a path of the host's.
    pub declared: String,
}

impl ProjectTool {
    /// The definition the model is offered: it says where the tool is from.
    pub fn spec(&self) -> ToolDef {
        ToolDef {
            name: self.name.clone(),
            description: format!(
                "{}\n\n(A tool declared in {}; it runs in /work.)",
                self.description, self.declared
            ),
            input_schema: self.input_schema.clone(),
        }
    }
}

/// Runs `tool` with `input` once it passed the tool's schema.
pub async fn call(tool: &ProjectTool, input: &Value, exec: &dyn Exec) -> ToolOutput {
    if let Err(message) = Input::check(&tool.spec(), input) {
        return ToolOutput::error(message);
    }
    // The tool gets what was checked: without the nulls that stand for
    // "not given".
    let json = schema::normalized(&tool.input_schema, input).to_string();
    if json.len() > MAX_INPUT_BYTES {
        return ToolOutput::error(format!(
            "not run: the input is {} bytes of JSON; {} takes at most {} KiB",
            json.len(),
            tool.name,
            MAX_INPUT_BYTES / 1024
        ));
    }
    let timeout = tool
        .timeout
        .unwrap_or_else(|| exec.bash_timeout())
        .min(bash::MAX_TIMEOUT);
    // The input in single quotes is taken by the shell byte for byte; the
    // blank line keeps a command ending in `\` from joining the brace.
    let command = format!(
        "printf '%s' '{}' | {{ {}\n\n}}",
        json.replace('\'', r"'\''"),
        tool.command
    );
    if command.len() > MAX_COMMAND_BYTES {
        return ToolOutput::error(format!(
            "not run: with its quoting the input makes a command line of {} bytes; {} takes \
             at most {} KiB of command line (each ' in the input counts 4 bytes)",
            command.len(),
            tool.name,
            (MAX_COMMAND_BYTES + 1) / 1024
        ));
    }
    let started = Instant::now();
    let result = exec.run(&command, Duration::from_secs(timeout)).await;
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    match result {
        Ok(output) => report(tool, timeout, duration_ms, output, exec),
        Err(err) => ToolOutput {
            may_change_files: true,
            ..ToolOutput::error(format!("could not run {}: {err}", tool.name))
        },
    }
}

/// The result: stdout (capped as `bash`'s output is), and with a failure
/// its stderr and why it failed.
fn report(
    tool: &ProjectTool,
    timeout: u64,
    duration_ms: u64,
    output: ExecOutput,
    exec: &dyn Exec,
) -> ToolOutput {
    let failed = output.timed_out || output.exit_code != Some(0);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let whole = match failed {
        false => stdout,
        true => super::joined_output(&output.stdout, &output.stderr),
    };
    let limits = exec.limits();
    let shown = truncate::head_tail(&whole, limits.bash, Some(limits.bash_lines));
    let mut content = note_full_output(shown, &whole, exec, SEE_MORE);
    let mut note = |line: String| {
        if !content.is_empty() && !content.ends_with('\n') {
            content.push('\n');
        }
        content.push_str(&line);
    };
    if output.dropped_bytes > 0 {
        note(format!(
            "[ah: {} bytes from the middle of the output were dropped as it ran]",
            output.dropped_bytes
        ));
    }
    if let Some(hit) = &output.memory_limit_hit {
        note(hit.told(&format!("while {} ran", tool.name)));
    }
    if failed {
        if !content.is_empty() && !content.ends_with('\n') {
            content.push('\n');
        }
        content.push_str(&match (output.timed_out, output.exit_code) {
            (true, _) => format!("{} timed out after {timeout} s and was killed", tool.name),
            (false, Some(code)) => format!("{} failed: exit code {code}", tool.name),
            (false, None) => format!("{} was killed by a signal", tool.name),
        });
    }
    ToolOutput {
        content,
        is_error: failed,
        details: json!({
            "tool": tool.name,
            "source": tool.source.display().to_string(),
            "exit_code": output.exit_code,
            "timed_out": output.timed_out,
            "duration_ms": duration_ms,
        }),
        stdout: output.stdout,
        stderr: output.stderr,
        exit_code: output.exit_code,
        may_change_files: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_exec::TestExec;

    fn tool(command: &str) -> ProjectTool {
        ProjectTool {
            name: "shout".into(),
            description: "Says the words louder".into(),
            input_schema: json!({
                "type": "object",
                "properties": {"words": {"type": "string"}},
                "required": ["words"],
                "additionalProperties": false
            }),
            command: command.into(),
            timeout: Some(5),
            source: PathBuf::from(".ah/tools/shout.toml"),
            declared: ".ah/tools/shout.toml".into(),
        }
    }

    #[tokio::test]
    async fn the_input_arrives_on_stdin_byte_for_byte_and_stdout_is_the_result() {
        let exec = TestExec::new();
        let words = "it's $HOME `id` \"quoted\" \\ ünï";
        let out = call(&tool("cat"), &json!({ "words": words }), &exec).await;
        assert!(!out.is_error, "{out:?}");
        let echoed: Value = serde_json::from_str(&out.content).unwrap();
        assert_eq!(echoed["words"], json!(words));
        let upper = call(&tool("tr a-z A-Z"), &json!({"words": "hi"}), &exec).await;
        assert_eq!(upper.content, "{\"WORDS\":\"HI\"}");
    }

    #[tokio::test]
    async fn a_failure_is_an_error_result_with_its_stderr() {
        let exec = TestExec::new();
        let out = call(
            &tool("echo partial; echo broken >&2; exit 3"),
            &json!({"words": "x"}),
            &exec,
        )
        .await;
        assert!(out.is_error);
        assert!(
            out.content.contains("partial") && out.content.contains("broken"),
            "{out:?}"
        );
        assert!(
            out.content.ends_with("shout failed: exit code 3"),
            "{out:?}"
        );
    }

    #[tokio::test]
    async fn bad_input_is_refused_before_anything_runs() {
        let exec = TestExec::new();
        let out = call(&tool("touch ran"), &json!({"words": 3}), &exec).await;
        assert!(out.is_error);
        assert!(
            out.content
                .starts_with("invalid input for shout: field \"words\" must be a string")
        );
        assert!(!exec.root().join("ran").exists());
        let big = "x".repeat(MAX_INPUT_BYTES);
        let out = call(&tool("touch ran"), &json!({ "words": big }), &exec).await;
        assert!(
            out.content.starts_with("not run: the input is"),
            "{}",
            out.content
        );
        // Quotes grow the command line past the kernel's limit: refused
        // here, not by the kernel.
        let quotes = "'".repeat(40 * 1024);
        let out = call(&tool("touch ran"), &json!({ "words": quotes }), &exec).await;
        assert!(
            out.content.starts_with("not run: with its quoting"),
            "{}",
            out.content
        );
        assert!(!exec.root().join("ran").exists());
    }

    #[tokio::test]
    async fn a_command_ending_in_a_backslash_still_runs_and_nulls_stay_out() {
        let exec = TestExec::new();
        let mut with_optional = tool("cat \\");
        with_optional.input_schema["properties"]["loud"] = json!({"type": "boolean"});
        let out = call(&with_optional, &json!({"words": "a", "loud": null}), &exec).await;
        assert!(!out.is_error, "{out:?}");
        assert_eq!(out.content, "{\"words\":\"a\"}");
    }
}
