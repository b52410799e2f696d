//! `--wait`: follows a queued follow-up until the turn it started is
//! answered, then prints the answer's text. Gives up, saying so, when the
//! ah holding the session stops before that.

use std::path::Path;
use std::time::Duration;

use anyhow::{Result, bail};

use ah_llm::{Block, Role};
use ah_record::safe_text::terminal_safe;
use ah_session::Session;
use ah_session::queue::{Owner, Queue, Status, now_ms};

/// How often the queue is looked at.
const POLL: Duration = Duration::from_millis(100);

/// Waits for message `id`, queued for `owner`, to be answered; prints the
/// text the model answered with on stdout.
pub(crate) async fn answer(queue: &mut Queue, db: &Path, id: i64, owner: Owner) -> Result<bool> {
    let pid = owner.process.pid;
    loop {
        let status = queue.status(id)?;
        if let Some(Status::Answered {
            message_id,
            head,
            outcome,
        }) = &status
        {
            return answered(db, pid, message_id.as_deref(), head.as_deref(), outcome);
        }
        match status {
            None => bail!(
                "queued message #{id} is gone from {}",
                queue.path().display()
            ),
            Some(Status::Dropped { reason }) => {
                bail!("your follow-up #{id} was not run: {reason}; run it again as a prompt")
            }
            _ => {}
        }
        // A release settles every message before the lock row goes, so an
        // owner that let go normally was caught above; this one died.
        let holds = queue
            .owner()?
            .is_some_and(|now| now.process == owner.process && now.gone(now_ms()).is_none());
        if !holds && !matches!(queue.status(id)?, Some(Status::Answered { .. })) {
            bail!(
                "ah process {pid} stopped before answering your follow-up #{id} (it is no longer \
                 running or stopped refreshing its lock); the session is free: run the prompt again"
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Prints the answer to a follow-up stored as `message_id`, whose turn
/// ended at `head` the way `outcome` says.
fn answered(
    db: &Path,
    pid: u32,
    message_id: Option<&str>,
    head: Option<&str>,
    outcome: &str,
) -> Result<bool> {
    let (Some(message_id), Some(head)) = (message_id, head) else {
        bail!("ah process {pid} stopped ({outcome}) before your follow-up's turn finished");
    };
    let session = Session::open(db)?;
    let path = session.path_to(head)?;
    let Some(at) = path.iter().position(|message| message.id == message_id) else {
        bail!(
            "session {} does not lead from your follow-up ({message_id}) to its answer ({head}):              look at the session",
            session.id()
        );
    };
    let start = at + 1;
    let texts: Vec<&str> = path[start..]
        .iter()
        .filter(|message| message.role == Role::Assistant)
        .flat_map(|message| &message.blocks)
        .filter_map(|record| match &record.block {
            Block::Text { text } if !text.trim().is_empty() => Some(text.as_str()),
            _ => None,
        })
        .collect();
    println!("{}", terminal_safe(&texts.join("\n\n")));
    if outcome == "done" {
        Ok(true)
    } else {
        eprintln!("the turn that answered your follow-up ended early: {outcome}");
        Ok(false)
    }
}
