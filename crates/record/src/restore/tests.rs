//! Restoring a work copy from a real earlier run (the `none` backend, real
//! git, real files): what comes from the step's commit, what from the
//! project, and that the new run stands on its own once the old one is gone.

use std::fs;
use std::path::Path;

use serde_json::json;
use ulid::Ulid;

use super::*;
use crate::artifacts;
use crate::patch;
use crate::policy::Policy;
use crate::run::Run;
use crate::shadow::MAX_FILE_BYTES;
use ah_sandbox::none::NoneBackend;

fn write(root: &Path, path: &str, content: &str) {
    let full = root.join(path);
    fs::create_dir_all(full.parent().unwrap()).unwrap();
    fs::write(full, content).unwrap();
}

fn read(root: &Path, path: &str) -> String {
    fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A project with ignored files, a nested repository, a file the run
/// deletes, and secrets the read policy withholds (ignored, in an ignored
/// folder, and recorded).
fn project(root: &Path) {
    write(root, ".gitignore", "build/\n*.log\n");
    write(root, "src/lib.rs", "fn main() {}\n");
    write(root, "gone.txt", "deleted by the run\n");
    write(root, "build/out.bin", "old build\n");
    write(root, "src/debug.log", "log\n");
    write(root, "nested/.git/HEAD", "ref: refs/heads/main\n");
    write(root, "nested/file", "nested\n");
    write(root, ".env", "KEY=1\n");
    write(root, "build/server.pem", "pem\n");
    write(root, "deploy/id_rsa", "rsa\n");
}

/// What the default read policy withholds from [`project`].
const WITHHELD: [&str; 3] = [".env", "build/server.pem", "deploy/id_rsa"];

fn policy(root: &Path) -> Policy {
    Policy::load(root, None, &[], &[]).unwrap()
}

/// Runs the two steps of the earlier run; returns its id, its baseline and
/// its commit after step 1.
async fn earlier_run(root: &Path) -> (String, Oid, String) {
    let dir = RunDir::create(&root.join(".ah")).unwrap();
    let policy = policy(root);
    let start = Run::prepare(root, &dir, &policy).unwrap();
    assert_eq!(start.withheld, WITHHELD);
    let backend = Box::new(NoneBackend::new(dir.work_dir()));
    let mut run = Run::attach(dir, start, backend, policy, artifacts::DEFAULT_MAX_BYTES);
    let bash = |command: &str| json!({ "command": command });
    let one = run
        .tool_step("bash", &bash("echo one > a.txt && rm gone.txt"))
        .await;
    run.tool_step("bash", &bash("echo three > a.txt && echo b > b.txt"))
        .await;
    let baseline = run.baseline().await.unwrap().parse().unwrap();
    let id = run.id();
    run.finish().await.unwrap();
    (id, baseline, one.head)
}

#[tokio::test]
async fn the_step_files_and_the_projects_unrecorded_files_make_the_work_copy() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    project(root);
    let ah = root.join(".ah");
    let (old_id, old_baseline, step_one) = earlier_run(root).await;
    // The project moves on after the earlier run.
    write(root, "late.txt", "added later\n");
    write(root, "build/out.bin", "new build\n");

    let new = RunDir::create(&ah).unwrap();
    let source = Source {
        run_id: &old_id,
        commit: &step_one,
    };
    let start = restore(root, &ah, &new, source, &policy(root)).unwrap();
    assert_eq!(start.baseline, old_baseline);
    assert_eq!(start.head.to_string(), step_one);

    let work = new.work_dir();
    // Recorded files are the step's.
    assert_eq!(read(&work, "a.txt"), "one\n");
    assert_eq!(read(&work, "src/lib.rs"), "fn main() {}\n");
    for absent in ["b.txt", "gone.txt", "late.txt"] {
        assert!(!work.join(absent).exists(), "{absent}");
    }
    // Unrecorded ones are the project's, as now.
    assert_eq!(read(&work, "build/out.bin"), "new build\n");
    assert_eq!(read(&work, "src/debug.log"), "log\n");
    assert_eq!(read(&work, "nested/file"), "nested\n");
    assert_eq!(read(&work, "nested/.git/HEAD"), "ref: refs/heads/main\n");
    assert!(!work.join(".ah").exists() && !work.join(".git").exists());
    // Withheld files come from neither: the step never had them, and the
    // project's are left out.
    for absent in WITHHELD {
        assert!(!work.join(absent).exists(), "{absent}");
    }
    assert_eq!(start.withheld, WITHHELD);

    // The index is in line with the work copy: nothing to record yet.
    let unchanged = start
        .shadow
        .commit_step(start.head, "check", MAX_FILE_BYTES)
        .unwrap();
    assert_eq!(unchanged.commit, None, "{:?}", unchanged.changes);

    // The old run can go: the new repo has every object it needs.
    fs::remove_dir_all(ah.join("runs").join(&old_id)).unwrap();
    write(&work, "a.txt", "one\ntwo\n");
    let step = start
        .shadow
        .commit_step(start.head, "step 1: bash", MAX_FILE_BYTES)
        .unwrap();
    let head = step.commit.unwrap();
    let (_, text) = patch::patch_text(&start.shadow, start.baseline, head).unwrap();
    assert!(
        text.contains("+++ b/a.txt") && text.contains("+two"),
        "{text}"
    );
    assert!(text.contains("--- a/gone.txt"), "{text}");
    assert!(
        !text.contains("b.txt") && !text.contains("late.txt"),
        "{text}"
    );
}

#[tokio::test]
async fn a_run_restored_from_a_restored_run_needs_neither_earlier_run() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    project(root);
    let ah = root.join(".ah");
    let (first_id, first_baseline, step_one) = earlier_run(root).await;
    let source = Source {
        run_id: &first_id,
        commit: &step_one,
    };
    let middle = RunDir::create(&ah).unwrap();
    let policy = policy(root);
    let start = restore(root, &ah, &middle, source, &policy).unwrap();
    let backend = Box::new(NoneBackend::new(middle.work_dir()));
    let mut run = Run::attach(
        middle.clone(),
        start,
        backend,
        policy.clone(),
        artifacts::DEFAULT_MAX_BYTES,
    );
    let step = run
        .tool_step("bash", &json!({"command": "echo middle >> a.txt"}))
        .await;
    run.finish().await.unwrap();
    fs::remove_dir_all(ah.join("runs").join(&first_id)).unwrap();

    let last = RunDir::create(&ah).unwrap();
    let middle_id = middle.id().to_string();
    let source = Source {
        run_id: &middle_id,
        commit: &step.head,
    };
    let start = restore(root, &ah, &last, source, &policy).unwrap();
    assert_eq!(start.baseline, first_baseline);
    fs::remove_dir_all(middle.path()).unwrap();
    assert_eq!(read(&last.work_dir(), "a.txt"), "one\nmiddle\n");
    let (_, text) = patch::patch_text(&start.shadow, start.baseline, start.head).unwrap();
    assert!(text.contains("+one") && text.contains("+middle"), "{text}");
}

#[tokio::test]
async fn a_pruned_run_is_reported_as_pruned() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    project(root);
    let ah = root.join(".ah");
    let (old_id, _, step_one) = earlier_run(root).await;
    let shadow = ah.join("runs").join(&old_id).join("shadow.git");
    fs::remove_dir_all(&shadow).unwrap();
    // A run whose shadow repo is gone, and one whose directory is.
    for run_id in [old_id, Ulid::generate().to_string()] {
        let new = RunDir::create(&ah).unwrap();
        let source = Source {
            run_id: &run_id,
            commit: &step_one,
        };
        let err = restore(root, &ah, &new, source, &policy(root)).unwrap_err();
        assert!(
            matches!(&err, RestoreError::Pruned { run_id: id, .. } if *id == run_id),
            "{err}"
        );
        assert!(err.to_string().contains("pruned"), "{err}");
    }
}
