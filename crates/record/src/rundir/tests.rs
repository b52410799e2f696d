//! Tests of the run directory: layout, step files, manifest round trips.

use std::time::Duration;

use serde_json::json;

use super::*;
use crate::ChangeKind;

fn ah_dir() -> (tempfile::TempDir, PathBuf) {
    let project = tempfile::tempdir().unwrap();
    let ah = project.path().join(".ah");
    (project, ah)
}

#[test]
fn create_lays_out_the_run_and_hides_ah_from_git() {
    let (project, ah) = ah_dir();
    let run = RunDir::create(&ah).unwrap();
    let expected = ah.join("runs").join(run.id().to_string());
    assert_eq!(run.path(), expected);
    assert!(run.steps_dir().is_dir());
    assert_eq!(run.work_dir(), expected.join("work"));
    assert_eq!(run.shadow_dir(), expected.join("shadow.git"));
    assert_eq!(run.patch_path(), expected.join("session.patch"));
    assert_eq!(run.artifacts_dir(), expected.join("artifacts"));
    assert_eq!(run.manifest_path(), expected.join("manifest.json"));
    assert_eq!(
        std::fs::read_to_string(ah.join(".gitignore")).unwrap(),
        "*\n"
    );

    // git in the host project really ignores .ah/.
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(project.path())
            .output()
            .unwrap()
    };
    assert!(git(&["init", "-q"]).status.success());
    std::fs::write(project.path().join("tracked"), "x").unwrap();
    let status = git(&["status", "--porcelain", "--untracked-files=all"]);
    assert_eq!(String::from_utf8(status.stdout).unwrap(), "?? tracked\n");
}

#[test]
fn an_existing_gitignore_is_kept_and_completed() {
    let (_project, ah) = ah_dir();
    std::fs::create_dir_all(&ah).unwrap();
    std::fs::write(ah.join(".gitignore"), "keep-me").unwrap();
    RunDir::create(&ah).unwrap();
    RunDir::create(&ah).unwrap();
    assert_eq!(
        std::fs::read_to_string(ah.join(".gitignore")).unwrap(),
        "keep-me\n*\n"
    );
}

#[test]
fn open_finds_created_runs_and_rejects_others() {
    let (_project, ah) = ah_dir();
    let run = RunDir::create(&ah).unwrap();
    let opened = RunDir::open(&ah, &run.id().to_string()).unwrap();
    assert_eq!(opened, run);
    assert!(matches!(
        RunDir::open(&ah, "not-a-ulid"),
        Err(RunDirError::BadId(_))
    ));
    let missing = ulid::Ulid::generate().to_string();
    let err = RunDir::open(&ah, &missing).unwrap_err();
    assert!(matches!(err, RunDirError::NotFound { .. }));
    assert!(err.to_string().contains("ah runs"));
}

#[test]
fn write_step_writes_output_errors_and_meta() {
    let (_project, ah) = ah_dir();
    let run = RunDir::create(&ah).unwrap();
    let record = StepRecord {
        step: 3,
        tool: "bash".into(),
        input: json!({"command": "make"}),
        exit_code: Some(2),
        is_error: true,
        duration_ms: 1234,
        commit: Some("ab".repeat(20)),
        head: Some("ab".repeat(20)),
        changed: vec![Change {
            path: "src/a.rs".into(),
            kind: ChangeKind::Modified,
            symlink: false,
        }],
    };
    run.write_step(3, &record, b"built\n", b"\xffoops\n")
        .unwrap();
    run.write_violation(3, ".git/config: denied by rule .git/**\n")
        .unwrap();

    let steps = ah.join("runs").join(run.id().to_string()).join("steps");
    assert_eq!(std::fs::read(steps.join("step-3.out")).unwrap(), b"built\n");
    assert_eq!(
        std::fs::read(steps.join("step-3.err")).unwrap(),
        b"\xffoops\n"
    );
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(steps.join("step-3.meta.json")).unwrap()).unwrap();
    assert_eq!(meta["tool"], "bash");
    assert_eq!(meta["input"]["command"], "make");
    assert_eq!(meta["exit_code"], 2);
    assert_eq!(meta["duration_ms"], 1234);
    assert_eq!(meta["changed"][0]["kind"], "modified");
    let back: StepRecord = serde_json::from_value(meta).unwrap();
    assert_eq!(back, record);
    assert_eq!(
        std::fs::read_to_string(steps.join("step-3.violation.txt")).unwrap(),
        ".git/config: denied by rule .git/**\n"
    );
}

#[test]
fn a_step_without_commit_records_null() {
    let (_project, ah) = ah_dir();
    let run = RunDir::create(&ah).unwrap();
    let record = StepRecord {
        step: 1,
        tool: "read".into(),
        input: json!({"path": "a"}),
        exit_code: None,
        is_error: false,
        duration_ms: 1,
        commit: None,
        head: Some("cd".repeat(20)),
        changed: Vec::new(),
    };
    run.write_step(1, &record, b"", b"").unwrap();
    let text = std::fs::read_to_string(run.step_file(1, "meta.json")).unwrap();
    let meta: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert!(meta["commit"].is_null());
    assert_eq!(meta["head"], "cd".repeat(20));
    // A record written before `head` was kept still loads.
    let mut older = meta.clone();
    older.as_object_mut().unwrap().remove("head");
    let back: StepRecord = serde_json::from_value(older).unwrap();
    assert_eq!(back.head, None);
    assert!(text.contains('\n'), "meta should be pretty JSON");
}

fn full_manifest(run: &RunDir) -> Manifest {
    let mut manifest = Manifest::new(&run.id().to_string(), "fix the tests", "claude-x", "none");
    manifest.image = Some("localhost/ah:1".into());
    manifest.session_db = Some(".ah/01ABC.db".into());
    manifest.baseline = Some("1".repeat(40));
    manifest.head = Some("2".repeat(40));
    manifest.restored_from = Some(RestoredFrom {
        run_id: "01HZY8J5Q8W3V4N1T2C6B7D9EF".into(),
        step: 3,
        commit: "3".repeat(40),
        message_id: "01HZY8J5Q8W3V4N1T2C6B7D9EG".into(),
        message_seq: 9,
        because: "fork".into(),
    });
    manifest.finished_at = Some(ah_base::format_rfc3339(std::time::SystemTime::now()));
    manifest.steps = 7;
    manifest.violations = vec![ViolationRecord {
        step: 4,
        path: ".github/workflows/ci.yml".into(),
        rule: "deny .github/**".into(),
    }];
    manifest.patch = Some(PatchStats {
        files: 2,
        added: 10,
        removed: 3,
    });
    manifest.review = Some(ReviewRecord {
        mode: ReviewMode::Ask,
        decision: ReviewDecision::PartlyApplied,
        reason: None,
        rounds: Vec::new(),
        hunks: vec![
            HunkRecord {
                path: "src/lib.rs".into(),
                header: "@@ -1,4 +1,5 @@".into(),
                decision: HunkOutcome::Applied,
                reason: None,
            },
            HunkRecord {
                path: "run.sh".into(),
                header: "mode 100644 → 100755".into(),
                decision: HunkOutcome::Rejected,
                reason: Some("keep it plain".into()),
            },
        ],
    });
    manifest.applied = true;
    manifest.artifacts = vec!["out/report.txt".into()];
    manifest.poisoned = Some("step 4 could not be undone".into());
    manifest
}

#[test]
fn manifest_round_trips_and_is_replaced_atomically() {
    let (_project, ah) = ah_dir();
    let run = RunDir::create(&ah).unwrap();
    let first = Manifest::new(&run.id().to_string(), "task", "model", "podman");
    first.save(&run.manifest_path()).unwrap();
    let full = full_manifest(&run);
    full.save(&run.manifest_path()).unwrap();
    assert_eq!(run.read_manifest().unwrap(), full);
    assert_eq!(Manifest::load(&run.manifest_path()).unwrap(), full);

    let text = std::fs::read_to_string(run.manifest_path()).unwrap();
    assert!(text.contains("\n  \"task\": \"fix the tests\""), "{text}");
    // No temporary file is left next to the manifest.
    let names: Vec<_> = std::fs::read_dir(run.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(
        names.iter().filter(|n| !n.ends_with("steps")).count(),
        1,
        "{names:?}"
    );
}

#[test]
fn a_review_without_hunk_decisions_keeps_its_old_shape() {
    let record = ReviewRecord {
        mode: ReviewMode::Ask,
        decision: ReviewDecision::Saved,
        reason: Some("chosen by the user".into()),
        rounds: Vec::new(),
        hunks: Vec::new(),
    };
    let json = serde_json::to_value(&record).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"mode": "ask", "decision": "saved", "reason": "chosen by the user"})
    );
    let old: ReviewRecord = serde_json::from_value(json).unwrap();
    assert_eq!(old, record);
    let hunk = HunkRecord {
        path: "a".into(),
        header: "@@ -1 +1 @@".into(),
        decision: HunkOutcome::Undecided,
        reason: None,
    };
    let json = serde_json::to_value(&hunk).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"path": "a", "header": "@@ -1 +1 @@", "decision": "undecided"})
    );
}

#[test]
fn a_partial_manifest_loads_with_defaults_and_a_broken_one_says_where() {
    let (_project, ah) = ah_dir();
    let run = RunDir::create(&ah).unwrap();
    std::fs::write(run.manifest_path(), r#"{"run_id": "x", "task": "t"}"#).unwrap();
    let manifest = run.read_manifest().unwrap();
    assert_eq!(manifest.task, "t");
    assert_eq!(manifest.patch, None);
    assert!(!manifest.applied);

    std::fs::write(run.manifest_path(), "{ not json").unwrap();
    let err = run.read_manifest().unwrap_err();
    assert!(err.to_string().contains("manifest.json"), "{err}");
}

#[test]
fn list_runs_reads_manifests_newest_first() {
    let (_project, ah) = ah_dir();
    assert!(list_runs(&ah).unwrap().is_empty());
    let older = RunDir::create(&ah).unwrap();
    Manifest::new(&older.id().to_string(), "first", "m", "none")
        .save(&older.manifest_path())
        .unwrap();
    std::thread::sleep(Duration::from_millis(3));
    let newer = RunDir::create(&ah).unwrap();
    std::fs::create_dir(ah.join("runs").join("not-a-run")).unwrap();

    let runs = list_runs(&ah).unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0].id, newer.id());
    assert!(
        runs[0].manifest.is_err(),
        "the newer run has no manifest yet"
    );
    assert_eq!(runs[1].id, older.id());
    assert_eq!(runs[1].path, older.path());
    assert_eq!(runs[1].manifest.as_ref().unwrap().task, "first");
}

#[test]
fn ah_and_every_run_folder_are_private_to_their_owner() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o7777;
    let (project, ah) = ah_dir();
    // An older ah left them open to every user.
    let old = ah.join("runs").join(Ulid::generate().to_string());
    std::fs::create_dir_all(&old).unwrap();
    for dir in [&ah, &ah.join("runs"), &old] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let run = RunDir::create(&ah).unwrap();
    for dir in [&ah, &ah.join("runs"), &old, &run.path().to_path_buf()] {
        assert_eq!(mode(dir), 0o700, "{}", dir.display());
    }

    // A link where `.ah` should be is not made anyone's.
    let elsewhere = project.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o755)).unwrap();
    let linked = project.path().join("linked");
    std::os::unix::fs::symlink(&elsewhere, &linked).unwrap();
    let err = RunDir::create(&linked).unwrap_err().to_string();
    assert!(err.contains("it is a link or not a folder"), "{err}");
    assert_eq!(mode(&elsewhere), 0o755);
}
