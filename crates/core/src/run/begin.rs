//! Where a run starts in the session tree: a new prompt under the head,
//! a fork (`ah @N "prompt"`: the prompt goes under message @N), or no prompt
//! at all, which continues a turn that was cut off (a crash or an abort) by
//! sending the same conversation again.

use anyhow::Result;

use super::UsageError;
use crate::agent::close_interrupted;
use ah_llm::{Block, Role};
use ah_session::{Session, StoredMessage, WORKSPACE_AT_KEY};

/// What the run does first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Begin {
    /// Store `prompt` under the head.
    Prompt,
    /// Store the prompt under message `id` (`@seq`).
    Fork { id: String, seq: i64 },
    /// Send the conversation up to message `from` again (`None`: the head,
    /// once its unanswered tool calls are closed).
    Continue { from: Option<String> },
}

/// The prompt words split into an optional `@N` and the prompt text.
pub fn split_prompt(words: &[String]) -> (Option<i64>, String) {
    let at = words
        .first()
        .and_then(|w| w.strip_prefix('@'))
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|n| n.parse::<i64>().ok());
    match at {
        Some(seq) => (Some(seq), words[1..].join(" ")),
        None => (None, words.join(" ")),
    }
}

/// Decides how the run begins. `session` is `None` for a session the run is
/// about to create. Returns the plan and the task to record in the manifest.
pub(super) fn plan(
    session: Option<&Session>,
    fork: Option<i64>,
    prompt: &str,
) -> Result<(Begin, String)> {
    let has_prompt = !prompt.trim().is_empty();
    match (fork, session, has_prompt) {
        (Some(seq), _, false) => Err(usage(format!(
            "@{seq} needs a prompt: ah @{seq} \"what to do from there\""
        ))),
        (Some(seq), None, true) => Err(usage(format!(
            "there is no message @{seq}: the session is new; drop the @{seq} to start it"
        ))),
        (Some(seq), Some(session), true) => match session.message_at(seq)? {
            Some(message) => Ok((
                Begin::Fork {
                    id: message.id,
                    seq,
                },
                prompt.to_string(),
            )),
            None => Err(usage(format!(
                "session {} has no message @{seq} (its messages are @1 to @{}): `ah tree` shows them",
                session.id(),
                session.last_seq()?
            ))),
        },
        (None, _, true) => Ok((Begin::Prompt, prompt.to_string())),
        (None, None, false) => Err(no_prompt()),
        (None, Some(session), false) => continue_plan(session),
    }
}

/// Without a prompt: continue only a turn that was cut off.
fn continue_plan(session: &Session) -> Result<(Begin, String)> {
    let Some(head) = session.head()? else {
        return Err(no_prompt());
    };
    let path = session.path_to(&head)?;
    let Some(last) = path.last() else {
        return Err(no_prompt());
    };
    let task = match last_prompt(&path) {
        Some(text) => format!("continue: {text}"),
        None => "continue".to_string(),
    };
    let calls_tools = last
        .blocks
        .iter()
        .any(|b| matches!(b.block, Block::ToolUse { .. }));
    let from = match last.role {
        // A prompt or tool results the model never answered.
        Role::User => None,
        // Tool calls without results: they get "interrupted" results first.
        Role::Assistant if calls_tools => None,
        // An answer cut while streaming: ask again from the message before.
        Role::Assistant if last.meta.stop_reason.as_deref() == Some("aborted") => {
            last.parent_id.clone()
        }
        Role::Assistant => {
            return Err(usage(format!(
                "nothing to continue: the last message of session {} (@{}) is a finished answer; \
                 give a prompt: ah \"what next\"",
                session.id(),
                last.seq
            )));
        }
    };
    Ok((Begin::Continue { from }, task))
}

/// Moves the head to where the run starts. A fork also sets
/// `workspace_at`, so the run's files start from that point: this happens
/// before the work copy is made.
pub(super) fn enter(session: &Session, begin: &Begin) -> Result<()> {
    match begin {
        Begin::Prompt | Begin::Continue { from: None } => {}
        Begin::Fork { id, .. } => {
            session.set_head(id)?;
            session.set_context(WORKSPACE_AT_KEY, id)?;
        }
        Begin::Continue { from: Some(id) } => session.set_head(id)?,
    }
    Ok(())
}

/// Closes tool calls the head left without results and returns the head:
/// the message to store the prompt under, or to run from (to continue).
pub(super) fn position(session: &mut Session) -> Result<Option<String>> {
    close_interrupted(session)?;
    Ok(session.head()?)
}

/// The text of the newest prompt on `path`, first line only.
fn last_prompt(path: &[StoredMessage]) -> Option<String> {
    path.iter()
        .rev()
        .filter(|m| m.role == Role::User)
        .find_map(|m| {
            m.blocks.iter().find_map(|b| match &b.block {
                Block::Text { text } => text.lines().next().map(str::to_string),
                _ => None,
            })
        })
}

fn no_prompt() -> anyhow::Error {
    usage(
        "no prompt given: say what to do, e.g. ah -C ~/src/repo \"make the tests pass\" (see ah --help)"
            .to_string(),
    )
}

fn usage(message: String) -> anyhow::Error {
    UsageError::Message(message).into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ah_session::{BlockRecord, MessageMeta};
    use serde_json::json;

    fn session() -> (tempfile::TempDir, Session) {
        let dir = tempfile::tempdir().unwrap();
        let session = Session::create(&dir.path().join(".ah")).unwrap();
        (dir, session)
    }

    fn append(
        session: &mut Session,
        parent: Option<&str>,
        role: Role,
        block: Block,
        stop: Option<&str>,
    ) -> String {
        let meta = MessageMeta {
            stop_reason: stop.map(str::to_string),
            ..MessageMeta::default()
        };
        session
            .append(parent, role, &[BlockRecord::from(block)], &meta)
            .unwrap()
            .id
    }

    fn text(text: &str) -> Block {
        Block::Text { text: text.into() }
    }

    fn begin(session: &Session, fork: Option<i64>, prompt: &str) -> Begin {
        plan(Some(session), fork, prompt).unwrap().0
    }

    fn usage_error(result: Result<(Begin, String)>) -> String {
        let err = result.unwrap_err();
        assert!(err.downcast_ref::<UsageError>().is_some(), "{err}");
        err.to_string()
    }

    #[test]
    fn without_a_prompt_only_a_cut_turn_continues() {
        let (_dir, mut session) = session();
        assert!(usage_error(plan(Some(&session), None, "")).contains("no prompt given"));
        let prompt = append(&mut session, None, Role::User, text("fix it"), None);
        // An unanswered prompt is sent again.
        assert_eq!(
            plan(Some(&session), None, " ").unwrap(),
            (
                Begin::Continue { from: None },
                "continue: fix it".to_string()
            )
        );
        // An answer cut while streaming: from the message before it.
        append(
            &mut session,
            Some(&prompt),
            Role::Assistant,
            text("hal"),
            Some("aborted"),
        );
        assert_eq!(
            begin(&session, None, ""),
            Begin::Continue {
                from: Some(prompt.clone())
            }
        );
        // Tool calls without results: they are closed first.
        let call = Block::ToolUse {
            id: "t1".into(),
            name: "bash".into(),
            input: json!({"command": "ls"}),
        };
        let calls = append(
            &mut session,
            Some(&prompt),
            Role::Assistant,
            call,
            Some("tool_use"),
        );
        assert_eq!(begin(&session, None, ""), Begin::Continue { from: None });
        enter(&session, &Begin::Continue { from: None }).unwrap();
        let start = position(&mut session).unwrap().unwrap();
        let closed = session.path_to(&start).unwrap();
        assert_eq!(closed[closed.len() - 2].id, calls);
        // A finished answer: nothing to continue.
        append(
            &mut session,
            Some(&start),
            Role::Assistant,
            text("done"),
            Some("end_turn"),
        );
        assert!(usage_error(plan(Some(&session), None, "")).contains("nothing to continue"));
    }

    #[test]
    fn a_fork_moves_the_head_and_marks_the_workspace() {
        let (_dir, mut session) = session();
        let first = append(&mut session, None, Role::User, text("one"), None);
        append(
            &mut session,
            Some(&first),
            Role::Assistant,
            text("two"),
            None,
        );
        let fork = begin(&session, Some(1), "again");
        assert_eq!(
            fork,
            Begin::Fork {
                id: first.clone(),
                seq: 1
            }
        );
        enter(&session, &fork).unwrap();
        assert_eq!(session.head().unwrap(), Some(first.clone()));
        assert_eq!(session.context(WORKSPACE_AT_KEY).unwrap(), Some(first));
        let missing = usage_error(plan(Some(&session), Some(9), "x"));
        assert!(
            missing.contains(&session.id()) && missing.contains("@1 to @2"),
            "{missing}"
        );
        assert!(usage_error(plan(Some(&session), Some(1), "")).contains("needs a prompt"));
        assert!(usage_error(plan(None, Some(1), "x")).contains("session is new"));
    }

    fn words(text: &str) -> Vec<String> {
        text.split(' ').map(str::to_string).collect()
    }

    #[test]
    fn a_leading_at_number_is_a_fork() {
        assert_eq!(
            split_prompt(&words("@12 try again")),
            (Some(12), "try again".to_string())
        );
        assert_eq!(split_prompt(&words("@3")), (Some(3), String::new()));
        assert_eq!(
            split_prompt(&words("@x do it")),
            (None, "@x do it".to_string())
        );
        assert_eq!(split_prompt(&words("@ go")), (None, "@ go".to_string()));
        assert_eq!(
            split_prompt(&words("look at @4")),
            (None, "look at @4".to_string())
        );
    }
}
