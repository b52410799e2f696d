//! The review held before a run's end (or before one of several attempts
//! is acted on): the patch shown and the user's choice returned, nothing
//! decided yet. A revise — or hunks rejected with a reason — sends the
//! model back ([`Round::Revise`]); any other choice is kept with the
//! shadow head it was made at ([`Decided`]) for the review proper.

use anyhow::Result;

use super::{Choice, HunkDecision, Review, ReviewFront, Revise, Verdict, present};
use ah_record::rundir::{HunkOutcome, HunkRecord};

/// A choice made in a review before the run's end, acted on at the end
/// when the run's files are still those the user saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decided {
    /// The shadow repo's head the reviewed patch was made at.
    pub(crate) head: String,
    pub(crate) choice: Choice,
}

/// What a review held before the run's end came to.
#[derive(Debug)]
pub(crate) enum Round {
    /// Send the model back to work.
    Revise(Revise),
    /// Act on this once the run has ended.
    Decided(Decided),
}

/// The review of a run that can go on, held before its end (the caller
/// made sure: `ask`, a patch that may be applied, a front that can ask):
/// the patch shown, and what the user chose, decided nothing yet.
pub(crate) fn round(review: &Review<'_>, front: &mut dyn ReviewFront) -> Result<Round> {
    present(review, front)?;
    let choice = front.choose(&review.to_choose(true, &[], 0))?;
    Ok(match revise_of(review, choice) {
        Ok(revise) => Round::Revise(revise),
        Err(choice) => Round::Decided(Decided {
            head: review.head.to_string(),
            choice,
        }),
    })
}

/// What sends the model back: a revise, or hunks rejected with a reason
/// (each rejected hunk goes back with its reason, if it has one); any
/// other choice, as it was.
fn revise_of(review: &Review<'_>, choice: Choice) -> Result<Revise, Choice> {
    let decisions = match choice {
        Choice::Revise(revise) => return Ok(revise),
        Choice::Hunks(decisions) => decisions,
        other => return Err(other),
    };
    let reasoned = |d: &HunkDecision| matches!(d.verdict, Verdict::Reject { reason: Some(_) });
    if !decisions.iter().any(reasoned) {
        return Err(Choice::Hunks(decisions));
    }
    let rejected = decisions
        .iter()
        .filter_map(|d| match &d.verdict {
            Verdict::Reject { reason } => Some(HunkRecord {
                path: review
                    .patch
                    .files
                    .get(d.unit.file)
                    .map_or_else(String::new, |file| file.path.clone()),
                header: d.header.clone(),
                decision: HunkOutcome::Rejected,
                reason: reason.clone(),
            }),
            _ => None,
        })
        .collect();
    Ok(Revise {
        note: String::new(),
        rejected,
    })
}

/// The review of one of several attempts of a task (`attempts`, this one
/// at `this`), held before it is acted on: the patch shown, and what the
/// user chose, decided nothing yet (another attempt, say).
pub(crate) fn round_among(
    review: &Review<'_>,
    attempts: &[String],
    this: usize,
    front: &mut dyn ReviewFront,
) -> Result<Round> {
    present(review, front)?;
    let choice = front.choose(&review.to_choose(false, attempts, this))?;
    Ok(Round::Decided(Decided {
        head: review.head.to_string(),
        choice,
    }))
}
