//! Time travel: where a conversation's files stand at a message.
//!
//! Forking a conversation at a message (or checking it out) sets the session
//! context key `workspace_at` ([`ah_session::WORKSPACE_AT_KEY`]) to that
//! message; the next run starts its work copy from the files as they were
//! there. Those files are found in the session itself: every tool result of
//! a run stores, in its `details`, the run id, the step, and `head`, the
//! run's last accepted commit once the step was over (see `agent::step::result_record`). So the state at a message is the
//! `head` of the latest tool result in its ancestry that belongs to a run:
//!
//! - a step that changed files and stood: its own commit;
//! - a step that changed nothing, or was undone for breaking the write
//!   policy: the commit before it (the last accepted one, which is the run's
//!   baseline when no step had changed files yet);
//! - no run in the ancestry (forked before any tool ran): no state; the run
//!   starts from the project's current files.
//!
//! Tool results without a run (a call cut off, refused by the tool limit,
//! interrupted) are skipped: they changed nothing that was recorded.
//!
//! The same state at the head is where a session goes on when its previous
//! run's patch was not applied (see [`files`], which prepares a run's work
//! copy from these answers): that run is the one its latest `agent_start`
//! event names ([`latest_run`]).

pub mod files;

use serde_json::Value;

use ah_llm::Block;
use ah_session::{Session, SessionError, StoredMessage};

/// Where the files stand at a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilesAt {
    /// The message's number (`@N`).
    pub message_seq: i64,
    /// The step whose files the message stands on; `None` when no tool of
    /// a run ran before it (the project's own files).
    pub step: Option<StepPoint>,
}

/// The step of a run whose files a message stands on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepPoint {
    pub run_id: String,
    pub step: u32,
    /// The run's last accepted commit after the step (hex).
    pub head: String,
    /// The number (`@N`) of the message holding the step's result.
    pub message_seq: i64,
}

#[derive(Debug, thiserror::Error)]
pub enum TimeTravelError {
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error(
        "step {step} of run {run_id} (message @{message_seq}) was recorded by an older ah that did \
         not keep the state of the files after each step, so the files of that point cannot be \
         restored: fork from a later point, or pass --no-restore to start from the project's \
         current files"
    )]
    NotRecorded {
        run_id: String,
        step: u64,
        message_seq: i64,
    },
}

/// The id of the session's latest run: the one its newest `agent_start`
/// event names.
pub fn latest_run(session: &Session) -> Result<Option<String>, SessionError> {
    let start = session.last_event("agent_start")?;
    Ok(start.and_then(|details| details.get("run_id")?.as_str().map(str::to_string)))
}

/// Where the files stand at `message_id`: at the latest tool result of a
/// run in the message's ancestry (the message itself included).
pub fn files_at(session: &Session, message_id: &str) -> Result<FilesAt, TimeTravelError> {
    let path = session.path_to(message_id)?;
    let message_seq = path.last().map_or(0, |m| m.seq);
    Ok(FilesAt {
        message_seq,
        step: last_step(&path)?,
    })
}

/// The latest step of a run whose result is in `path`.
fn last_step(path: &[StoredMessage]) -> Result<Option<StepPoint>, TimeTravelError> {
    for message in path.iter().rev() {
        // A message's results are in step order: the last one is the latest.
        for record in message.blocks.iter().rev() {
            if !matches!(record.block, Block::ToolResult { .. }) {
                continue;
            }
            let Some(details) = &record.details else {
                continue;
            };
            let Some(run_id) = details.get("run_id").and_then(Value::as_str) else {
                continue;
            };
            let step = details.get("step").and_then(Value::as_u64).unwrap_or(0);
            let head = details.get("head").and_then(Value::as_str);
            let (Some(head), Ok(step)) = (head, u32::try_from(step)) else {
                return Err(TimeTravelError::NotRecorded {
                    run_id: run_id.to_string(),
                    step,
                    message_seq: message.seq,
                });
            };
            return Ok(Some(StepPoint {
                run_id: run_id.to_string(),
                step,
                head: head.to_string(),
                message_seq: message.seq,
            }));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::json;

    use super::*;
    use crate::agent::step::result_record;
    use ah_llm::Role;
    use ah_record::artifacts;
    use ah_record::policy::Policy;
    use ah_record::run::Run;
    use ah_record::rundir::RunDir;
    use ah_sandbox::none::NoneBackend;
    use ah_session::{BlockRecord, MessageMeta};

    /// A real run (none backend) on a small project that denies `secret*`.
    fn run(project: &Path) -> Run {
        std::fs::write(project.join("keep.txt"), "keep\n").unwrap();
        let dir = RunDir::create(&project.join(".ah")).unwrap();
        let policy = Policy::load(project, None, &[], &["secret*".to_string()]).unwrap();
        let start = Run::prepare(project, &dir, &policy).unwrap();
        let backend = Box::new(NoneBackend::new(dir.work_dir()));
        Run::attach(dir, start, backend, policy, artifacts::DEFAULT_MAX_BYTES)
    }

    /// Runs a bash step and stores its result as a user message under
    /// `parent`; returns the message id.
    async fn step(session: &mut Session, run: &mut Run, parent: &str, command: &str) -> String {
        let outcome = run.tool_step("bash", &json!({ "command": command })).await;
        let record = result_record("toolu", "bash", &run.id(), &outcome);
        let stored = session
            .append(Some(parent), Role::User, &[record], &MessageMeta::default())
            .unwrap();
        stored.id
    }

    fn text(session: &mut Session, parent: Option<&str>, role: Role) -> String {
        let block = BlockRecord::from(Block::Text { text: "x".into() });
        session
            .append(parent, role, &[block], &MessageMeta::default())
            .unwrap()
            .id
    }

    #[tokio::test]
    async fn the_state_is_the_last_accepted_commit_at_or_before_the_message() {
        let project = tempfile::tempdir().unwrap();
        let mut run = run(project.path());
        let baseline = run.baseline().await.unwrap();
        let mut session = Session::create(&project.path().join(".ah")).unwrap();
        let prompt = text(&mut session, None, Role::User);
        let answer = text(&mut session, Some(&prompt), Role::Assistant);
        // Before any tool ran there is no state: the host's files.
        assert_eq!(files_at(&session, &answer).unwrap().step, None);

        // A step that changed nothing stands on the baseline.
        let looked = step(&mut session, &mut run, &answer, "cat keep.txt").await;
        let at = files_at(&session, &looked).unwrap().step.unwrap();
        assert_eq!((at.step, at.head.as_str()), (1, baseline.as_str()));
        assert_eq!(at.run_id, run.id());

        let wrote = step(&mut session, &mut run, &looked, "echo one > a.txt").await;
        let written = files_at(&session, &wrote).unwrap().step.unwrap();
        assert_eq!(written.step, 2);
        assert_ne!(written.head, baseline);

        // Unchanged and undone steps stand on the step-2 commit, and so do
        // the messages after them.
        let read = step(&mut session, &mut run, &wrote, "cat a.txt").await;
        let denied = step(&mut session, &mut run, &read, "echo k > secret.txt").await;
        let after = text(&mut session, Some(&denied), Role::Assistant);
        for (message, n) in [(&read, 3), (&denied, 4), (&after, 4)] {
            let at = files_at(&session, message).unwrap().step.unwrap();
            assert_eq!((at.step, &at.head), (n, &written.head), "step {n}");
        }
        assert!(!run.dir().work_dir().join("secret.txt").exists());
    }

    #[tokio::test]
    async fn results_of_no_run_are_skipped_and_older_records_are_refused() {
        let project = tempfile::tempdir().unwrap();
        let mut run = run(project.path());
        let mut session = Session::create(&project.path().join(".ah")).unwrap();
        let prompt = text(&mut session, None, Role::User);
        let wrote = step(&mut session, &mut run, &prompt, "echo one > a.txt").await;
        let head = files_at(&session, &wrote).unwrap().step.unwrap().head;
        // An interrupted call has a result without a run.
        let cut = BlockRecord::tool_result("toolu_2", "bash", "interrupted".into(), true);
        let interrupted = session
            .append(Some(&wrote), Role::User, &[cut], &MessageMeta::default())
            .unwrap();
        let at = files_at(&session, &interrupted.id).unwrap().step.unwrap();
        assert_eq!((at.step, at.head), (1, head));

        let mut old = BlockRecord::tool_result("toolu_3", "bash", "ok".into(), false);
        old.details = Some(json!({"run_id": run.id(), "step": 2, "commit": null}));
        let older = session
            .append(
                Some(&interrupted.id),
                Role::User,
                &[old],
                &MessageMeta::default(),
            )
            .unwrap();
        let err = files_at(&session, &older.id).unwrap_err();
        assert!(
            matches!(err, TimeTravelError::NotRecorded { step: 2, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("--no-restore"), "{err}");
    }
}
