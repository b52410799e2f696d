//! Shows a run's events to a person: the model's text streams to stdout; one
//! line per tool call (with the last lines of a command's output), retries,
//! violations and the end go to stderr, and a spinner turns while ah waits
//! for the model or a tool. Colour follows the terminal and `NO_COLOR` (via
//! `console`); the spinner is drawn only when stderr is a terminal.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use console::style;
use serde_json::Value;

use super::screen::{Screen, ScreenState};
use super::summary::RunSummary;
use ah_core::agent::{CompactReason, Event};
use ah_core::cost::describe;
use ah_core::present::{count, name_safe, terminal_safe, terminal_safe_piece, tool_names};

mod progress;

use progress::{is_silent, shown_output, spinner_after, tail};

/// How many of a command's last output lines are shown under its line.
const TAIL_LINES: usize = 3;

/// Prints events as they arrive.
pub(crate) struct Display {
    screen: Arc<Screen>,
    /// A violation was just shown for the running call (its error result
    /// needs no second line).
    violation_shown: bool,
    /// The last character of the model's text streamed so far.
    last_char: Option<char>,
}

impl Display {
    pub(crate) fn new(screen: Arc<Screen>) -> Display {
        Display {
            screen,
            violation_shown: false,
            last_char: None,
        }
    }

    /// Shows `event`, waiting while someone else (a `You:` line) has the
    /// terminal.
    pub(crate) fn show(&mut self, event: &Event) {
        let screen = Arc::clone(&self.screen);
        let mut state = screen.lock();
        let next = spinner_after(event, state.message());
        if !is_silent(event) || next.as_deref() != state.message() {
            state.clear();
        }
        self.print(&mut state, event);
        if let Some(message) = next
            && state.message().is_none()
        {
            // The spinner's line must not be the model's unfinished one.
            state.end_line();
            state.spin(message);
        }
    }

    fn print(&mut self, state: &mut ScreenState, event: &Event) {
        match event {
            Event::TextDelta { text } => {
                let mut out = std::io::stdout().lock();
                let shown = terminal_safe_piece(self.last_char, text);
                let _ = out.write_all(shown.as_bytes());
                self.last_char = text.chars().next_back().or(self.last_char);
                let _ = out.flush();
                state.mid_line = !text.ends_with('\n');
            }
            Event::ToolCallStart { name, input, .. } => {
                state.end_line();
                eprintln!(
                    "{} {} {}",
                    style("▸").cyan(),
                    style(name).bold(),
                    key_param(name, input)
                );
            }
            Event::ToolCallEnd { .. } if self.violation_shown => {
                self.violation_shown = false;
            }
            Event::ToolCallEnd {
                name,
                is_error,
                duration_ms,
                details,
                output,
                ..
            } => {
                let mark = if failed(name, *is_error, details) {
                    style("✗").red()
                } else {
                    style("✓").green()
                };
                eprintln!(
                    "  {mark} {}",
                    terminal_safe(&outcome(name, *is_error, *duration_ms, details))
                );
                if name == "bash" || *is_error {
                    for line in tail(shown_output(name, output), TAIL_LINES) {
                        eprintln!("    {}", style(terminal_safe(line)).dim());
                    }
                }
            }
            Event::Violation { step, report } => {
                state.end_line();
                eprintln!(
                    "{} step {step} undone by the write policy:",
                    style("⛔").red()
                );
                for line in report.lines() {
                    eprintln!("    {}", terminal_safe(line));
                }
                self.violation_shown = true;
            }
            Event::TurnEnd { .. } | Event::AgentEnd { .. } => state.end_line(),
            _ => Self::notice(state, event),
        }
    }

    /// Events that are one notice on stderr: retries, loops, steering,
    /// errors, compaction, egress decisions and the run's end line.
    fn notice(state: &mut ScreenState, event: &Event) {
        match event {
            Event::Retry {
                attempt,
                delay_ms,
                reason,
            } => {
                state.end_line();
                eprintln!(
                    "{} model call failed ({}); retry {attempt} in {:.1}s",
                    style("↻").yellow(),
                    terminal_safe(reason),
                    *delay_ms as f64 / 1000.0
                );
            }
            Event::LoopDetected {
                pattern_len,
                repeats,
                tools,
            } => {
                state.end_line();
                let calls = if *pattern_len == 1 {
                    "call".to_string()
                } else {
                    format!("{pattern_len} calls")
                };
                eprintln!(
                    "{} the model repeated the same {calls} ({}) {repeats} times; told it to change approach",
                    style("⟳").yellow(),
                    terminal_safe(&tools.join(", "))
                );
            }
            Event::SteeringDelivered { id, text, skipped } => {
                state.end_line();
                let skipped = match skipped {
                    0 => String::new(),
                    n => format!("; {} skipped", count(*n, "tool call", "tool calls")),
                };
                eprintln!(
                    "{} steering #{id} delivered{skipped}: {}",
                    style("⇢").magenta(),
                    terminal_safe(text)
                );
            }
            Event::FollowupDelivered { id, text } => {
                state.end_line();
                eprintln!(
                    "{} follow-up #{id}: {}",
                    style("⇢").magenta(),
                    terminal_safe(text)
                );
            }
            Event::Error { message } => {
                state.end_line();
                eprintln!(
                    "{} {}",
                    style("error:").red().bold(),
                    terminal_safe(message)
                );
            }
            Event::CompactionStart { reason, tokens } => {
                state.end_line();
                let why = match reason {
                    CompactReason::Threshold => "it nears the context window",
                    CompactReason::Overflow => "the API found it too long",
                    CompactReason::Manual => "asked",
                };
                eprintln!(
                    "{} compacting the conversation (~{tokens} tokens; {why})",
                    style("⇣").cyan()
                );
            }
            Event::CompactionEnd {
                summary_chars,
                kept_messages,
                ..
            } => {
                eprintln!(
                    "{} compacted: a summary of {} and {}",
                    style("⇣").cyan(),
                    count(*summary_chars, "character", "characters"),
                    kept(*kept_messages)
                );
            }
            Event::Limits { checked, limits } => {
                // One line, only when a limit does not hold as asked.
                let weaker: Vec<String> = limits
                    .iter()
                    .filter(|limit| !limit.as_asked())
                    .map(|limit| limit.describe())
                    .collect();
                if !weaker.is_empty() {
                    state.end_line();
                    let when = if *checked {
                        "as the sandbox got them"
                    } else {
                        "not as asked"
                    };
                    eprintln!(
                        "{} limits {when}: {}",
                        style("⚠").yellow(),
                        terminal_safe(&weaker.join("; "))
                    );
                }
            }
            Event::Egress {
                target,
                allowed,
                reason,
                ..
            } => {
                state.end_line();
                let (mark, verdict) = if *allowed {
                    (style("⇄").cyan(), "network")
                } else {
                    (style("⛔").red(), "network denied")
                };
                eprintln!(
                    "  {mark} {verdict} {}: {}",
                    terminal_safe(target),
                    terminal_safe(reason)
                );
            }
            Event::RunEnd {
                duration_ms,
                usage,
                cost_usd,
                unpriced,
                steps,
                violations,
                files,
                added,
                removed,
                decision,
            } => {
                state.end_line();
                let summary = RunSummary {
                    duration: Duration::from_millis(*duration_ms),
                    tokens: (usage.input_tokens, usage.output_tokens),
                    cost: terminal_safe(&describe(*cost_usd, unpriced)).into_owned(),
                    steps: *steps,
                    violations: *violations,
                    files: *files,
                    added: *added,
                    removed: *removed,
                    decision: decision.clone(),
                };
                eprintln!("{}", summary.line());
            }
            _ => {}
        }
    }

    /// Writes `line` on stderr, after the model's unfinished line.
    pub(crate) fn line(&mut self, line: &str) {
        let mut state = self.screen.lock();
        state.clear();
        state.end_line();
        eprintln!("{line}");
    }

    /// Opens an agent's text (`ah org`) with `label`, on a line of its own
    /// on stdout, where the text follows.
    pub(crate) fn text_label(&mut self, label: &str) {
        let mut state = self.screen.lock();
        state.clear();
        state.end_line();
        let mut out = std::io::stdout().lock();
        let _ = write!(out, "{label} ");
        let _ = out.flush();
        self.last_char = Some(' ');
        state.mid_line = true;
    }

    /// The terminal this display writes to.
    pub(crate) fn screen(&self) -> Arc<Screen> {
        Arc::clone(&self.screen)
    }
}

/// The messages a compaction kept as they were: `the 3 most recent
/// messages`, or `the most recent message`.
pub(super) fn kept(messages: usize) -> String {
    match messages {
        1 => "the most recent message".to_string(),
        n => format!("the {n} most recent messages"),
    }
}

/// One line on how a call went, from its structured details.
/// Whether a call's end is shown as a failure: an error result, or a
/// command that exited with a code other than 0 (which the model gets as
/// an ordinary result, its exit code in it).
fn failed(tool: &str, is_error: bool, details: &Value) -> bool {
    is_error
        || (tool == "bash"
            && details
                .get("exit_code")
                .and_then(Value::as_i64)
                .is_some_and(|code| code != 0))
}

fn outcome(tool: &str, is_error: bool, duration_ms: u64, details: &Value) -> String {
    let number = |key: &str| details.get(key).and_then(Value::as_i64);
    let seconds = format!("{:.1}s", duration_ms as f64 / 1000.0);
    if details.get("timed_out").and_then(Value::as_bool) == Some(true) {
        return format!("timed out after {seconds}");
    }
    match (tool, number("exit_code")) {
        ("bash", Some(code)) => return format!("exit {code} in {seconds}"),
        ("bash", None) if is_error => return format!("killed after {seconds}"),
        _ => {}
    }
    if is_error {
        return "error".to_string();
    }
    match tool {
        "edit" => format!(
            "-{} +{} lines",
            number("lines_removed").unwrap_or(0),
            number("lines_added").unwrap_or(0)
        ),
        "write" => {
            let verb = if details.get("created").and_then(Value::as_bool) == Some(true) {
                "created"
            } else {
                "overwritten"
            };
            format!(
                "{verb}, {}",
                count(number("bytes").unwrap_or(0), "byte", "bytes")
            )
        }
        "read" => format!(
            "{} of {}",
            number("lines_shown").unwrap_or(0),
            count(number("total_lines").unwrap_or(0), "line", "lines")
        ),
        _ => format!("done in {seconds}"),
    }
}

/// The parameter that says most about a call, shortened to one line and
/// safe for the terminal: a command's first line, the whole path with its
/// newlines and invisible characters escaped, or for a tool with no path
/// (a project's, an MCP server's) its input as compact JSON.
pub(super) fn key_param(tool: &str, input: &Value) -> String {
    let value = |key: &str| input.get(key).and_then(Value::as_str).unwrap_or_default();
    let has_path = input.get("path").is_some_and(Value::is_string);
    let (text, full) = match tool {
        "bash" => {
            let command = value("command");
            let first = command.lines().next().unwrap_or_default();
            (terminal_safe(first), first.len() == command.len())
        }
        _ if has_path || tool_names().iter().any(|own| own == tool) => {
            (name_safe(value("path")), true)
        }
        _ if input.as_object().is_none_or(|fields| fields.is_empty()) => return String::new(),
        _ => (terminal_safe(&input.to_string()).into_owned().into(), true),
    };
    let mut short: String = text.chars().take(100).collect();
    if short.len() < text.len() || !full {
        short.push('…');
    }
    short
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn outcome_lines_come_from_the_details() {
        assert_eq!(
            outcome("bash", false, 1234, &json!({"exit_code": 0})),
            "exit 0 in 1.2s"
        );
        assert_eq!(
            outcome("bash", false, 10, &json!({"exit_code": 2})),
            "exit 2 in 0.0s"
        );
        assert_eq!(
            outcome(
                "bash",
                true,
                3000,
                &json!({"exit_code": null, "timed_out": true})
            ),
            "timed out after 3.0s"
        );
        assert_eq!(
            outcome(
                "edit",
                false,
                1,
                &json!({"lines_removed": 2, "lines_added": 5})
            ),
            "-2 +5 lines"
        );
        assert_eq!(
            outcome("write", false, 1, &json!({"created": true, "bytes": 12})),
            "created, 12 bytes"
        );
        assert_eq!(
            outcome(
                "read",
                false,
                1,
                &json!({"lines_shown": 10, "total_lines": 99})
            ),
            "10 of 99 lines"
        );
        assert_eq!(outcome("edit", true, 1, &Value::Null), "error");
    }

    #[test]
    fn a_command_that_exits_non_zero_is_shown_failed() {
        assert!(!failed("bash", false, &json!({"exit_code": 0})));
        assert!(failed("bash", false, &json!({"exit_code": 1})));
        assert!(failed("bash", true, &json!({"exit_code": null})));
        assert!(!failed("lint", false, &json!({"exit_code": 2})));
        assert!(failed("edit", true, &Value::Null));
    }

    #[test]
    fn key_param_shows_one_short_line() {
        assert_eq!(key_param("read", &json!({"path": "src/a.rs"})), "src/a.rs");
        assert_eq!(
            key_param("time__now", &json!({"zone": "Asia/Tokyo\u{202E}"})),
            "{\"zone\":\"Asia/Tokyo<U+202E>\"}"
        );
        assert_eq!(key_param("probe__picture", &json!({})), "");
        assert_eq!(key_param("bash", &json!({"command": "ls\nrm x"})), "ls…");
        let long = "x".repeat(300);
        assert_eq!(
            key_param("bash", &json!({ "command": long }))
                .chars()
                .count(),
            101
        );
        assert_eq!(key_param("write", &json!({})), "");
        assert_eq!(
            key_param("write", &json!({"path": "a\n b\u{202E}"})),
            "a\\n b<U+202E>"
        );
        assert_eq!(
            key_param("bash", &json!({"command": "echo \u{1b}[2J"})),
            "echo ^[[2J"
        );
    }
}
