//! What becomes of a finished run's patch, decided here for every
//! front-end: an empty patch is recorded as such, a poisoned one refused
//! (the user is not even asked), `never` saves it, `auto` applies it when
//! the auto-review rules and a clean check allow, and `ask` applies, saves
//! or discards what the user chose: all of it, some of its files, or some
//! of its hunks (each unit's decision recorded). The front-end only shows
//! the lines and the patch, and returns the choice ([`ReviewFront`]);
//! applying is always the review layer's 3-way apply.
//!
//! Where the run can go on (an agent at a terminal), the `ask` review is
//! held before the run ends ([`round`]): a choice to revise sends the model
//! back to work in the same sandbox with the user's notes (a hunk rejected
//! with a reason sends it back too), and the review opens again on the new
//! patch; any other choice is acted on once the run has ended
//! ([`Decided`]), provided its files did not change meanwhile.

use std::cell::OnceCell;
use std::io::BufReader;
use std::path::Path;

use ah_base::count;
use anyhow::{Context, Result, anyhow};

use super::ReviewMode;
use ah_record::patch::PatchInfo;
use ah_record::policy::Policy;
use ah_record::rundir::{HunkRecord, ReviewDecision, ReviewRecord, ReviseRound};
use ah_record::safe_text::{name_safe, terminal_safe};
use ah_review::apply::{self, ApplyError, ApplyOptions, ApplyOutcome};
use ah_review::hunks::{HunkError, Selection};
use ah_review::review::{self as rules, AutoDecision, Hidden, elsewhere};
use ah_review::subpatch;

pub(crate) mod pager;
pub use ah_review::hunks::{Part, PatchHunks, Unit, Whole};
pub use pager::Pager;

/// What the review needs of a front-end: a way to say its lines, and the
/// user's choice when the mode is `ask`.
pub trait ReviewFront {
    /// Shows the patch (a file the model wrote: escape it) and asks what
    /// becomes of it; returns the choice and decides nothing.
    fn choose(&mut self, patch: &PatchToChoose<'_>) -> Result<Choice>;

    /// A line of the review: `lead` (`applied:`, `refused:`, `warning:`)
    /// stands out in `tone`, `rest` follows after a space; either may be
    /// empty. Both are escaped for a terminal already.
    fn say(&mut self, tone: Tone, lead: &str, rest: &str);

    /// Whether a person can be asked here, and write notes for the model:
    /// only then is a run's review held before its end, with "revise"
    /// among the choices (never with `--json` or without a terminal).
    fn can_revise(&self) -> bool {
        false
    }
}

/// How a line of the review reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Plain,
    /// The patch went in.
    Good,
    /// Something to look at before applying.
    Warning,
    /// The patch was refused or did not apply.
    Refused,
}

/// A patch put to the user (`--review ask`).
#[derive(Debug)]
pub struct PatchToChoose<'a> {
    /// The patch file, to show whole.
    pub patch: &'a Path,
    /// `[review] pager` from the user's own configuration.
    pager_setting: Option<&'a str>,
    /// What to show it in, looked up when first asked for.
    pager: OnceCell<Pager>,
    /// Its files in patch order; [`Choice::Files`] names them by index.
    pub files: Vec<FileToChoose>,
    /// "Revise" may be offered ([`Choice::Revise`]).
    pub can_revise: bool,
    /// The attempts of the task, when this is one of several
    /// ([`Choice::Attempt`] names another by its index here).
    pub attempts: Vec<String>,
    /// Which of `attempts` this patch is.
    pub this_attempt: usize,
    /// The patch cut into units, read when first asked for.
    hunks: OnceCell<Result<PatchHunks, String>>,
}

impl PatchToChoose<'_> {
    /// The pager the user chose (their environment, ah's configuration,
    /// their own git configuration: `pager::choose`), looked up the first
    /// time the patch is shown: a review nobody is asked in runs no git.
    pub fn pager(&self) -> &Pager {
        self.pager.get_or_init(|| {
            pager::choose(
                |name| std::env::var(name).ok(),
                self.pager_setting,
                ah_review::pager::users_git_pager,
            )
        })
    }

    /// The patch cut into the units [`Choice::Hunks`] decides (read from
    /// its file the first time; offsets, no text). An error says why the
    /// patch cannot be chosen hunk by hunk.
    pub fn hunks(&self) -> Result<&PatchHunks> {
        let read = self.hunks.get_or_init(|| {
            let hunks = PatchHunks::read(self.patch).map_err(|e| e.to_string())?;
            if hunks.files() != self.files.len() {
                let mismatch = HunkError::Mismatch {
                    sections: hunks.files(),
                    files: self.files.len(),
                };
                return Err(mismatch.to_string());
            }
            Ok(hunks)
        });
        read.as_ref().map_err(|why| anyhow!("{why}"))
    }
}

/// One file of a patch put to the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileToChoose {
    /// Its path, escaped for a terminal.
    pub name: String,
    /// Lines added and removed; `None` for a binary file.
    pub lines: Option<(u64, u64)>,
    /// What the file does outside the diff ("runs code in other tools",
    /// "instructions for agents", …), when it does.
    pub acts_elsewhere: Option<&'static str>,
}

/// What the user chose for a patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    ApplyAll,
    /// Apply the files at these indexes into [`PatchToChoose::files`] and
    /// save the others (none chosen: the patch is saved).
    Files(Vec<usize>),
    /// A decision for each unit of [`PatchToChoose::hunks`], in patch
    /// order: the accepted ones are applied, the others saved (a unit not
    /// named stays with the others).
    Hunks(Vec<HunkDecision>),
    SaveOnly,
    /// Nothing is applied; the patch file stays.
    Discard,
    /// The user left the question (Esc, Ctrl+C, a closed terminal): the
    /// patch is saved.
    Left(Question),
    /// Nobody can be asked here (no terminal): the patch is saved.
    NobodyToAsk,
    /// Send the model back to work with these notes; nothing is applied
    /// (offered only where [`PatchToChoose::can_revise`]).
    Revise(Revise),
    /// Look at another attempt of the task instead (an index into
    /// [`PatchToChoose::attempts`]); nothing is applied yet.
    Attempt(usize),
}

/// What the user tells the model when sending its work back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Revise {
    /// The user's note (may be empty when the rejected hunks say it all).
    pub note: String,
    /// The hunks the user rejected, with their reasons.
    pub rejected: Vec<HunkRecord>,
}

/// Which question the user left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Question {
    /// What should happen to the patch.
    WhatToDo,
    /// Which files to apply.
    WhichFiles,
    /// Which hunks to apply.
    WhichHunks,
}

/// The user's decision on one unit of the patch: a hunk, a piece of a
/// split hunk, or a file section taken whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HunkDecision {
    /// Which unit (its file's index into [`PatchToChoose::files`], and the
    /// part of that file).
    pub unit: Unit,
    /// Its header as the user saw it ([`PatchHunks::header`]).
    pub header: String,
    pub verdict: Verdict,
}

/// What the user said of a unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Apply it.
    Accept,
    /// Do not apply it; `reason` is what the user said of it, if anything.
    Reject { reason: Option<String> },
    /// The user left the choice before coming to it: not applied.
    Undecided,
}

/// A finished run's patch and how to review it.
pub(crate) struct Review<'a> {
    pub(crate) mode: ReviewMode,
    pub(crate) project: &'a Path,
    pub(crate) patch: &'a PatchInfo,
    pub(crate) patch_path: &'a Path,
    /// Why the patch must never be applied, when it must not.
    pub(crate) poisoned: Option<&'a str>,
    pub(crate) policy: &'a Policy,
    pub(crate) task: &'a str,
    pub(crate) no_commit: bool,
    /// The shadow repo's head the patch was made at.
    pub(crate) head: &'a str,
    /// The choice a review held before the run's end made ([`round`]).
    pub(crate) decided: Option<&'a Decided>,
    /// The rounds that sent the model back before, to record.
    pub(crate) rounds: &'a [ReviseRound],
    /// `[review] pager` from the user's own configuration.
    pub(crate) pager: Option<&'a str>,
}

impl Review<'_> {
    /// The patch as the front-end is asked about it.
    fn to_choose(&self, can_revise: bool, attempts: &[String], this: usize) -> PatchToChoose<'_> {
        PatchToChoose {
            patch: self.patch_path,
            pager_setting: self.pager,
            pager: OnceCell::new(),
            files: self.patch.files.iter().map(file_to_choose).collect(),
            can_revise,
            attempts: attempts.to_vec(),
            this_attempt: this,
            hunks: OnceCell::new(),
        }
    }
}

/// How the review ended.
#[derive(Debug)]
pub(crate) struct Reviewed {
    pub(crate) record: ReviewRecord,
    pub(crate) applied: bool,
    /// The patch was refused or an apply failed (the patch stays saved).
    pub(crate) failed: bool,
}

/// Reviews the patch as `review.mode` says, telling `front` what happens.
pub(crate) fn review(review: &Review<'_>, front: &mut dyn ReviewFront) -> Result<Reviewed> {
    let mut reviewed = review_once(review, front)?;
    reviewed.record.rounds = review.rounds.to_vec();
    Ok(reviewed)
}

fn review_once(review: &Review<'_>, front: &mut dyn ReviewFront) -> Result<Reviewed> {
    let Review {
        mode, patch_path, ..
    } = *review;
    // A stopped run's empty patch is not "no changes": what it changed
    // could not be recorded.
    if let (Some(why), true) = (review.poisoned, review.patch.files.is_empty()) {
        front.say(
            Tone::Refused,
            "refused:",
            &format!(
                "the run was stopped and its changes could not be recorded: {}",
                terminal_safe(why)
            ),
        );
        return Ok(Reviewed {
            failed: true,
            ..ended(mode, ReviewDecision::Refused, why)
        });
    }
    if review.patch.files.is_empty() {
        front.say(Tone::Plain, "", "no changes to review");
        return Ok(ended(
            mode,
            ReviewDecision::Empty,
            "the run changed no files",
        ));
    }
    // A choice made on these very files was shown them already.
    let decided = match review.decided {
        Some(decided) if decided.head == review.head && mode == ReviewMode::Ask => {
            Some(decided.choice.clone())
        }
        Some(_) => {
            front.say(
                Tone::Warning,
                "warning:",
                "the run's files changed after your review: look at the patch again",
            );
            None
        }
        None => None,
    };
    let hidden = match decided {
        Some(_) => Vec::new(),
        None => present(review, front)?,
    };
    if let Some(why) = review.poisoned {
        front.say(
            Tone::Refused,
            "refused:",
            &format!(
                "this run's patch must not be applied: {}",
                terminal_safe(why)
            ),
        );
        front.say(
            Tone::Plain,
            "the patch is kept for inspection:",
            &patch_path.display().to_string(),
        );
        return Ok(Reviewed {
            failed: true,
            ..ended(mode, ReviewDecision::Refused, why)
        });
    }
    match mode {
        ReviewMode::Never => {
            front.say(
                Tone::Plain,
                "patch saved:",
                &patch_path.display().to_string(),
            );
            Ok(ended(mode, ReviewDecision::Saved, "review mode never"))
        }
        ReviewMode::Auto => auto(review, &hidden, front),
        ReviewMode::Ask => ask(review, decided, front),
    }
}

/// Shows the patch's summary and warns of invisible characters in it;
/// what was found.
fn present(review: &Review<'_>, front: &mut dyn ReviewFront) -> Result<Vec<Hidden>> {
    // The diffstat escapes the names itself; the rest is ours.
    front.say(Tone::Plain, "", &rules::diffstat(&review.patch.files));
    let hidden = hidden_chars(review.patch, review.patch_path)?;
    if !hidden.is_empty() {
        front.say(
            Tone::Warning,
            "warning:",
            &format!(
                "the patch holds invisible or bidi characters: {}",
                rules::describe_hidden(&hidden)
            ),
        );
    }
    Ok(hidden)
}

fn hidden_chars(patch: &PatchInfo, patch_path: &Path) -> Result<Vec<Hidden>> {
    let cannot_read = || format!("cannot read {}", patch_path.display());
    let file = std::fs::File::open(patch_path).with_context(cannot_read)?;
    rules::hidden_chars(patch, BufReader::new(file)).with_context(cannot_read)
}

/// `--review auto`: applied when the rules allow, else saved with every
/// reason.
fn auto(review: &Review<'_>, hidden: &[Hidden], front: &mut dyn ReviewFront) -> Result<Reviewed> {
    let clean = apply::check_patch(review.project, review.patch_path)?;
    match rules::decide_patch(review.patch, review.policy, clean, hidden) {
        AutoDecision::Apply => Ok(apply_now(
            review,
            review.patch_path,
            "auto: small, clean, unrestricted",
            front,
        )),
        AutoDecision::NothingToApply => Ok(ended(
            review.mode,
            ReviewDecision::Empty,
            "nothing to apply",
        )),
        AutoDecision::Save { reasons } => {
            let reason = reasons.join("; ");
            front.say(
                Tone::Plain,
                "not applied automatically:",
                &terminal_safe(&reason),
            );
            front.say(
                Tone::Plain,
                "patch saved:",
                &format!(
                    "{} (apply it with: ah apply {})",
                    review.patch_path.display(),
                    run_id(review.patch_path)
                ),
            );
            Ok(ended(review.mode, ReviewDecision::Saved, &reason))
        }
    }
}

/// `--review ask`: what the user chose (now, or in the review held
/// before the run's end: `decided`), done.
fn ask(
    review: &Review<'_>,
    decided: Option<Choice>,
    front: &mut dyn ReviewFront,
) -> Result<Reviewed> {
    let patch_path = review.patch_path;
    let saved = |why: &str| ended(review.mode, ReviewDecision::Saved, why);
    let to_choose = review.to_choose(false, &[], 0);
    let choice = match decided {
        Some(choice) => choice,
        None => front.choose(&to_choose)?,
    };
    let path = patch_path.display().to_string();
    Ok(match choice {
        Choice::ApplyAll => apply_now(review, patch_path, "chosen by the user", front),
        Choice::Files(chosen) if chosen.is_empty() => {
            front.say(Tone::Plain, "", "no files chosen; patch saved");
            saved("no file was chosen")
        }
        Choice::Files(chosen) => apply_files(review, &chosen, front)?,
        Choice::Hunks(decisions) => {
            by_hunk::apply_hunks(review, to_choose.hunks()?, &decisions, front)?
        }
        Choice::SaveOnly => {
            front.say(Tone::Plain, "patch saved:", &path);
            saved("chosen by the user")
        }
        Choice::Discard => {
            front.say(
                Tone::Plain,
                "discarded",
                &format!("(the patch file stays at {path})"),
            );
            ended(review.mode, ReviewDecision::Discarded, "chosen by the user")
        }
        Choice::Left(Question::WhatToDo) => {
            front.say(Tone::Plain, "review interrupted; patch saved:", &path);
            saved("the review was interrupted")
        }
        Choice::Left(Question::WhichFiles) => {
            front.say(Tone::Plain, "", "no files chosen; patch saved");
            saved("the file choice was left")
        }
        Choice::Left(Question::WhichHunks) => {
            front.say(Tone::Plain, "", "no hunks chosen; patch saved");
            saved("the hunk choice was left")
        }
        Choice::NobodyToAsk => {
            front.say(
                Tone::Plain,
                "patch saved:",
                &format!("{path} (no terminal to ask on)"),
            );
            saved("no terminal to ask on")
        }
        // Not offered here: the run is over, or it is the only one.
        Choice::Attempt(_) => {
            front.say(Tone::Plain, "patch saved:", &path);
            saved("another attempt was asked for where there is none")
        }
        Choice::Revise(_) => {
            front.say(
                Tone::Plain,
                "patch saved:",
                &format!(
                    "{path} (the run is over: go on with `ah review {}`, whose revise \
                     starts a new run)",
                    run_id(patch_path)
                ),
            );
            saved("revise asked after the run's end")
        }
    })
}

/// A file as the user is shown it: name, counts, and what it does outside
/// the diff.
fn file_to_choose(file: &ah_record::patch::FileStat) -> FileToChoose {
    FileToChoose {
        name: name_safe(&file.path).into_owned(),
        lines: (!file.binary).then_some((file.added, file.removed)),
        acts_elsewhere: elsewhere(&file.path).map(|kind| kind.label()),
    }
}

/// Where a patch cut in two goes: `chosen.patch` and `rest.patch` beside
/// the run's patch.
fn cut_paths(review: &Review<'_>) -> Result<(std::path::PathBuf, std::path::PathBuf)> {
    let run_dir = review
        .patch_path
        .parent()
        .context("the patch file has no run directory")?;
    Ok((run_dir.join("chosen.patch"), run_dir.join("rest.patch")))
}

/// Applies the chosen files as one patch (`chosen.patch` beside the run's
/// patch) and saves the others in `rest.patch`; a partial apply is
/// recorded as such.
fn apply_files(
    review: &Review<'_>,
    chosen: &[usize],
    front: &mut dyn ReviewFront,
) -> Result<Reviewed> {
    let (chosen_path, rest_path) = cut_paths(review)?;
    let split = subpatch::split(
        review.patch_path,
        review.patch,
        chosen,
        &chosen_path,
        &rest_path,
    )
    .context("cannot split the patch by file")?;
    let why = if split.rest.is_empty() {
        "chosen by the user: every file".to_string()
    } else {
        format!(
            "chosen by the user: {} of {}; the rest is in {}",
            split.chosen.files.len(),
            count(review.patch.files.len(), "file", "files"),
            rest_path.display()
        )
    };
    let mut reviewed = apply_now(review, &chosen_path, &why, front);
    if reviewed.applied && !split.rest.is_empty() {
        let left = count(split.rest.files.len(), "file", "files");
        partly_applied(&mut reviewed, &left, &rest_path, front);
    }
    Ok(reviewed)
}

/// Records a part of the patch as applied and says where the rest (`left`,
/// counted) waits.
fn partly_applied(
    reviewed: &mut Reviewed,
    left: &str,
    rest_path: &Path,
    front: &mut dyn ReviewFront,
) {
    reviewed.record.decision = ReviewDecision::PartlyApplied;
    front.say(
        Tone::Plain,
        "not applied:",
        &format!(
            "{left} more, saved in {} (apply later with git apply --3way)",
            rest_path.display()
        ),
    );
}

/// Applies the patch at `patch_path` to the project; a failure is said and
/// recorded, not returned.
fn apply_now(
    review: &Review<'_>,
    patch_path: &Path,
    why: &str,
    front: &mut dyn ReviewFront,
) -> Reviewed {
    match apply_patch(review.project, patch_path, review.task, review.no_commit) {
        Ok(applied) => {
            front.say(Tone::Good, "applied:", &terminal_safe(&applied.to_string()));
            Reviewed {
                applied: true,
                ..ended(review.mode, ReviewDecision::Applied, why)
            }
        }
        Err(err) => {
            let err = err.to_string();
            front.say(Tone::Refused, "not applied:", &terminal_safe(&err));
            Reviewed {
                failed: true,
                ..ended(review.mode, ReviewDecision::ApplyFailed, &err)
            }
        }
    }
}

/// Applies a run's patch to the project with the 3-way apply, committed
/// (unless `no_commit`) with a message naming the run's task.
pub(crate) fn apply_patch(
    project: &Path,
    patch_path: &Path,
    task: &str,
    no_commit: bool,
) -> Result<ApplyOutcome, ApplyError> {
    let options = ApplyOptions {
        commit: !no_commit,
        message: commit_message(task),
    };
    apply::apply_patch(project, patch_path, &options)
}

/// The host commit message: the task's first line, shortened, then the task.
fn commit_message(task: &str) -> String {
    let first = task.lines().next().unwrap_or_default().trim();
    let mut subject: String = first.chars().take(68).collect();
    if subject.len() < first.len() {
        subject.push('…');
    }
    format!("ah: {subject}\n\nTask:\n{}\n", task.trim())
}

/// A review that applied nothing and failed at nothing.
fn ended(mode: ReviewMode, decision: ReviewDecision, reason: &str) -> Reviewed {
    Reviewed {
        record: ReviewRecord {
            mode,
            decision,
            reason: Some(reason.to_string()),
            rounds: Vec::new(),
            hunks: Vec::new(),
        },
        applied: false,
        failed: false,
    }
}

/// The run's id: the name of the folder that holds its patch.
fn run_id(patch_path: &Path) -> String {
    patch_path
        .parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

mod by_hunk;
mod held;
pub(crate) use held::{Decided, Round, round, round_among};
#[cfg(test)]
mod tests;
