//! What the display shows of progress: what the spinner says after each
//! event, and the last lines of a tool call's output.

use ah_core::agent::Event;

/// Events that print nothing (the spinner may go on turning through them).
pub(super) fn is_silent(event: &Event) -> bool {
    matches!(
        event,
        Event::AgentStart { .. }
            | Event::TurnStart { .. }
            | Event::ApiCallStart { .. }
            | Event::ApiCallEnd { .. }
            | Event::ThinkingDelta { .. }
            | Event::StepCommitted { .. }
            | Event::SteeringInjected { .. }
            | Event::StateChange { .. }
            | Event::ReviewDone { .. }
    )
}

/// What the spinner says after `event`, or `None` for no spinner: it turns
/// while ah waits for the model or a tool, not while text streams.
pub(super) fn spinner_after(event: &Event, now: Option<&str>) -> Option<String> {
    match event {
        Event::ApiCallStart { .. } => Some("waiting for the model".to_string()),
        Event::ThinkingDelta { .. } => Some("thinking".to_string()),
        Event::Retry { .. } => Some("waiting to retry".to_string()),
        Event::CompactionStart { .. } => Some("compacting".to_string()),
        Event::ToolCallStart { name, .. } => Some(format!("running {name}")),
        Event::TextDelta { .. }
        | Event::ToolCallEnd { .. }
        | Event::ApiCallEnd { .. }
        | Event::CompactionEnd { .. }
        | Event::TurnEnd { .. }
        | Event::AgentEnd { .. }
        | Event::StateChange { .. }
        | Event::RunEnd { .. }
        | Event::Error { .. } => None,
        _ => now.map(str::to_string),
    }
}

/// What of a call's output is worth showing: a command's ends with its
/// status, which the call's line already says.
pub(super) fn shown_output<'a>(tool: &str, output: &'a str) -> &'a str {
    match tool {
        "bash" => output
            .trim_end()
            .rsplit_once('\n')
            .map_or("", |(body, _)| body),
        _ => output,
    }
}

/// The last `count` non-blank lines of `output`, each cut to one screen
/// line.
pub(super) fn tail(output: &str, count: usize) -> Vec<&str> {
    let lines: Vec<&str> = output
        .lines()
        .filter(|line| !line.trim().is_empty())
        .collect();
    let from = lines.len().saturating_sub(count);
    lines[from..]
        .iter()
        .map(|line| match line.char_indices().nth(160) {
            Some((at, _)) => &line[..at],
            None => line,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    #[test]
    fn tail_keeps_the_last_non_blank_lines() {
        assert_eq!(tail("a\nb\n\nc\nd\n\n", 3), vec!["b", "c", "d"]);
        assert_eq!(tail("only", 3), vec!["only"]);
        assert!(tail("", 3).is_empty());
        assert_eq!(shown_output("bash", "out\nexit code: 0\n"), "out");
        assert_eq!(shown_output("bash", "exit code: 0"), "");
        assert_eq!(shown_output("edit", "no match"), "no match");
        assert_eq!(tail(&"x".repeat(500), 1)[0].len(), 160);
    }

    #[test]
    fn the_spinner_turns_while_waiting_not_while_text_streams() {
        let call = Event::ApiCallStart {
            turn: 1,
            model: "m".into(),
        };
        assert_eq!(
            spinner_after(&call, None).as_deref(),
            Some("waiting for the model")
        );
        let text = Event::TextDelta { text: "hi".into() };
        assert_eq!(spinner_after(&text, Some("waiting for the model")), None);
        let tool = Event::ToolCallStart {
            id: "t".into(),
            name: "bash".into(),
            input: Value::Null,
        };
        assert_eq!(spinner_after(&tool, None).as_deref(), Some("running bash"));
        let step = Event::StepCommitted {
            step: 1,
            commit: "c".into(),
            changes: Vec::new(),
        };
        assert_eq!(
            spinner_after(&step, Some("running bash")).as_deref(),
            Some("running bash")
        );
    }
}
