//! Tools for models without native tool calling (a model whose
//! [`ToolProtocol`] is `Text`): no tools are sent with the request, the
//! system prompt describes `##file:PATH`, `##run` and `##tool NAME` blocks
//! instead (`sys/text_protocol.md`; `##tool` for the tools besides ah's
//! own, a project's), and once a reply has streamed in whole its blocks
//! ([`parse`]) are run as the same steps as native calls, through [`Run::tool_step`] (path confinement, the write
//! policy, step commits and files). Their results go back to the model as
//! the next user message, in text.

mod parse;

use std::fmt::Write as _;

use serde_json::json;

use super::prompt;
use super::state::{Halt, LoopState};
use super::{AbortSignal, AgentConfig, AgentError};
use crate::event::EndReason;
use ah_llm::models::ToolProtocol;
use ah_llm::{Block, Response, Role, ToolDef};
use ah_record::run::Run;
use ah_session::{BlockRecord, MessageMeta, Session};
use parse::Directive;

const PROTOCOL: &str = include_str!("../../../../sys/text_protocol.md");

/// The largest file a `##file:` block may write, in bytes.
pub(super) const MAX_FILE_BYTES: usize = 1024 * 1024;

/// The system prompt and tools of a request, the prompt naming the tools
/// offered ([`prompt::name_tools`]): under the text protocol, no tools, and
/// the protocol described after the prompt, for the tools the run offers
/// (`write` for `##file:`, `bash` for `##run`).
pub(super) fn request_parts(config: &AgentConfig) -> (String, Vec<ToolDef>) {
    let system = prompt::name_tools(&config.system, &config.tools, &config.model);
    if config.model.tool_protocol == ToolProtocol::Native {
        return (system, config.tools.clone());
    }
    // `##file:` and `##run` stand for ah's own `write` and `bash`; a
    // project's tool of the same name is called with `##tool` instead.
    let own = ah_tools::specs(config.model.edit_format);
    let offers = |name: &str| {
        config
            .tools
            .iter()
            .any(|tool| tool.name == name && own.contains(tool))
    };
    let file = if offers("write") {
        "\nTo create a file or replace its whole content, write a line `##file:PATH` (PATH \
         relative to /work) and right after it a fenced block with the complete content:\n\n\
         ##file:src/hello.py\n```python\nprint(\"hello\")\n```\n"
    } else {
        ""
    };
    let run = if offers("bash") {
        "\nTo run a shell command in /work (also to read files: cat, sed -n, grep), write a \
         line `##run` and right after it a fenced block tagged sh:\n\n##run\n```sh\npython3 \
         src/hello.py\n```\n"
    } else {
        ""
    };
    let others: Vec<&ToolDef> = config.tools.iter().filter(|t| !own.contains(t)).collect();
    let tools = other_tools(&others);
    let protocol = PROTOCOL
        .replace("{{file}}", file)
        .replace("{{run}}", run)
        .replace("{{tools}}", &tools);
    (
        format!("{}\n\n{}", system.trim_end(), protocol.trim_end()),
        Vec::new(),
    )
}

/// The `##tool` part of the protocol: the tools besides ah's own (a
/// project's), each with its description and input schema.
fn other_tools(others: &[&ToolDef]) -> String {
    if others.is_empty() {
        return String::new();
    }
    let mut text = String::from(
        "\nTo call one of the tools below, write a line `##tool NAME` and right after it a \
         fenced block with its input as a JSON object:\n\n##tool NAME\n```json\n{\"field\": \
         \"value\"}\n```\n\nThe tools:\n",
    );
    for tool in others {
        let _ = write!(
            text,
            "\n- {}: {}\n  input schema: {}\n",
            tool.name,
            tool.description.replace('\n', "\n  "),
            tool.input_schema
        );
    }
    text
}

/// What running a reply's blocks did.
pub(super) struct Ran {
    /// Why the loop must stop now, if it must.
    pub stop: Option<EndReason>,
}

/// Runs the blocks of `response` (a reply with no native tool calls) and
/// stores their results as the next user message, which becomes the head.
/// `None` when the reply has no blocks: the model is done. Each block goes
/// through the same gate and step as a native call (see `state`).
pub(super) async fn run_blocks(
    config: &AgentConfig,
    response: &Response,
    run: &mut Run,
    session: &mut Session,
    state: &mut LoopState<'_>,
    abort: &mut AbortSignal,
) -> Result<Option<Ran>, AgentError> {
    let text: String = response
        .content
        .iter()
        .filter_map(|block| match block {
            Block::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let directives = parse::directives(&text);
    if directives.is_empty() {
        return Ok(None);
    }
    let mut report = String::from("[ah: results of the blocks in your last message]\n");
    let mut stop = None;
    for (n, directive) in directives.into_iter().enumerate() {
        let (label, call) = match directive {
            Directive::Broken { head, why } => {
                let _ = write!(report, "\n{}. {head}: not run: {why}\n", n + 1);
                continue;
            }
            Directive::File { path, content } if content.len() > MAX_FILE_BYTES => {
                let _ = write!(
                    report,
                    "\n{}. ##file:{path}: not written: {} bytes is over the {MAX_FILE_BYTES}-byte \
                     limit of one block; split the file\n",
                    n + 1,
                    content.len()
                );
                continue;
            }
            Directive::File { path, content } => (
                format!("##file:{path}"),
                (
                    "write".to_string(),
                    json!({"path": path, "content": content}),
                ),
            ),
            Directive::Run { command } => (
                format!("##run {}", command.lines().next().unwrap_or("")),
                ("bash".to_string(), json!({"command": command})),
            ),
            Directive::Tool { name, input } => (format!("##tool {name}"), (name, input)),
        };
        let halted = match stop {
            Some(EndReason::Aborted) => Some(Halt::Interrupted),
            Some(EndReason::Finalized) => Some(Halt::Finalized),
            _ => LoopState::halt(abort),
        };
        if let Some(halt) = halted {
            stop = Some(match halt {
                Halt::Interrupted => EndReason::Aborted,
                Halt::Finalized => EndReason::Finalized,
            });
            let _ = write!(report, "\n{}. {label}: not run: stopped\n", n + 1);
            continue;
        }
        if !state.admit(config) {
            let _ = write!(
                report,
                "\n{}. {label}: not run: the tool call limit (--max-tools) was reached\n",
                n + 1
            );
            continue;
        }
        let (name, input) = call;
        let name = name.as_str();
        let id = format!("text_{}", ulid::Ulid::generate());
        match state.step(run, session, abort, (&id, name, &input)).await {
            Some(outcome) => {
                let output = outcome.output;
                let status = if output.is_error { "failed" } else { "done" };
                let _ = write!(
                    report,
                    "\n{}. {label}: {status}\n{}\n",
                    n + 1,
                    fenced(&output.content)
                );
                if let Some(repetition) = state.repeated(session, name, &input, &output) {
                    let _ = write!(report, "\n{}\n", repetition.steering());
                }
            }
            None => {
                stop = Some(EndReason::Aborted);
                let _ = write!(report, "\n{}. {label}: interrupted\n", n + 1);
            }
        }
    }
    let stop = stop.or_else(|| state.stop_after_calls(config, run));
    let block = BlockRecord::from(Block::Text { text: report });
    let stored = session.append(
        Some(&state.head),
        Role::User,
        &[block],
        &MessageMeta::default(),
    )?;
    state.head = stored.id;
    Ok(Some(Ran { stop }))
}

/// `text` in a fence longer than any backtick run inside it.
fn fenced(text: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat((longest + 1).max(3));
    let text = text.trim_end_matches('\n');
    format!("{fence}\n{text}\n{fence}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_is_fenced_past_its_own_backticks() {
        assert_eq!(fenced("ok\n"), "```\nok\n```");
        assert_eq!(fenced("a ```` b"), "`````\na ```` b\n`````");
    }
}
