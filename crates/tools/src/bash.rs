//! The `bash` tool: runs a shell command in the work directory through
//! [`Exec`] (the sandbox) and reports its output and exit status.
//!
//! The schema states the `timeout` bounds, so a call over the maximum is
//! refused (by [`super::call`]) rather than silently clamped: the model learns
//! the limit instead of being cut off at a time it did not ask for.
//! A non-zero exit is not an error result (the exit code is in the text: `grep`
//! finding nothing is an answer); a timeout, a kill or a failure to start is.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use serde_json::json;

use super::input::Input;
use super::{Exec, ExecOutput, ToolOutput, joined_output, note_full_output, truncate};
use ah_llm::ToolDef;

/// Seconds a command may run when the model gives no `timeout`.
pub const DEFAULT_TIMEOUT: u64 = 120;
/// The largest `timeout` accepted, in seconds.
pub const MAX_TIMEOUT: u64 = 600;

/// How the model can see what was cut from a command's output.
const SEE_MORE: &str = "narrow the command to see the rest (grep, head, tail, sed -n)";

pub fn spec() -> ToolDef {
    ToolDef {
        name: "bash".to_string(),
        description: format!(
            "Run a command with `bash -c` in /work (the work directory) and return its stdout, \
             its stderr and its exit code. Each call starts a fresh shell: `cd` and variables \
             do not carry over. `timeout` is in seconds (default {DEFAULT_TIMEOUT} unless the user \
             configured another); \
             {MAX_TIMEOUT} is the hard limit. When the call ends, every process it started is \
             killed, background ones (`&`, `nohup`, daemons) included: nothing keeps running \
             until a later call. Split long work into steps that each finish within the limit \
             (e.g. build or test one part per call). Long output is cut in the middle. Use \
             `read`, `write` and `edit` for files."
        ),
        input_schema: json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The command line to run"},
                "timeout": {"type": "integer", "minimum": 1, "maximum": MAX_TIMEOUT, "description": format!("Seconds before the command and everything it started are killed (default {DEFAULT_TIMEOUT} unless the user configured another; {MAX_TIMEOUT} is the hard limit). Background processes are killed when the call ends too, so split longer work into calls that finish")}
            },
            "required": ["command"],
            "additionalProperties": false
        }),
    }
}

pub async fn run(input: Input<'_>, exec: &dyn Exec) -> ToolOutput {
    let command = input.string("command");
    // The schema keeps it within 1..=MAX_TIMEOUT.
    let timeout = input
        .integer("timeout")
        .unwrap_or_else(|| exec.bash_timeout());
    if command.trim().is_empty() {
        return ToolOutput::error("command is empty: give a shell command to run");
    }

    let started = Instant::now();
    let result = exec.run(command, Duration::from_secs(timeout)).await;
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    match result {
        Ok(output) => report(command, timeout, duration_ms, output, exec),
        Err(e) => ToolOutput {
            // The command may have started before failing.
            may_change_files: true,
            ..ToolOutput::error(format!("could not run the command: {e}"))
        },
    }
}

/// What the model and the step record get of a command that ran for
/// `duration_ms` with `timeout` seconds allowed.
fn report(
    command: &str,
    timeout: u64,
    duration_ms: u64,
    output: ExecOutput,
    exec: &dyn Exec,
) -> ToolOutput {
    let status = match (output.timed_out, output.exit_code) {
        (true, _) => format!("timed out after {timeout} s; the command was killed"),
        (false, Some(code)) => format!("exit code: {code}"),
        (false, None) => "the command was killed by a signal".to_string(),
    };
    let limits = exec.limits();
    let whole = joined_output(&output.stdout, &output.stderr);
    let shown = truncate::head_tail(&whole, limits.bash, Some(limits.bash_lines));
    let mut content = note_full_output(shown, &whole, exec, SEE_MORE);
    if !content.is_empty() && !content.ends_with('\n') {
        content.push('\n');
    }
    let mut details = json!({
        "command": command,
        "exit_code": output.exit_code,
        "timed_out": output.timed_out,
        "duration_ms": duration_ms,
    });
    if output.dropped_bytes > 0 {
        details["dropped_bytes"] = json!(output.dropped_bytes);
        let _ = writeln!(
            content,
            "[{} bytes from the middle of the output were dropped as it ran (where a \
             \"[ah: … bytes of output dropped here]\" line stands); no step file has them; \
             narrow the command to see them]",
            output.dropped_bytes
        );
    }
    if let Some(hit) = &output.memory_limit_hit {
        details["memory_limit_hit"] = json!(hit.limit);
        let _ = writeln!(content, "{}", hit.told("during this command"));
    }
    content.push_str(&status);
    ToolOutput {
        content,
        is_error: output.exit_code.is_none(),
        details,
        stdout: output.stdout,
        stderr: output.stderr,
        exit_code: output.exit_code,
        may_change_files: true,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::test_exec::TestExec;

    /// The tool as the model reaches it: through [`crate::call`] and its
    /// schema check.
    async fn call(input: &Value, exec: &TestExec) -> ToolOutput {
        crate::call("bash", input, exec).await
    }

    #[tokio::test]
    async fn stdout_then_marked_stderr_then_exit_code() {
        let exec = TestExec::new();
        let out = call(&json!({"command": "echo out; echo err >&2; exit 3"}), &exec).await;
        assert_eq!(out.content, "out\n--- stderr ---\nerr\nexit code: 3");
        assert_eq!(out.stdout, b"out\n");
        assert_eq!(out.stderr, b"err\n");
        assert_eq!(out.exit_code, Some(3));
        assert!(!out.is_error);
        assert!(out.may_change_files);
        assert_eq!(out.details["exit_code"], json!(3));
        assert_eq!(out.details["timed_out"], json!(false));
        assert_eq!(
            out.details["command"],
            json!("echo out; echo err >&2; exit 3")
        );
    }

    #[tokio::test]
    async fn runs_in_the_work_directory() {
        let exec = TestExec::new();
        let out = call(&json!({"command": "echo made > f.txt && pwd"}), &exec).await;
        let pwd = std::fs::canonicalize(exec.path("")).unwrap();
        assert_eq!(out.content, format!("{}\nexit code: 0", pwd.display()));
        assert_eq!(
            std::fs::read_to_string(exec.path("f.txt")).unwrap(),
            "made\n"
        );
    }

    #[tokio::test]
    async fn timeout_kills_and_says_so() {
        let exec = TestExec::new();
        let out = call(
            &json!({"command": "echo started; sleep 30", "timeout": 1}),
            &exec,
        )
        .await;
        assert!(out.is_error);
        assert!(
            out.content
                .ends_with("timed out after 1 s; the command was killed"),
            "{}",
            out.content
        );
        assert_eq!(out.details["timed_out"], json!(true));
        assert!(out.details["duration_ms"].as_u64().unwrap() < 10_000);
    }

    #[tokio::test]
    async fn long_output_is_capped_but_raw_output_is_whole() {
        let exec = TestExec::new();
        let out = call(&json!({"command": "seq 1 100000"}), &exec).await;
        assert_eq!(out.stdout.iter().filter(|b| **b == b'\n').count(), 100_000);
        // The cap, then the line on how to see the rest, then the exit code.
        assert!(out.content.lines().count() <= crate::OutputLimits::default().bash_lines + 2);
        assert!(out.content.starts_with("1\n2\n"));
        assert!(
            out.content.contains("lines omitted ...]"),
            "{}",
            out.content
        );
        assert!(out.content.ends_with(
            "100000\n[output cut; narrow the command to see the rest (grep, head, tail, sed -n)]\n\
             exit code: 0"
        ));
    }

    #[tokio::test]
    async fn a_cut_output_names_the_step_file_and_how_to_see_the_rest() {
        let exec = TestExec::new().with_full_output("/runs/r1/steps/step-1.out");
        let out = call(&json!({"command": "seq 1 100000; echo oops >&2"}), &exec).await;
        assert!(
            out.content.ends_with(
                "100000\n--- stderr ---\noops\n[output cut; the whole output is kept in the \
                 run's step file (/runs/r1/steps/step-1.out); narrow the command to see the \
                 rest (grep, head, tail, sed -n)]\nexit code: 0"
            ),
            "{}",
            out.content
        );
        // Output within the caps gets no note.
        let out = call(&json!({"command": "echo short"}), &exec).await;
        assert_eq!(out.content, "short\nexit code: 0");
    }

    #[test]
    fn the_description_says_background_processes_die_with_the_call() {
        let spec = spec();
        let timeout = spec.input_schema["properties"]["timeout"]["description"]
            .as_str()
            .unwrap()
            .to_string();
        for text in [&spec.description, &timeout] {
            assert!(!text.contains("in the background and check"), "{text}");
            assert!(text.contains("600 is the hard limit"), "{text}");
        }
        assert!(
            spec.description.contains(
                "When the call ends, every process it started is killed, background ones"
            ),
            "{}",
            spec.description
        );
        assert!(
            spec.description
                .contains("Split long work into steps that each finish")
        );
        assert!(timeout.contains("Background processes are killed when the call ends too"));
    }

    #[test]
    fn bytes_dropped_in_memory_are_in_the_details_and_the_text() {
        let exec = TestExec::new();
        let output = ExecOutput {
            stdout: b"head\n[ah: 5 bytes of output dropped here]\ntail\n".to_vec(),
            exit_code: Some(0),
            dropped_bytes: 5,
            ..ExecOutput::default()
        };
        let out = report("yes", 120, 7, output, &exec);
        assert_eq!(out.details["dropped_bytes"], json!(5));
        assert_eq!(
            out.content,
            "head\n[ah: 5 bytes of output dropped here]\ntail\n\
             [5 bytes from the middle of the output were dropped as it ran (where a \
             \"[ah: … bytes of output dropped here]\" line stands); no step file has them; \
             narrow the command to see them]\nexit code: 0"
        );
        assert_eq!(
            out.stdout,
            b"head\n[ah: 5 bytes of output dropped here]\ntail\n"
        );

        let whole = ExecOutput {
            stdout: b"all\n".to_vec(),
            exit_code: Some(0),
            ..ExecOutput::default()
        };
        let out = report("echo all", 120, 7, whole, &exec);
        assert_eq!(out.details.get("dropped_bytes"), None);
        assert_eq!(out.content, "all\nexit code: 0");
    }

    #[test]
    fn a_memory_limit_hit_is_told_whatever_the_exit_code() {
        let exec = TestExec::new();
        let output = ExecOutput {
            stdout: b"\n".to_vec(),
            exit_code: Some(0),
            memory_limit_hit: Some(crate::MemoryLimitHit {
                limit: "4g".to_string(),
                by: crate::HitBy::Cgroup,
            }),
            ..ExecOutput::default()
        };
        let out = report("python3 big.py | tail -1", 120, 7, output, &exec);
        assert_eq!(out.details["memory_limit_hit"], json!("4g"));
        assert_eq!(
            out.content,
            "\n[ah: the sandbox's memory limit (4g) was hit during this command: the kernel \
             killed a process (out of memory), whatever the exit code says; its output may be \
             cut]\nexit code: 0"
        );
    }

    #[tokio::test]
    async fn a_timeout_written_with_a_zero_fraction_is_an_integer() {
        let exec = TestExec::new();
        let out = call(
            &json!({"command": "echo started; sleep 30", "timeout": 1.0}),
            &exec,
        )
        .await;
        assert!(
            out.content
                .ends_with("timed out after 1 s; the command was killed"),
            "{}",
            out.content
        );
    }

    #[tokio::test]
    async fn bad_input_is_refused_before_anything_runs() {
        let exec = TestExec::new();
        for (input, message) in [
            (
                json!({"command": "touch ran", "timeout": 601}),
                "field \"timeout\" must be at most 600, got 601",
            ),
            (
                json!({"command": "touch ran", "timeout": 0}),
                "field \"timeout\" must be at least 1, got 0",
            ),
            (
                json!({"command": "touch ran", "timeout": 1.5}),
                "field \"timeout\" must be an integer, got the number 1.5",
            ),
            (
                json!({"timeout": 5, "cwd": "/"}),
                "missing required field \"command\"; \
                 unknown field \"cwd\" (the fields are command, timeout)",
            ),
        ] {
            let out = call(&input, &exec).await;
            assert!(out.is_error);
            assert_eq!(out.content, format!("invalid input for bash: {message}"));
            assert!(!out.may_change_files);
        }
        assert!(!exec.path("ran").exists(), "no command ran");
        let out = call(&json!({"command": "  "}), &exec).await;
        assert_eq!(out.content, "command is empty: give a shell command to run");
    }
}
