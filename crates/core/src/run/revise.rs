//! A review held before the run's end ([`HeldReview`]) that sends the
//! model back to work: the user's note and the hunks they rejected become
//! the next user message of the run's branch ([`send_back`]), and the round
//! is recorded ([`ReviseRound`]). The agent goes on in the same sandbox and
//! work copy; the review opens again on the new patch (the loop that drives
//! it again is the run's, `run/mod.rs`).

use anyhow::{Context, Result};

use super::review::{self, Decided, Review, Revise, Round};
use super::{Front, ReviewMode, RunOptions, RunSetup};
use ah_llm::{Block, Role};
use ah_record::run::Run;
use ah_record::rundir::ReviseRound;
use ah_record::safe_text::terminal_safe;
use ah_session::{BlockRecord, MessageMeta, Session};

/// The review of a run that can go on, held before its end: the rounds
/// that sent the model back, and the choice that ended them.
#[derive(Default)]
pub(crate) struct HeldReview {
    pub(crate) rounds: Vec<ReviseRound>,
    pub(crate) decided: Option<Decided>,
}

impl HeldReview {
    /// Shows the run's patch as it stands and asks; the notes and the
    /// shadow head they were written at when the user sends the model
    /// back. A choice is kept for the run's end; a patch that cannot be
    /// offered (empty, refused, not saved, not made) is left to the end's
    /// own review.
    pub(crate) async fn hold(
        &mut self,
        run: &mut Run,
        setup: &RunSetup,
        options: &RunOptions,
        front: &mut dyn Front,
    ) -> Option<(Revise, String)> {
        let draft = match run.draft_patch().await {
            Ok(Some(draft)) => draft,
            Ok(None) => return None,
            Err(err) => {
                front.notice(&format!(
                    "warning: the patch could not be made before the run's end ({}); no revise",
                    terminal_safe(&err.to_string())
                ));
                return None;
            }
        };
        if draft.patch.files.is_empty() || draft.poisoned.is_some() {
            return None;
        }
        let request = Review {
            mode: ReviewMode::Ask,
            project: &setup.project,
            patch: &draft.patch,
            patch_path: &draft.patch_path,
            poisoned: None,
            policy: &setup.policy,
            task: &setup.task,
            no_commit: options.no_commit,
            head: &draft.head,
            decided: None,
            rounds: &self.rounds,
            pager: setup.pager.as_deref(),
        };
        match review::round(&request, front) {
            Ok(Round::Revise(revise)) => Some((revise, draft.head)),
            Ok(Round::Decided(decided)) => {
                self.decided = Some(decided);
                None
            }
            Err(err) => {
                front.notice(&format!(
                    "warning: the review could not ask ({}); asking at the run's end",
                    terminal_safe(&err.to_string())
                ));
                None
            }
        }
    }
}

/// The most of the user's note the model is sent.
const MAX_NOTE: usize = 16 * 1024;
/// The most rejected hunks listed one by one.
const MAX_LISTED: usize = 100;
/// The most of a reason the model is sent.
const MAX_REASON: usize = 2 * 1024;

/// Appends the user message that sends the model back to work (under
/// `head`, the branch's last message) and returns its id, the round to
/// record beside it.
pub(crate) fn send_back(
    session: &mut Session,
    head: &str,
    revise: &Revise,
    round: usize,
    shadow_head: &str,
) -> Result<(String, ReviseRound)> {
    let text = message(revise, round);
    let block = BlockRecord::from(Block::Text { text });
    let id = session
        .append(Some(head), Role::User, &[block], &MessageMeta::default())
        .context("cannot store the review's notes in the session")?
        .id;
    let record = ReviseRound {
        head: shadow_head.to_string(),
        note: revise.note.clone(),
        rejected: revise.rejected.clone(),
    };
    Ok((id, record))
}

/// What the model reads: that nothing was applied, the note, the rejected
/// hunks with their reasons.
pub(crate) fn message(revise: &Revise, round: usize) -> String {
    let opening = format!(
        "[ah: the user reviewed your changes (review round {round}) and sent them back to be \
         revised; nothing was applied. Work on in the same files, then end your turn: the user \
         will review the whole patch again.]"
    );
    message_after(opening, revise)
}

/// What the model reads when the user reviews a saved run again and sends
/// it back: the first message of a new run, whose files are the saved
/// run's.
pub(crate) fn later_message(revise: &Revise) -> String {
    let opening = "[ah: the user reviewed your changes again after your run ended, and sent them \
                   back to be revised; nothing was applied. The work directory holds your \
                   changes as you left them: work on in the same files, then end your turn.]";
    message_after(opening.to_string(), revise)
}

/// `opening`, then the note and the rejected hunks with their reasons.
fn message_after(mut text: String, revise: &Revise) -> String {
    let note = revise.note.trim();
    if !note.is_empty() {
        text.push_str("\n\nThe user's note:\n");
        text.push_str(cut(note, MAX_NOTE));
    }
    if !revise.rejected.is_empty() {
        text.push_str("\n\nHunks the user rejected (change or undo them):");
        for hunk in revise.rejected.iter().take(MAX_LISTED) {
            text.push_str(&format!("\n- {} {}", hunk.path, hunk.header));
            if let Some(reason) = hunk.reason.as_deref().map(str::trim)
                && !reason.is_empty()
            {
                text.push_str(&format!(": {}", cut(reason, MAX_REASON)));
            }
        }
        if revise.rejected.len() > MAX_LISTED {
            text.push_str(&format!(
                "\n- and {} more",
                revise.rejected.len() - MAX_LISTED
            ));
        }
        text.push_str("\nThe hunks not listed were acceptable as they are.");
    }
    text
}

/// `text` up to `max` bytes, on a character boundary.
fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use ah_record::rundir::{HunkOutcome, HunkRecord};

    #[test]
    fn the_message_names_the_note_and_every_rejected_hunk_with_its_reason() {
        let revise = Revise {
            note: "use the logger, not println".into(),
            rejected: vec![
                HunkRecord {
                    decision: HunkOutcome::Rejected,
                    path: "src/a.rs".into(),
                    header: "@@ -1,3 +1,4 @@ fn main".into(),
                    reason: Some("keep the old name".into()),
                },
                HunkRecord {
                    decision: HunkOutcome::Rejected,
                    path: "b.txt".into(),
                    header: "deleted file".into(),
                    reason: None,
                },
            ],
        };
        let text = message(&revise, 2);
        assert!(text.contains("review round 2"), "{text}");
        assert!(text.contains("nothing was applied"), "{text}");
        assert!(text.contains("use the logger, not println"), "{text}");
        assert!(
            text.contains("- src/a.rs @@ -1,3 +1,4 @@ fn main: keep the old name"),
            "{text}"
        );
        assert!(text.contains("- b.txt deleted file\n"), "{text}");
    }

    #[test]
    fn long_notes_and_long_lists_are_cut() {
        let hunk = HunkRecord {
            decision: HunkOutcome::Rejected,
            path: "f".into(),
            header: "@@ -1 +1 @@".into(),
            reason: Some("é".repeat(MAX_REASON)),
        };
        let revise = Revise {
            note: "ü".repeat(MAX_NOTE),
            rejected: vec![hunk; MAX_LISTED + 5],
        };
        let text = message(&revise, 1);
        assert!(text.contains("- and 5 more"), "{text}");
        assert!(text.len() < MAX_NOTE + (MAX_LISTED + 1) * (MAX_REASON + 40) + 1024);
    }
}
