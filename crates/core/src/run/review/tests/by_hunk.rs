//! "Choose hunks" without a terminal: a front that reads the patch's units
//! as the picker does and decides each with a set rule; what is applied,
//! saved and recorded.

use super::*;
use ah_record::rundir::{HunkOutcome, HunkRecord};

/// A front-end whose user decides each unit by `rule` (given the unit's
/// file index).
struct Picker {
    rule: fn(usize) -> Verdict,
    lines: Vec<String>,
}

impl ReviewFront for Picker {
    fn choose(&mut self, patch: &PatchToChoose<'_>) -> Result<Choice> {
        let hunks = patch.hunks()?;
        let decisions = hunks
            .units()
            .into_iter()
            .map(|unit| HunkDecision {
                unit,
                header: hunks.header(unit).unwrap(),
                verdict: (self.rule)(unit.file),
            })
            .collect();
        Ok(Choice::Hunks(decisions))
    }

    fn say(&mut self, _tone: Tone, lead: &str, rest: &str) {
        self.lines.push(format!("{lead} {rest}").trim().to_string());
    }
}

fn pick(world: &World, rule: fn(usize) -> Verdict) -> (Reviewed, Vec<String>) {
    let mut front = Picker {
        rule,
        lines: Vec::new(),
    };
    let request = Review {
        mode: ReviewMode::Ask,
        project: &world.project,
        patch: &world.patch,
        patch_path: &world.patch_path,
        poisoned: None,
        policy: Policy::builtin().unwrap(),
        task: "change a and b",
        no_commit: true,
        head: "h1",
        decided: None,
        rounds: &[],
        pager: None,
    };
    (review(&request, &mut front).unwrap(), front.lines)
}

fn record(path: &str, decision: HunkOutcome, reason: Option<&str>) -> HunkRecord {
    HunkRecord {
        path: path.into(),
        header: "@@ -1 +1 @@".into(),
        decision,
        reason: reason.map(String::from),
    }
}

#[test]
fn some_hunks_apply_the_rest_is_saved_and_each_decision_recorded() {
    let world = World::new();
    let (reviewed, lines) = pick(&world, |file| match file {
        0 => Verdict::Accept,
        _ => Verdict::Reject {
            reason: Some("keep the bee".into()),
        },
    });
    assert_eq!(reviewed.record.decision, ReviewDecision::PartlyApplied);
    assert!(reviewed.applied && !reviewed.failed);
    assert_eq!(
        (world.read("a.txt"), world.read("b.txt")),
        ("two\n".into(), "bee\n".into())
    );
    assert_eq!(
        reviewed.record.hunks,
        [
            record("a.txt", HunkOutcome::Applied, None),
            record("b.txt", HunkOutcome::Rejected, Some("keep the bee")),
        ]
    );
    let reason = reviewed.record.reason.unwrap();
    assert!(
        reason.starts_with("chosen by the user: 1 of 2 hunks"),
        "{reason}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("not applied: 1 hunk more, saved in ")),
        "{lines:?}"
    );
    let run_dir = world.patch_path.parent().unwrap();
    let rest = run_dir.join("rest.patch");
    git(&world.project, &["apply", "--3way", rest.to_str().unwrap()]);
    assert_eq!(world.read("b.txt"), "bee2\n", "the rest applies on top");
}

#[test]
fn every_hunk_accepted_is_the_whole_patch_applied() {
    let world = World::new();
    let (reviewed, _) = pick(&world, |_| Verdict::Accept);
    assert_eq!(reviewed.record.decision, ReviewDecision::Applied);
    assert_eq!(
        reviewed.record.reason.as_deref(),
        Some("chosen by the user: every hunk")
    );
    assert_eq!(
        (world.read("a.txt"), world.read("b.txt")),
        ("two\n".into(), "bee2\n".into())
    );
    assert!(
        reviewed
            .record
            .hunks
            .iter()
            .all(|h| h.decision == HunkOutcome::Applied)
    );
}

#[test]
fn no_hunk_accepted_saves_the_patch_and_records_why() {
    let world = World::new();
    let (reviewed, lines) = pick(&world, |file| match file {
        0 => Verdict::Reject { reason: None },
        _ => Verdict::Undecided,
    });
    assert_eq!(reviewed.record.decision, ReviewDecision::Saved);
    assert!(!reviewed.applied && world.untouched());
    assert_eq!(
        reviewed.record.hunks,
        [
            record("a.txt", HunkOutcome::Rejected, None),
            record("b.txt", HunkOutcome::Undecided, None),
        ]
    );
    assert!(
        lines.contains(&"no hunks chosen; patch saved".to_string()),
        "{lines:?}"
    );
}

#[test]
fn leaving_the_hunk_choice_saves_the_patch() {
    let world = World::new();
    let mut front = Fake::answering(Choice::Left(Question::WhichHunks));
    let reviewed = world.review(ReviewMode::Ask, None, &mut front);
    assert_eq!(reviewed.record.decision, ReviewDecision::Saved);
    assert_eq!(
        reviewed.record.reason.as_deref(),
        Some("the hunk choice was left")
    );
    assert!(reviewed.record.hunks.is_empty() && world.untouched());
}

#[test]
fn a_unit_the_patch_does_not_have_is_an_error_not_an_apply() {
    let world = World::new();
    let bogus = HunkDecision {
        unit: Unit {
            file: 0,
            part: Part::Hunk(5),
        },
        header: "@@ -9 +9 @@".into(),
        verdict: Verdict::Accept,
    };
    let mut front = Fake::answering(Choice::Hunks(vec![bogus]));
    let request = Review {
        mode: ReviewMode::Ask,
        project: &world.project,
        patch: &world.patch,
        patch_path: &world.patch_path,
        poisoned: None,
        policy: Policy::builtin().unwrap(),
        task: "t",
        no_commit: true,
        head: "h1",
        decided: None,
        rounds: &[],
        pager: None,
    };
    let err = review(&request, &mut front).unwrap_err();
    assert!(
        format!("{err:#}").contains("names a unit the patch does not have"),
        "{err:#}"
    );
    assert!(world.untouched());
}
