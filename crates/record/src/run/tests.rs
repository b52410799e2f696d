//! Steps of a real run (the `none` backend, real git, real files): what a
//! violating step that cannot be undone does to the run, how a huge file is
//! treated, and where artifacts come from.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;
use tempfile::TempDir;

use super::*;
use crate::artifacts;
use ah_sandbox::none::NoneBackend;

pub(super) struct Fixture {
    _project: TempDir,
    pub(super) run: Run,
    pub(super) work: PathBuf,
}

/// A small project and a prepared run on it.
pub(super) fn fixture() -> Fixture {
    fixture_with(|work| Box::new(NoneBackend::new(work)))
}

/// [`fixture`] with the backend `backend` makes for the work copy.
pub(super) fn fixture_with(backend: impl FnOnce(&Path) -> Box<dyn Backend>) -> Fixture {
    let project = tempfile::tempdir().unwrap();
    fs::create_dir(project.path().join("src")).unwrap();
    fs::write(project.path().join("src/lib.rs"), "fn main() {}\n").unwrap();
    let dir = RunDir::create(&project.path().join(".ah")).unwrap();
    let policy = Policy::load(project.path(), None, &[], &[]).unwrap();
    let start = Run::prepare(project.path(), &dir, &policy).unwrap();
    let work = dir.work_dir();
    let backend = backend(&work);
    let run = Run::attach(dir, start, backend, policy, artifacts::DEFAULT_MAX_BYTES);
    Fixture {
        _project: project,
        run,
        work,
    }
}

async fn bash(run: &mut Run, command: &str) -> StepOutcome {
    run.tool_step("bash", &json!({ "command": command })).await
}

/// Whether this process may set the immutable attribute here (root, on a
/// file system that has it).
fn immutable_works(dir: &Path) -> bool {
    let probe = dir.join("probe");
    fs::write(&probe, "x").unwrap();
    let set = Command::new("chattr").arg("+i").arg(&probe).status();
    let works = set.is_ok_and(|status| status.success());
    if works {
        let cleared = Command::new("chattr").arg("-i").arg(&probe).status();
        assert!(cleared.unwrap().success());
    }
    works
}

/// Clears the immutable attribute below a folder when dropped, so the temp
/// folder can be removed whatever the test did.
struct ClearImmutable(PathBuf);

impl Drop for ClearImmutable {
    fn drop(&mut self) {
        let _ = Command::new("chattr")
            .arg("-R")
            .arg("-i")
            .arg(&self.0)
            .status();
    }
}

#[tokio::test]
async fn a_violating_step_that_cannot_be_undone_poisons_the_run() {
    let mut f = fixture();
    if !immutable_works(f.run.dir().path()) {
        eprintln!("skipped: needs root and a file system with `chattr +i` to make a revert fail");
        return;
    }
    let _clear = ClearImmutable(f.work.clone());
    // Root ignores permission bits, but not the immutable attribute: the
    // denied file cannot be removed, even after ah makes its folder writable.
    let outcome = bash(
        &mut f.run,
        "mkdir .github && echo 'on: push' > .github/evil.yml && chattr +i .github/evil.yml \
         && echo ok > src/ok.rs",
    )
    .await;
    let violation = outcome.violation.expect("a violation");
    assert!(violation.starts_with("step NOT undone"), "{violation}");
    assert!(violation.contains(".github/evil.yml"), "{violation}");
    assert!(outcome.output.is_error);
    assert!(
        outcome.output.content.contains("make no more tool calls"),
        "{}",
        outcome.output.content
    );
    assert_eq!(outcome.commit, None);
    let reason = f.run.poisoned().expect("the run is poisoned").to_string();
    assert!(
        reason.starts_with("step 1 broke the write policy"),
        "{reason}"
    );
    assert_eq!(
        f.run.head, f.run.baseline,
        "the rejected step is not accepted"
    );
    let record = fs::read_to_string(f.run.dir().step_file(1, "violation.txt")).unwrap();
    assert_eq!(record, violation);

    // No tool runs any more.
    let refused = bash(&mut f.run, "echo hi > after.txt").await;
    assert!(refused.output.is_error);
    assert!(refused.output.content.contains("not run"), "{refused:?}");
    assert!(refused.output.content.contains(&reason), "{refused:?}");
    assert!(!f.work.join("after.txt").exists());
    assert_eq!(refused.commit, None);
}

#[tokio::test]
async fn a_file_over_the_size_cap_is_a_violation_and_the_step_is_undone() {
    let mut f = fixture();
    let outcome = bash(&mut f.run, "truncate -s 60M big.bin && echo ok > ok.txt").await;
    let violation = outcome.violation.expect("a violation");
    assert!(
        violation.contains(
            "\"big.bin\" is larger than 50 MiB: a file that large cannot be part of the patch"
        ),
        "{violation}"
    );
    assert!(violation.starts_with("step undone"), "{violation}");
    assert!(!f.work.join("big.bin").exists());
    assert!(!f.work.join("ok.txt").exists());
    assert_eq!(f.run.poisoned(), None);
    assert_eq!(f.run.head, f.run.baseline);
    assert_eq!(f.run.violations.len(), 1);
    assert_eq!(f.run.violations[0].path, "big.bin");

    // Nothing else changed: the huge file alone is reason enough.
    let outcome = bash(&mut f.run, "truncate -s 60M alone.bin").await;
    assert!(outcome.violation.is_some(), "{outcome:?}");
    assert!(!f.work.join("alone.bin").exists());
}

#[tokio::test]
async fn artifacts_are_the_committed_files_with_plain_modes() {
    let mut f = fixture();
    let outcome = bash(
        &mut f.run,
        "mkdir out && echo committed > out/tool && chmod 4755 out/tool",
    )
    .await;
    assert!(outcome.commit.is_some(), "{outcome:?}");
    // Written after the step's check, as a process still running could.
    fs::write(f.work.join("out/tool"), "swapped later").unwrap();
    let artifacts = f.run.dir().artifacts_dir();
    let result = f.run.finish().await.unwrap();
    assert_eq!(result.artifacts.copied.len(), 1, "{:?}", result.artifacts);
    let copy = artifacts.join("out/tool");
    assert_eq!(fs::read_to_string(&copy).unwrap(), "committed\n");
    let mode = fs::metadata(&copy).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o755);
}

mod remote;
