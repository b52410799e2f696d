//! The write policy as behaviour: what the defaults deny, how layers merge,
//! what a bad file says, and where symlinks may point (real links on disk).

use std::os::unix::fs::symlink;
use std::path::Path;

use super::*;

fn defaults() -> Policy {
    let project = tempfile::tempdir().unwrap();
    Policy::load(project.path(), None, &[], &[]).unwrap()
}

fn rule_of(policy: &Policy, path: &str) -> Result<(), Reason> {
    policy
        .check_path(path)
        .map_err(|violation| violation.reason)
}

fn denied(rule: &str) -> Result<(), Reason> {
    Err(Reason::Denied {
        rule: rule.to_string(),
    })
}

#[test]
fn default_policy_allows_sources_and_denies_secrets_git_and_ci() {
    let policy = defaults();
    let table = [
        ("src/a.rs", Ok(())),
        ("README.md", Ok(())),
        ("deep/nested/dir/file.txt", Ok(())),
        (".gitignore", Ok(())),
        ("docs/.github-notes.md", Ok(())),
        ("environment.rs", Ok(())),
        (".git", denied("**/.git")),
        (".git/config", denied("**/.git/**")),
        ("sub/.git/hooks/pre-commit", denied("**/.git/**")),
        ("vendor/lib/.git", denied("**/.git")),
        (".GIT/hooks/pre-commit", denied("**/.git/**")),
        (".ah", denied(".ah")),
        (".ah/x", denied(".ah/**")),
        (".ah/policy.toml", denied(".ah/**")),
        (".env", denied("**/.env")),
        (".env.local", denied("**/.env.*")),
        ("services/api/.env", denied("**/.env")),
        ("a/b/key.pem", denied("**/*.pem")),
        ("server.key", denied("**/*.key")),
        (".github", denied(".github")),
        (".github/workflows/x.yml", denied(".github/**")),
    ];
    for (path, expected) in table {
        assert_eq!(rule_of(&policy, path), expected, "path {path}");
    }
}

#[test]
fn paths_that_leave_the_work_root_are_violations() {
    let policy = defaults();
    for path in [
        "",
        "/etc/passwd",
        "../x",
        "a/../../x",
        "./.ah/x",
        ".git//config",
        "a/",
    ] {
        assert_eq!(
            rule_of(&policy, path),
            Err(Reason::NotInWork),
            "path {path:?}"
        );
    }
}

#[test]
fn violations_render_for_people_and_the_model() {
    let policy = defaults();
    let env = policy.check_path(".env").unwrap_err();
    assert_eq!(env.to_string(), r#"".env" is denied by rule "**/.env""#);
    assert_eq!(env.rule(), Some("**/.env"));
    let outside = Violation {
        path: "link".into(),
        reason: Reason::SymlinkOutside {
            target: "/etc/passwd".into(),
        },
    };
    assert_eq!(
        outside.to_string(),
        r#""link" is a symlink to "/etc/passwd", outside /work"#
    );
    let report = violation_report(&[env, outside]);
    assert!(report.starts_with("step undone: these paths broke the write policy:\n"));
    assert!(report.contains("  \".env\" is denied by rule \"**/.env\"\n"));
    assert!(report.contains("  \"link\" is a symlink to \"/etc/passwd\", outside /work\n"));
    let json = serde_json::to_value(policy.check_path(".ah/x").unwrap_err()).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"path": ".ah/x", "kind": "denied", "rule": ".ah/**"})
    );
}

#[test]
fn narrowed_allow_rejects_other_paths_and_star_stays_in_one_folder() {
    let project = tempfile::tempdir().unwrap();
    let file = project.path().join("narrow.toml");
    std::fs::write(&file, "[write]\nallow = [\"src/*.rs\", \"docs/**\"]\n").unwrap();
    let policy = Policy::load(project.path(), Some(&file), &[], &[]).unwrap();
    assert_eq!(rule_of(&policy, "src/a.rs"), Ok(()));
    assert_eq!(rule_of(&policy, "docs/a/b/c.md"), Ok(()));
    assert_eq!(rule_of(&policy, "src/sub/a.rs"), Err(Reason::NoAllowRule));
    assert_eq!(rule_of(&policy, "x"), Err(Reason::NoAllowRule));
    assert_eq!(
        policy.check_path("x").unwrap_err().to_string(),
        r#""x" matches no allow rule"#
    );
    // The file set only `allow`: the built-in deny list is kept.
    assert_eq!(rule_of(&policy, "docs/.env"), denied("**/.env"));
    assert_eq!(policy.review().max_lines, 400);
}

#[test]
fn project_file_then_policy_file_then_command_line() {
    let project = tempfile::tempdir().unwrap();
    std::fs::create_dir(project.path().join(".ah")).unwrap();
    std::fs::write(
        project.path().join(".ah/policy.toml"),
        "[write]\ndeny = [\"secret/**\"]\n[review]\nmax_lines = 50\nmax_files = 3\n",
    )
    .unwrap();
    let project_only = Policy::load(project.path(), None, &[], &[]).unwrap();
    assert_eq!(project_only.write().deny, vec!["secret/**"]);
    assert_eq!(project_only.write().allow, vec!["**"]);
    assert_eq!(rule_of(&project_only, ".env"), Ok(()));
    assert_eq!(project_only.review().max_lines, 50);
    assert_eq!(project_only.review().max_files, 3);
    assert_eq!(
        project_only.review().restricted,
        defaults().review().restricted,
        "the built-in restricted list is kept"
    );

    let run_file = project.path().join("run.toml");
    std::fs::write(&run_file, "[review]\nmax_files = 7\n").unwrap();
    let policy = Policy::load(
        project.path(),
        Some(&run_file),
        &["extra/**".to_string()],
        &["src/generated/**".to_string()],
    )
    .unwrap();
    assert_eq!(policy.review().max_lines, 50, "kept from the project file");
    assert_eq!(policy.review().max_files, 7, "replaced by --policy");
    assert_eq!(policy.write().allow, vec!["**", "extra/**"]);
    assert_eq!(policy.write().deny, vec!["secret/**", "src/generated/**"]);
    assert_eq!(rule_of(&policy, "secret/a"), denied("secret/**"));
    assert_eq!(
        rule_of(&policy, "src/generated/x.rs"),
        denied("src/generated/**")
    );
    assert_eq!(rule_of(&policy, "src/main.rs"), Ok(()));
}

#[test]
fn unknown_key_names_the_file() {
    let project = tempfile::tempdir().unwrap();
    let file = project.path().join("typo.toml");
    std::fs::write(&file, "[write]\nalow = [\"**\"]\n").unwrap();
    let err = Policy::load(project.path(), Some(&file), &[], &[]).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, PolicyError::Parse { .. }), "{text}");
    assert!(text.contains(&file.display().to_string()), "{text}");
    assert!(text.contains("alow"), "{text}");
    assert!(text.contains("line 2"), "{text}");
}

#[test]
fn bad_glob_names_the_file_line_and_glob() {
    let project = tempfile::tempdir().unwrap();
    std::fs::create_dir(project.path().join(".ah")).unwrap();
    let file = project.path().join(".ah/policy.toml");
    std::fs::write(&file, "[write]\ndeny = [\n  \"ok/**\",\n  \"src/[a\",\n]\n").unwrap();
    let err = Policy::load(project.path(), None, &[], &[]).unwrap_err();
    let text = err.to_string();
    assert!(text.contains(&file.display().to_string()), "{text}");
    assert!(text.contains("(line 4)"), "{text}");
    assert!(text.contains("\"src/[a\""), "{text}");

    let err = Policy::load(
        project.path().join("none").as_path(),
        None,
        &["a/{b".into()],
        &[],
    )
    .unwrap_err();
    assert!(err.to_string().contains("the command line"), "{err}");
}

#[test]
fn missing_policy_file_is_an_error_but_missing_project_file_is_not() {
    let project = tempfile::tempdir().unwrap();
    let missing = project.path().join("nope.toml");
    let err = Policy::load(project.path(), Some(&missing), &[], &[]).unwrap_err();
    assert!(matches!(err, PolicyError::Read { .. }), "{err}");
    assert!(err.to_string().contains("nope.toml"), "{err}");
}

fn change(path: &str, kind: ChangeKind, symlink: bool) -> Change {
    Change {
        path: path.to_string(),
        kind,
        symlink,
    }
}

fn check_links(work: &Path, links: &[&str]) -> Vec<Violation> {
    let changes: Vec<Change> = links
        .iter()
        .map(|path| change(path, ChangeKind::Added, true))
        .collect();
    defaults().check_changes(work, &changes)
}

#[test]
fn symlinks_must_stay_inside_the_work_root() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path();
    std::fs::create_dir_all(root.join("a/b")).unwrap();
    std::fs::write(root.join("a/file.txt"), "x").unwrap();
    symlink("/etc/passwd", root.join("passwd")).unwrap();
    symlink("../../../outside", root.join("a/b/escape")).unwrap();
    symlink("../file.txt", root.join("a/b/inside")).unwrap();
    symlink("/work/a/file.txt", root.join("container_abs")).unwrap();
    symlink(root.join("a/file.txt"), root.join("host_abs")).unwrap();
    symlink("/work/../etc", root.join("sneaky_abs")).unwrap();
    symlink("not/there/yet", root.join("dangling")).unwrap();

    let violations = check_links(
        root,
        &[
            "passwd",
            "a/b/escape",
            "a/b/inside",
            "container_abs",
            "host_abs",
            "sneaky_abs",
            "dangling",
        ],
    );
    let outside: Vec<(&str, String)> = violations
        .iter()
        .map(|v| (v.path.as_str(), v.to_string()))
        .collect();
    assert_eq!(
        outside,
        vec![
            (
                "passwd",
                r#""passwd" is a symlink to "/etc/passwd", outside /work"#.to_string()
            ),
            (
                "a/b/escape",
                r#""a/b/escape" is a symlink to "../../../outside", outside /work"#.to_string()
            ),
            (
                "sneaky_abs",
                r#""sneaky_abs" is a symlink to "/work/../etc", outside /work"#.to_string()
            ),
        ]
    );
}

#[test]
fn symlink_chains_are_followed_inside_but_never_out() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path();
    std::fs::create_dir_all(root.join("d")).unwrap();
    std::fs::write(root.join("d/real.txt"), "x").unwrap();
    // good -> hop1 -> d/hop2 -> real.txt: all inside.
    symlink("d/hop2", root.join("hop1")).unwrap();
    symlink("real.txt", root.join("d/hop2")).unwrap();
    symlink("hop1", root.join("good")).unwrap();
    // bad -> up -> ..: the second hop leaves.
    symlink("..", root.join("up")).unwrap();
    symlink("up/etc/passwd", root.join("bad")).unwrap();
    // via a linked folder: etcdir -> /etc, sneaky -> etcdir/passwd.
    symlink("/etc", root.join("etcdir")).unwrap();
    symlink("etcdir/passwd", root.join("sneaky")).unwrap();
    // A loop.
    symlink("loop_b", root.join("loop_a")).unwrap();
    symlink("loop_a", root.join("loop_b")).unwrap();
    // Leads to a denied path inside the work root.
    symlink("sub/../.git/hooks", root.join("hooks")).unwrap();

    let violations = check_links(root, &["good", "bad", "sneaky", "loop_a", "hooks"]);
    let reasons: Vec<(&str, &Reason)> = violations
        .iter()
        .map(|v| (v.path.as_str(), &v.reason))
        .collect();
    assert_eq!(reasons.len(), 4, "{violations:?}");
    assert_eq!(
        reasons[0],
        (
            "bad",
            &Reason::SymlinkOutside {
                target: "up/etc/passwd".into()
            }
        )
    );
    assert_eq!(
        reasons[1],
        (
            "sneaky",
            &Reason::SymlinkOutside {
                target: "etcdir/passwd".into()
            }
        )
    );
    assert!(
        matches!(reasons[2], ("loop_a", Reason::SymlinkUnchecked { .. })),
        "{violations:?}"
    );
    assert_eq!(
        reasons[3],
        (
            "hooks",
            &Reason::SymlinkToDenied {
                target: "sub/../.git/hooks".into(),
                resolved: ".git/hooks".into(),
                rule: "**/.git/**".into(),
            }
        )
    );
}

#[test]
fn unflagged_links_are_still_checked_and_deletions_are_checked_too() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path();
    symlink("/etc/passwd", root.join("quiet")).unwrap();
    std::fs::write(root.join("plain.txt"), "x").unwrap();
    let changes = [
        change("quiet", ChangeKind::Modified, false),
        change("plain.txt", ChangeKind::Added, false),
        change(".git/config", ChangeKind::Deleted, false),
        change("gone.txt", ChangeKind::Deleted, true),
        change(".env", ChangeKind::Added, false),
    ];
    let violations = defaults().check_changes(root, &changes);
    let paths: Vec<&str> = violations.iter().map(|v| v.path.as_str()).collect();
    assert_eq!(paths, vec!["quiet", ".git/config", ".env"]);
}

#[test]
fn a_flagged_link_that_cannot_be_read_fails_closed() {
    let work = tempfile::tempdir().unwrap();
    let violations = check_links(work.path(), &["vanished"]);
    assert_eq!(violations.len(), 1);
    assert!(matches!(
        violations[0].reason,
        Reason::SymlinkUnchecked { .. }
    ));
}
