//! The policy as behaviour: what the defaults withhold from the work copy
//! and deny writing, how layers merge, and what a bad file says. Symlinks:
//! `links`.

mod links;

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

fn withheld(policy: &Policy, path: &str) -> Option<String> {
    policy.withheld_by(Path::new(path)).map(str::to_string)
}

#[test]
fn default_read_rules_withhold_secrets_at_any_depth_and_not_their_lookalikes() {
    let policy = defaults();
    let table = [
        (".env", Some("**/.env")),
        ("services/api/.env.local", Some("**/.env.*")),
        (".ENV", Some("**/.env")),
        (".env.example", Some("**/.env.*")),
        (".envrc", Some("**/.envrc")),
        ("config/prod.pem", Some("**/*.pem")),
        ("tls/server.KEY", Some("**/*.key")),
        ("certs/client.p12", Some("**/*.p12")),
        ("id_rsa", Some("**/id_rsa")),
        ("deploy/id_ed25519", Some("**/id_ed25519")),
        ("home/.ssh/config", Some("**/.ssh/**")),
        (".aws/credentials", Some("**/credentials")),
        ("gcp/credentials.json", Some("**/credentials.json")),
        (".npmrc", Some("**/.npmrc")),
        ("web/.npmrc", Some("**/.npmrc")),
        (".netrc", Some("**/.netrc")),
        (".pypirc", Some("**/.pypirc")),
        (".git-credentials", Some("**/.git-credentials")),
        (".docker/config.json", Some("**/.docker/config.json")),
        (".dockercfg", Some("**/.dockercfg")),
        ("app/secrets.yaml", Some("**/secrets.yaml")),
        ("android/release.keystore", Some("**/*.keystore")),
        ("infra/terraform.tfstate", Some("**/*.tfstate")),
        ("infra/terraform.tfstate.backup", Some("**/*.tfstate.*")),
        // Look-alikes that are ordinary files.
        ("id_rsa.pub", None),
        ("deploy/id_ed25519.pub", None),
        ("src/id_utils.py", None),
        ("src/credentials/mod.rs", None),
        ("src/credentials.rs", None),
        ("src/secrets.rs", None),
        ("environment.rs", None),
        ("docs/env.md", None),
        ("keys.txt", None),
        ("src/keyboard.c", None),
        (".docker/daemon.json", None),
    ];
    for (path, rule) in table {
        assert_eq!(
            withheld(&policy, path),
            rule.map(str::to_string),
            "path {path}"
        );
    }
}

#[test]
fn read_allow_re_admits_exactly_and_a_file_replaces_the_lists() {
    let project = tempfile::tempdir().unwrap();
    let file = project.path().join("run.toml");
    std::fs::write(&file, "[read]\nallow = [\"**/.env.example\"]\n").unwrap();
    let policy = Policy::load(project.path(), Some(&file), &[], &[]).unwrap();
    assert_eq!(withheld(&policy, ".env.example"), None);
    assert_eq!(withheld(&policy, "web/.env.example"), None);
    // Allow globs match letter case exactly; deny globs do not.
    assert_eq!(
        withheld(&policy, ".ENV.EXAMPLE"),
        Some("**/.env.*".to_string())
    );
    assert_eq!(withheld(&policy, ".env"), Some("**/.env".to_string()));
    assert_eq!(policy.read().allow, ["**/.env.example"]);
    assert_eq!(policy.read().deny, defaults().read().deny, "deny kept");
    assert_eq!(
        policy.read_loosened(Policy::builtin().unwrap()),
        ["allow +**/.env.example"]
    );

    std::fs::write(&file, "[read]\ndeny = [\"private/**\"]\n").unwrap();
    let policy = Policy::load(project.path(), Some(&file), &[], &[]).unwrap();
    assert_eq!(
        withheld(&policy, "private/a.txt"),
        Some("private/**".to_string())
    );
    assert_eq!(withheld(&policy, "id_rsa"), None, "deny list replaced");
    assert!(
        policy
            .read_loosened(Policy::builtin().unwrap())
            .contains(&"deny -**/id_rsa".to_string())
    );
    std::fs::write(&file, "[read]\ndeny = [\"a/[b\"]\n").unwrap();
    let err = Policy::load(project.path(), Some(&file), &[], &[]).unwrap_err();
    assert!(err.to_string().contains("(line 2)"), "{err}");
}

#[test]
fn a_projects_file_only_adds_to_the_read_policy() {
    let project = tempfile::tempdir().unwrap();
    std::fs::create_dir(project.path().join(".ah")).unwrap();
    std::fs::write(
        project.path().join(PROJECT_POLICY_FILE),
        "[read]\ndeny = [\"private/**\"]\nallow = [\"**\"]\n",
    )
    .unwrap();
    let policy = Policy::load(project.path(), None, &[], &[]).unwrap();
    assert_eq!(withheld(&policy, ".env"), Some("**/.env".to_string()));
    assert_eq!(withheld(&policy, "id_rsa"), Some("**/id_rsa".to_string()));
    assert_eq!(
        withheld(&policy, "private/a.txt"),
        Some("private/**".to_string())
    );
    assert!(policy.read().allow.is_empty());
    assert!(policy.read_loosened(Policy::builtin().unwrap()).is_empty());
    assert_eq!(policy.ignored().len(), 1, "{:?}", policy.ignored());
    assert!(policy.ignored()[0].contains("[read] allow = [\"**\"]"));
    std::fs::write(
        project.path().join(PROJECT_POLICY_FILE),
        "[read]\ndeny = []\n",
    )
    .unwrap();
    let policy = Policy::load(project.path(), None, &[], &[]).unwrap();
    assert_eq!(withheld(&policy, ".env"), Some("**/.env".to_string()));
}

#[test]
fn an_editors_copy_of_a_withheld_file_is_withheld() {
    let policy = defaults();
    for copy in [
        ".env~",
        "#.env#",
        ".#.env",
        "..env.swp",
        "deploy/.id_rsa.swo",
        "deploy/id_rsa.bak",
        "deploy/.id_rsa.un~",
        "secrets.json.orig",
        ".credentials.json.kate-swp",
        "sub/.git/config~",
    ] {
        assert!(withheld(&policy, copy).is_some(), "{copy}");
    }
    for plain in ["notes.swp", "src/main.rs~", "#draft#", "a.bak"] {
        assert_eq!(withheld(&policy, plain), None, "{plain}");
    }
    assert_eq!(
        withheld(&policy, "vendor/lib/.git/config"),
        Some("**/.git/config".to_string())
    );
}

#[test]
fn a_withheld_path_is_never_written() {
    let policy = defaults();
    let violation = policy.check_path("deploy/id_rsa").unwrap_err();
    assert_eq!(
        violation.reason,
        Reason::Withheld {
            rule: "**/id_rsa".to_string()
        }
    );
    assert_eq!(violation.rule(), Some("**/id_rsa"));
    assert_eq!(
        violation.to_string(),
        r#""deploy/id_rsa" is withheld from the work copy by read rule "**/id_rsa", so it is never written"#
    );
    // The write deny list speaks first where both match.
    assert_eq!(rule_of(&policy, ".env"), denied("**/.env"));
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
    let huge = Violation {
        path: "x.bin".into(),
        reason: Reason::TooLarge {
            limit: 50 * 1024 * 1024,
        },
    };
    assert_eq!(
        huge.to_string(),
        r#""x.bin" is larger than 50 MiB: a file that large cannot be part of the patch"#
    );
    assert_eq!(huge.rule(), None);
    let report = violation_report(&[env, outside], None);
    assert!(report.starts_with("step undone: these paths broke the write policy:\n"));
    assert!(report.contains("  \".env\" is denied by rule \"**/.env\"\n"));
    assert!(report.contains("  \"link\" is a symlink to \"/etc/passwd\", outside /work\n"));
    assert!(report.contains("were reverted"), "{report}");
    let stuck = violation_report(&[huge], Some("permission denied"));
    assert!(stuck.starts_with("step NOT undone: these paths broke the write policy:\n"));
    assert!(
        stuck.contains("could not be reverted (permission denied)"),
        "{stuck}"
    );
    assert!(stuck.contains("make no more tool calls"), "{stuck}");
    assert!(!stuck.contains("were reverted"), "{stuck}");
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
    assert_eq!(rule_of(&project_only, ".github/x.yml"), Ok(()));
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

#[test]
fn network_and_env_lists_merge_like_the_others() {
    let project = tempfile::tempdir().unwrap();
    let policy = defaults();
    assert!(policy.sandbox().network_allow.is_empty());
    assert!(policy.sandbox().env.is_empty());
    std::fs::create_dir(project.path().join(".ah")).unwrap();
    std::fs::write(
        project.path().join(PROJECT_POLICY_FILE),
        "[network]\nallow = [\"crates.io:443\", \"*.pypi.org:443\"]\n[sandbox]\nenv = [\"RUST_LOG\"]\n",
    )
    .unwrap();
    let policy = Policy::load(project.path(), None, &[], &[])
        .and_then(|p| p.with_sandbox_flags(&["127.0.0.1:8080".to_string()], &["CI".to_string()]))
        .unwrap();
    assert_eq!(
        policy.sandbox().network_allow,
        ["crates.io:443", "*.pypi.org:443", "127.0.0.1:8080"]
    );
    assert_eq!(policy.sandbox().env, ["RUST_LOG", "CI"]);
    let err = policy
        .with_sandbox_flags(&["crates.io:*".to_string()], &[])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("the command line") && err.contains("no port wildcard"),
        "{err}"
    );
    std::fs::write(
        project.path().join(PROJECT_POLICY_FILE),
        "[network]\nallow = [\n  \"crates.io\",\n]\n",
    )
    .unwrap();
    let err = Policy::load(project.path(), None, &[], &[])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("policy.toml (line 3)") && err.contains("no :PORT"),
        "{err}"
    );
}

#[test]
fn outputs_default_to_build_and_cache_folders_and_a_file_replaces_them() {
    let none = |_: &str| false;
    let policy = defaults();
    for output in [
        "pkg/__pycache__/m.cpython-311.pyc",
        ".pytest_cache/v/cache/lastfailed",
        "web/node_modules/left-pad/index.js",
        "target/debug/app",
        "src/main.o",
        ".DS_Store",
    ] {
        assert!(policy.outputs().is_output(output, &none), "{output}");
    }
    for source in ["src/main.py", "build", "tests/test_m.py", "Makefile"] {
        assert!(!policy.outputs().is_output(source, &none), "{source}");
    }

    let project = tempfile::tempdir().unwrap();
    std::fs::create_dir(project.path().join(".ah")).unwrap();
    let file = project.path().join(PROJECT_POLICY_FILE);
    std::fs::write(&file, "[outputs]\nexclude = [\"*.gen.ts\"]\n").unwrap();
    let policy = Policy::load(project.path(), None, &[], &[]).unwrap();
    assert_eq!(policy.outputs().patterns(), ["*.gen.ts"]);
    assert!(policy.outputs().is_output("web/api.gen.ts", &none));
    assert!(!policy.outputs().is_output("pkg/__pycache__/m.pyc", &none));

    std::fs::write(
        &file,
        "[outputs]\nexclude = [\n  \"ok/\",\n  \"[z-a\",\n]\n",
    )
    .unwrap();
    let err = Policy::load(project.path(), None, &[], &[]).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("policy.toml (line 4)") && text.contains("\"[z-a\""),
        "{text}"
    );
}
