//! "Choose hunks" done: the user's decision on each unit of the patch
//! turned into what is applied ([`selection`], the one place), the chosen
//! units applied as one patch with the usual 3-way apply and the others
//! saved as `rest.patch`, and every unit's decision recorded.

use anyhow::{Context, Result};

use super::{
    HunkDecision, PatchHunks, Review, ReviewFront, Reviewed, Selection, Tone, Verdict, apply_now,
    ended, partly_applied,
};
use ah_base::count;
use ah_record::rundir::{HunkOutcome, HunkRecord, ReviewDecision};
use ah_review::hunks;

/// Applies the accepted units and saves the others: all accepted is the
/// whole patch applied, none the patch saved, some a partial apply with
/// `chosen.patch` applied and `rest.patch` saved beside the run's patch.
pub(super) fn apply_hunks(
    review: &Review<'_>,
    units: &PatchHunks,
    decisions: &[HunkDecision],
    front: &mut dyn ReviewFront,
) -> Result<Reviewed> {
    let selection = selection(units, decisions)?;
    let mut reviewed = if selection.is_none() {
        front.say(Tone::Plain, "", "no hunks chosen; patch saved");
        ended(review.mode, ReviewDecision::Saved, "no hunk was chosen")
    } else if selection.is_all() {
        let why = "chosen by the user: every hunk";
        apply_now(review, review.patch_path, why, front)
    } else {
        apply_some(review, units, &selection, decisions, front)?
    };
    reviewed.record.hunks = records(review, units, decisions, reviewed.applied)?;
    Ok(reviewed)
}

/// Where the picker's decisions become what is applied: the accepted
/// units are chosen; a rejection, with or without its reason, and a unit
/// left undecided stay in the rest.
fn selection(units: &PatchHunks, decisions: &[HunkDecision]) -> Result<Selection> {
    let mut selection = Selection::none(units);
    for decision in decisions {
        if decision.verdict == Verdict::Accept {
            selection
                .choose(units, decision.unit)
                .context("the hunk choice names a unit the patch does not have")?;
        }
    }
    Ok(selection)
}

/// Some units chosen: `chosen.patch` applied, `rest.patch` saved.
fn apply_some(
    review: &Review<'_>,
    units: &PatchHunks,
    selection: &Selection,
    decisions: &[HunkDecision],
    front: &mut dyn ReviewFront,
) -> Result<Reviewed> {
    let (chosen_path, rest_path) = super::cut_paths(review)?;
    hunks::write(
        review.patch_path,
        review.patch,
        units,
        selection,
        &chosen_path,
        &rest_path,
    )
    .context("cannot cut the patch into the chosen hunks and the rest")?;
    let accepted = decisions
        .iter()
        .filter(|d| d.verdict == Verdict::Accept)
        .count();
    let left = decisions.len() - accepted;
    let why = format!(
        "chosen by the user: {accepted} of {}; the rest is in {}",
        count(decisions.len(), "hunk", "hunks"),
        rest_path.display()
    );
    let mut reviewed = apply_now(review, &chosen_path, &why, front);
    if reviewed.applied {
        partly_applied(
            &mut reviewed,
            &count(left, "hunk", "hunks"),
            &rest_path,
            front,
        );
    }
    Ok(reviewed)
}

/// Each decision as the manifest and the `review_done` event keep it.
fn records(
    review: &Review<'_>,
    units: &PatchHunks,
    decisions: &[HunkDecision],
    applied: bool,
) -> Result<Vec<HunkRecord>> {
    decisions
        .iter()
        .map(|decision| {
            let path = review
                .patch
                .files
                .get(decision.unit.file)
                .map(|file| file.path.clone())
                .context("the hunk choice names a file the patch does not have")?;
            let (outcome, reason) = match &decision.verdict {
                Verdict::Accept if applied => (HunkOutcome::Applied, None),
                Verdict::Accept => (HunkOutcome::NotApplied, None),
                Verdict::Reject { reason } => (HunkOutcome::Rejected, reason.clone()),
                Verdict::Undecided => (HunkOutcome::Undecided, None),
            };
            Ok(HunkRecord {
                path,
                header: units.header(decision.unit)?,
                decision: outcome,
                reason,
            })
        })
        .collect()
}
