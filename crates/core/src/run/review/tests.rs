//! The review's decisions without a terminal: a front that answers with a
//! set choice (and fails the test when asked without one) and keeps what it
//! was told, and a real git project the patch applies to.

mod by_hunk;

use std::path::PathBuf;

use super::*;
use ah_record::patch::{FileStat, MODE_FILE};
use ah_record::testing::git;

/// A front-end whose user always answers `answer`.
#[derive(Default)]
struct Fake {
    answer: Option<Choice>,
    /// The files it was asked about, when it was asked.
    asked: Option<Vec<FileToChoose>>,
    lines: Vec<(Tone, String)>,
}

impl Fake {
    fn answering(choice: Choice) -> Fake {
        Fake {
            answer: Some(choice),
            ..Fake::default()
        }
    }

    fn said(&self, tone: Tone, text: &str) -> bool {
        self.lines
            .iter()
            .any(|(t, line)| *t == tone && line == text)
    }
}

impl ReviewFront for Fake {
    fn choose(&mut self, patch: &PatchToChoose<'_>) -> Result<Choice> {
        self.asked = Some(patch.files.clone());
        Ok(self.answer.clone().expect("the front was asked"))
    }

    fn say(&mut self, tone: Tone, lead: &str, rest: &str) {
        let line = format!("{lead} {rest}").trim().to_string();
        self.lines.push((tone, line));
    }
}

/// A git project with `a.txt` and `b.txt` committed, and a run's patch that
/// changes one line of each, saved outside the project as a run does.
struct World {
    _tmp: tempfile::TempDir,
    project: PathBuf,
    patch_path: PathBuf,
    patch: PatchInfo,
}

impl World {
    fn new() -> World {
        let tmp = tempfile::tempdir().unwrap();
        let project = tmp.path().join("project");
        std::fs::create_dir(&project).unwrap();
        std::fs::write(project.join("a.txt"), "one\n").unwrap();
        std::fs::write(project.join("b.txt"), "bee\n").unwrap();
        git(&project, &["init", "-q"]);
        git(&project, &["add", "."]);
        git(&project, &["commit", "-qm", "initial"]);
        std::fs::write(project.join("a.txt"), "two\n").unwrap();
        std::fs::write(project.join("b.txt"), "bee2\n").unwrap();
        let text = git(&project, &["diff", "--binary", "--full-index"]) + "\n";
        git(&project, &["checkout", "--", "."]);
        let run_dir = tmp.path().join("runs").join("01RUN");
        std::fs::create_dir_all(&run_dir).unwrap();
        let patch_path = run_dir.join("session.patch");
        std::fs::write(&patch_path, &text).unwrap();
        let patch = PatchInfo {
            files: vec![stat("a.txt"), stat("b.txt")],
            added_lines: 2,
            removed_lines: 2,
            bytes: text.len() as u64,
            left_out: Vec::new(),
        };
        World {
            _tmp: tmp,
            project,
            patch_path,
            patch,
        }
    }

    fn review(&self, mode: ReviewMode, poisoned: Option<&str>, front: &mut Fake) -> Reviewed {
        let request = Review {
            mode,
            project: &self.project,
            patch: &self.patch,
            patch_path: &self.patch_path,
            poisoned,
            policy: Policy::builtin().unwrap(),
            task: "change a and b",
            // The machine's git identity stays out of the test.
            no_commit: true,
            head: "h1",
            decided: None,
            rounds: &[],
            pager: None,
        };
        review(&request, front).unwrap()
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.project.join(name)).unwrap()
    }

    fn untouched(&self) -> bool {
        self.read("a.txt") == "one\n" && self.read("b.txt") == "bee\n"
    }
}

/// A text file with one line changed.
fn stat(path: &str) -> FileStat {
    FileStat {
        path: path.to_string(),
        added: 1,
        removed: 1,
        binary: false,
        old_mode: MODE_FILE,
        new_mode: MODE_FILE,
        bytes: 100,
    }
}

#[test]
fn apply_all_applies_the_patch_and_records_it() {
    let world = World::new();
    let mut front = Fake::answering(Choice::ApplyAll);
    let reviewed = world.review(ReviewMode::Ask, None, &mut front);
    assert_eq!(reviewed.record.decision, ReviewDecision::Applied);
    assert_eq!(
        reviewed.record.reason.as_deref(),
        Some("chosen by the user")
    );
    assert!(reviewed.applied && !reviewed.failed);
    assert_eq!(
        (world.read("a.txt"), world.read("b.txt")),
        ("two\n".into(), "bee2\n".into())
    );
    assert!(
        front.said(Tone::Good, "applied: 2 files (3-way apply)"),
        "{:?}",
        front.lines
    );
    let asked = front.asked.unwrap();
    assert_eq!(asked[0].name, "a.txt");
    assert_eq!(asked[0].lines, Some((1, 1)));
}

#[test]
fn chosen_files_apply_as_a_sub_patch_and_the_rest_is_saved() {
    let world = World::new();
    let mut front = Fake::answering(Choice::Files(vec![1]));
    let reviewed = world.review(ReviewMode::Ask, None, &mut front);
    assert_eq!(reviewed.record.decision, ReviewDecision::PartlyApplied);
    assert!(reviewed.applied && !reviewed.failed);
    assert_eq!(world.read("a.txt"), "one\n", "not chosen, not applied");
    assert_eq!(world.read("b.txt"), "bee2\n");
    let run_dir = world.patch_path.parent().unwrap();
    let rest = std::fs::read_to_string(run_dir.join("rest.patch")).unwrap();
    assert!(
        rest.contains("+++ b/a.txt") && !rest.contains("b.txt"),
        "{rest}"
    );
    let reason = reviewed.record.reason.unwrap();
    assert!(
        reason.starts_with("chosen by the user: 1 of 2 files"),
        "{reason}"
    );
}

#[test]
fn a_poisoned_patch_is_refused_and_nobody_is_asked() {
    for mode in [ReviewMode::Ask, ReviewMode::Auto, ReviewMode::Never] {
        let world = World::new();
        let mut front = Fake::answering(Choice::ApplyAll);
        let reviewed = world.review(mode, Some("a step could not be undone"), &mut front);
        assert_eq!(
            reviewed.record.decision,
            ReviewDecision::Refused,
            "{mode:?}"
        );
        assert!(reviewed.failed && !reviewed.applied);
        assert!(front.asked.is_none(), "{mode:?}: the front was asked");
        assert!(world.untouched());
        assert!(front.said(
            Tone::Refused,
            "refused: this run's patch must not be applied: a step could not be undone"
        ));
    }
}

#[test]
fn auto_applies_a_small_clean_patch_without_asking() {
    let world = World::new();
    // A front with no answer fails the test if it is asked.
    let mut front = Fake::default();
    let reviewed = world.review(ReviewMode::Auto, None, &mut front);
    assert_eq!(reviewed.record.decision, ReviewDecision::Applied);
    assert_eq!(
        reviewed.record.reason.as_deref(),
        Some("auto: small, clean, unrestricted")
    );
    assert_eq!(world.read("b.txt"), "bee2\n");
}

#[test]
fn never_saves_without_asking() {
    let world = World::new();
    let mut front = Fake::default();
    let reviewed = world.review(ReviewMode::Never, None, &mut front);
    assert_eq!(reviewed.record.decision, ReviewDecision::Saved);
    assert!(world.untouched() && !reviewed.failed);
}

#[test]
fn every_answer_but_an_apply_keeps_the_project_as_it_was() {
    let cases = [
        (
            Choice::NobodyToAsk,
            ReviewDecision::Saved,
            "no terminal to ask on",
        ),
        (
            Choice::SaveOnly,
            ReviewDecision::Saved,
            "chosen by the user",
        ),
        (
            Choice::Discard,
            ReviewDecision::Discarded,
            "chosen by the user",
        ),
        (
            Choice::Left(Question::WhatToDo),
            ReviewDecision::Saved,
            "the review was interrupted",
        ),
        (
            Choice::Left(Question::WhichFiles),
            ReviewDecision::Saved,
            "the file choice was left",
        ),
        (
            Choice::Files(Vec::new()),
            ReviewDecision::Saved,
            "no file was chosen",
        ),
    ];
    for (choice, decision, reason) in cases {
        let world = World::new();
        let mut front = Fake::answering(choice.clone());
        let reviewed = world.review(ReviewMode::Ask, None, &mut front);
        assert_eq!(reviewed.record.decision, decision, "{choice:?}");
        assert_eq!(
            reviewed.record.reason.as_deref(),
            Some(reason),
            "{choice:?}"
        );
        assert!(!reviewed.applied && !reviewed.failed, "{choice:?}");
        assert!(world.untouched(), "{choice:?}");
    }
}

#[test]
fn a_failed_apply_is_said_and_recorded() {
    let world = World::new();
    // The host changed the same line since: the 3-way apply conflicts.
    std::fs::write(world.project.join("a.txt"), "three\n").unwrap();
    git(&world.project, &["commit", "-qam", "moved on"]);
    let mut front = Fake::answering(Choice::ApplyAll);
    let reviewed = world.review(ReviewMode::Ask, None, &mut front);
    assert_eq!(reviewed.record.decision, ReviewDecision::ApplyFailed);
    assert!(reviewed.failed && !reviewed.applied);
    assert!(
        front.lines.iter().any(|(tone, line)| *tone == Tone::Refused
            && line.starts_with("not applied: the patch applied with merge conflicts")),
        "{:?}",
        front.lines
    );
}

#[test]
fn an_empty_patch_is_recorded_without_a_question() {
    let world = World::new();
    let mut front = Fake::default();
    let request = Review {
        mode: ReviewMode::Ask,
        project: &world.project,
        patch: &PatchInfo::empty(),
        patch_path: &world.patch_path,
        poisoned: None,
        policy: Policy::builtin().unwrap(),
        task: "nothing",
        no_commit: true,
        head: "h1",
        decided: None,
        rounds: &[],
        pager: None,
    };
    let reviewed = review(&request, &mut front).unwrap();
    assert_eq!(reviewed.record.decision, ReviewDecision::Empty);
    assert!(front.said(Tone::Plain, "no changes to review"));
}

#[test]
fn the_commit_message_names_the_task() {
    let msg = commit_message("fix the parser\nit breaks on tabs");
    assert!(msg.starts_with("ah: fix the parser\n\nTask:\nfix the parser\nit breaks on tabs"));
    let long = "x".repeat(100);
    let subject = commit_message(&long).lines().next().unwrap().to_string();
    assert_eq!(subject.chars().count(), 4 + 68 + 1);
}

impl World {
    /// A `--review ask` of the world's patch, at shadow head `head`, with
    /// the choice of a review held before the run's end.
    fn request<'a>(&'a self, head: &'a str, decided: Option<&'a Decided>) -> Review<'a> {
        Review {
            mode: ReviewMode::Ask,
            project: &self.project,
            patch: &self.patch,
            patch_path: &self.patch_path,
            poisoned: None,
            policy: Policy::builtin().unwrap(),
            task: "change a and b",
            no_commit: true,
            head,
            decided,
            rounds: &[],
            pager: None,
        }
    }
}

#[test]
fn a_held_review_offers_revise_and_returns_the_notes_unapplied() {
    let world = World::new();
    let revise = Revise {
        note: "smaller".into(),
        rejected: Vec::new(),
    };
    let mut front = Fake::answering(Choice::Revise(revise.clone()));
    let round = round(&world.request("h1", None), &mut front).unwrap();
    assert!(
        matches!(round, Round::Revise(ref r) if *r == revise),
        "{round:?}"
    );
    assert_eq!(world.read("a.txt"), "one\n");
    assert!(front.lines.iter().any(|(_, line)| line.contains("a.txt")));
}

#[test]
fn a_held_choice_is_acted_on_at_the_end_without_asking_again() {
    let world = World::new();
    let decided = Decided {
        head: "h1".into(),
        choice: Choice::ApplyAll,
    };
    // Fake::default() fails the test when asked.
    let mut front = Fake::default();
    let reviewed = review(&world.request("h1", Some(&decided)), &mut front).unwrap();
    assert!(reviewed.applied);
    assert_eq!(world.read("a.txt"), "two\n");
    assert!(front.asked.is_none());
}

#[test]
fn a_held_choice_on_files_that_changed_since_is_asked_again() {
    let world = World::new();
    let decided = Decided {
        head: "h1".into(),
        choice: Choice::ApplyAll,
    };
    let mut front = Fake::answering(Choice::SaveOnly);
    let reviewed = review(&world.request("h2", Some(&decided)), &mut front).unwrap();
    assert!(!reviewed.applied);
    assert!(front.asked.is_some());
    assert!(front.said(
        Tone::Warning,
        "warning: the run's files changed after your review: look at the patch again"
    ));
    assert_eq!(world.read("a.txt"), "one\n");
}
