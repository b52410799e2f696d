//! `--review auto` decisions and the diffstat, table by table: every reason
//! alone and together, what the built-in restricted list catches and what it
//! lets through, files that act outside the diff, and how the summary marks
//! links and modes.

use super::diffstat::{MAX_NAME, STAT_WIDTH};
use super::*;
use ah_record::patch::{MODE_EXECUTABLE, MODE_FILE, MODE_SUBMODULE, MODE_SYMLINK};

/// A text file changed in place.
fn stat(path: &str, added: u64, removed: u64) -> FileStat {
    FileStat {
        path: path.to_string(),
        added,
        removed,
        binary: false,
        old_mode: MODE_FILE,
        new_mode: MODE_FILE,
        bytes: 100 * (added + removed + 1),
    }
}

/// A binary file changed in place.
fn binary(path: &str) -> FileStat {
    FileStat {
        binary: true,
        ..stat(path, 0, 0)
    }
}

/// A one-line change of `path` whose old and new git modes are given
/// (0: that side does not exist).
fn moded(path: &str, old_mode: u32, new_mode: u32) -> FileStat {
    FileStat {
        old_mode,
        new_mode,
        ..stat(path, 1, 0)
    }
}

fn policy() -> Policy {
    let project = tempfile::tempdir().unwrap();
    Policy::load(project.path(), None, &[], &[]).unwrap()
}

fn reasons(decision: AutoDecision) -> Vec<String> {
    match decision {
        AutoDecision::Save { reasons } => reasons,
        other => panic!("expected Save, got {other:?}"),
    }
}

#[test]
fn a_small_clean_text_patch_is_applied() {
    let stats = [stat("src/a.rs", 10, 2), stat("README.md", 1, 0)];
    assert_eq!(decide(&stats, &policy(), true, &[]), AutoDecision::Apply);
}

#[test]
fn an_empty_patch_has_nothing_to_apply() {
    assert_eq!(
        decide(&[], &policy(), true, &[]),
        AutoDecision::NothingToApply
    );
    assert_eq!(
        decide(&[], &policy(), false, &[]),
        AutoDecision::NothingToApply
    );
}

#[test]
fn each_reason_alone() {
    let policy = policy();
    let at_limit = [stat("a", 300, 100)];
    assert_eq!(decide(&at_limit, &policy, true, &[]), AutoDecision::Apply);
    assert_eq!(
        reasons(decide(&[stat("a", 400, 123)], &policy, true, &[])),
        vec!["patch too large: 523 changed lines > 400"]
    );
    let many: Vec<FileStat> = (0..25).map(|i| stat(&format!("f{i}"), 1, 0)).collect();
    assert_eq!(
        reasons(decide(&many, &policy, true, &[])),
        vec!["too many files: 25 > 20"]
    );
    assert_eq!(
        reasons(decide(&[binary("logo.png")], &policy, true, &[])),
        vec!["binary file: logo.png"]
    );
    assert_eq!(
        reasons(decide(
            &[stat(".github/workflows/ci.yml", 1, 1)],
            &policy,
            true,
            &[]
        )),
        vec!["touches restricted path .github/workflows/ci.yml (rule **/.github/**)"]
    );
    assert_eq!(
        reasons(decide(
            &[stat("docker/Dockerfile", 1, 1)],
            &policy,
            true,
            &[]
        )),
        vec!["touches restricted path docker/Dockerfile (rule **/Dockerfile)"]
    );
    assert_eq!(
        reasons(decide(&[stat("a", 1, 1)], &policy, false, &[])),
        vec!["does not apply cleanly to the host"]
    );
}

#[test]
fn every_reason_is_listed_together() {
    let mut stats: Vec<FileStat> = (0..21).map(|i| stat(&format!("f{i}"), 20, 0)).collect();
    stats.push(binary("img/a.png"));
    stats.push(binary("img/b.png"));
    stats.push(stat("policy/default.toml", 1, 1));
    stats.push(moded("scripts/run.sh", 0, MODE_EXECUTABLE));
    stats.push(moded("Makefile", MODE_FILE, MODE_EXECUTABLE));
    stats.push(moded("vendor/lib", 0, MODE_SUBMODULE));
    stats.push(moded("link", 0, MODE_SYMLINK));
    assert_eq!(
        reasons(decide(&stats, &policy(), false, &[])),
        vec![
            "patch too large: 426 changed lines > 400",
            "too many files: 28 > 20",
            "binary file: img/a.png",
            "binary file: img/b.png",
            "symlink: link",
            "submodule: vendor/lib",
            "mode change: Makefile (100644 → 100755)",
            "new executable file: scripts/run.sh",
            "touches restricted path policy/default.toml (rule policy/**)",
            "touches restricted path Makefile (rule **/Makefile)",
            "does not apply cleanly to the host",
        ]
    );
}

#[test]
fn links_submodules_and_modes_need_a_human() {
    const EXEC: u32 = MODE_EXECUTABLE;
    const LINK: u32 = MODE_SYMLINK;
    const SUB: u32 = MODE_SUBMODULE;
    // (path, old mode, new mode, reasons); 0 is a side that does not exist.
    let table: &[(&str, u32, u32, &[&str])] = &[
        ("src/new.rs", 0, MODE_FILE, &[]),
        ("src/gone.rs", MODE_FILE, 0, &[]),
        ("old-tool.sh", EXEC, 0, &[]),
        ("tool.sh", EXEC, EXEC, &[]),
        (
            "tool.sh",
            MODE_FILE,
            EXEC,
            &["mode change: tool.sh (100644 → 100755)"],
        ),
        (
            "tool.sh",
            EXEC,
            MODE_FILE,
            &["mode change: tool.sh (100755 → 100644)"],
        ),
        (
            "old.txt",
            0o100664,
            MODE_FILE,
            &["mode change: old.txt (100664 → 100644)"],
        ),
        ("run.sh", 0, EXEC, &["new executable file: run.sh"]),
        ("link", 0, LINK, &["symlink: link"]),
        ("link", LINK, LINK, &["symlink: link"]),
        ("link", LINK, 0, &["symlink: link"]),
        ("vendor/lib", 0, SUB, &["submodule: vendor/lib"]),
        ("vendor/lib", SUB, SUB, &["submodule: vendor/lib"]),
        ("vendor/lib", SUB, 0, &["submodule: vendor/lib"]),
        // A type change as one entry (git splits it, but a merged one must
        // not slip through either).
        ("x", MODE_FILE, LINK, &["symlink: x"]),
        ("x", LINK, EXEC, &["symlink: x"]),
        ("x", SUB, MODE_FILE, &["submodule: x"]),
    ];
    let policy = policy();
    for &(path, old, new, expected) in table {
        let decision = decide(&[moded(path, old, new)], &policy, true, &[]);
        if expected.is_empty() {
            assert_eq!(decision, AutoDecision::Apply, "{path} {old:o} → {new:o}");
        } else {
            assert_eq!(reasons(decision), expected, "{path} {old:o} → {new:o}");
        }
    }
}

#[test]
fn the_built_in_list_restricts_what_runs_on_the_host() {
    let table = [
        ("crates/core/build.rs", Some("**/build.rs")),
        ("Makefile", Some("**/Makefile")),
        ("sub/makefile", Some("**/Makefile")),
        ("mk/rules.mk", Some("**/*.mk")),
        (".cargo/config.toml", Some("**/.cargo/**")),
        ("Cargo.toml", Some("**/Cargo.toml")),
        ("crates/x/Cargo.toml", Some("**/Cargo.toml")),
        ("rust-toolchain.toml", Some("**/rust-toolchain.toml")),
        ("web/package.json", Some("**/package.json")),
        (".npmrc", Some("**/.npmrc")),
        (".yarn/releases/yarn.cjs", Some("**/.yarn/**")),
        (".envrc", Some("**/.envrc")),
        (".gitattributes", Some("**/.gitattributes")),
        (".gitmodules", Some("**/.gitmodules")),
        ("docs/.gitignore", Some("**/.gitignore")),
        (".husky/pre-commit", Some("**/.husky/**")),
        (".vscode/tasks.json", Some("**/.vscode/**")),
        (".idea/workspace.xml", Some("**/.idea/**")),
        (
            ".pre-commit-config.yaml",
            Some("**/.pre-commit-config.yaml"),
        ),
        ("pyproject.toml", Some("**/pyproject.toml")),
        ("pkg/setup.py", Some("**/setup.py")),
        ("requirements-dev.txt", Some("**/requirements*.txt")),
        ("SETUP.PY", Some("**/setup.py")),
        ("docker/Dockerfile", Some("**/Dockerfile")),
        (".github/workflows/ci.yml", Some("**/.github/**")),
        ("policy/default.toml", Some("policy/**")),
        // Nested and differently cased copies of top-level CI files.
        ("ci/.gitlab-ci.yml", Some("**/.gitlab-ci.yml")),
        (".GitLab-CI.yml", Some("**/.gitlab-ci.yml")),
        ("ci/build.gitlab-ci.yml", Some("**/*.gitlab-ci.yml")),
        ("services/api/.circleci/config.yml", Some("**/.circleci/**")),
        (".CircleCI/config.yml", Some("**/.circleci/**")),
        // Every forge's and vendor's CI.
        (".gitea/workflows/ci.yaml", Some("**/.gitea/**")),
        (".forgejo/workflows/ci.yaml", Some("**/.forgejo/**")),
        (".woodpecker.yml", Some("**/.woodpecker.yml")),
        (".woodpecker/build.yaml", Some("**/.woodpecker/**")),
        (".drone.yml", Some("**/.drone.yml")),
        (".travis.yml", Some("**/.travis.yml")),
        (
            "bitbucket-pipelines.yml",
            Some("**/bitbucket-pipelines.yml"),
        ),
        ("azure-pipelines.yml", Some("**/azure-pipelines*.yml")),
        (".buildkite/pipeline.yml", Some("**/.buildkite/**")),
        ("Jenkinsfile", Some("**/Jenkinsfile*")),
        (".semaphore/semaphore.yml", Some("**/.semaphore/**")),
        ("appveyor.yml", Some("**/appveyor.yml")),
        ("cloudbuild.yaml", Some("**/cloudbuild.yaml")),
        (".tekton/pipeline.yaml", Some("**/.tekton/**")),
        ("codemagic.yaml", Some("**/codemagic.yaml")),
        ("bitrise.yml", Some("**/bitrise.yml")),
        (".builds/arch.yml", Some("**/.builds/**")),
        ("netlify.toml", Some("**/netlify.toml")),
        ("vercel.json", Some("**/vercel.json")),
        ("Procfile", Some("**/Procfile")),
        ("Earthfile", Some("**/Earthfile")),
        ("Tiltfile", Some("**/Tiltfile")),
        ("Vagrantfile", Some("**/Vagrantfile")),
        // Build files of more ecosystems.
        ("buildSrc/src/main/kotlin/x.kt", Some("**/buildSrc/**")),
        ("Directory.Build.props", Some("**/*.props")),
        ("src/App/App.csproj", Some("**/*.csproj")),
        ("build/Custom.targets", Some("**/*.targets")),
        ("App.sln", Some("**/*.sln")),
        ("Package.swift", Some("**/Package.swift")),
        ("default.nix", Some("**/*.nix")),
        ("nix/overlay.nix", Some("**/*.nix")),
        ("configure", Some("**/configure")),
        ("Taskfile.yml", Some("**/Taskfile*.yml")),
        ("Justfile", Some("**/justfile")),
        (".justfile", Some("**/.justfile")),
        ("BUILD.bazel", Some("**/BUILD.bazel")),
        ("pkg/BUILD", Some("**/BUILD")),
        ("WORKSPACE", Some("**/WORKSPACE")),
        ("MODULE.bazel", Some("**/MODULE.bazel")),
        ("tools/defs.bzl", Some("**/*.bzl")),
        (".bazelrc", Some("**/.bazelrc")),
        ("SConstruct", Some("**/SConstruct")),
        ("gulpfile.js", Some("**/{gulpfile,Gruntfile}.*")),
        ("Gruntfile.js", Some("**/{gulpfile,Gruntfile}.*")),
        (
            "web/vite.config.ts",
            Some(
                "**/{vite,vitest,webpack,rollup,rolldown,rspack,esbuild,tsup,babel,eslint,prettier,postcss,tailwind,next,nuxt,svelte,astro,remix,jest,playwright,karma,metro}.config.*",
            ),
        ),
        (".eslintrc.cjs", Some("**/.*rc.{js,cjs,mjs,ts,cts,mts}")),
        (".pre-commit-hooks.yaml", Some("**/.pre-commit-hooks.yaml")),
        ("go.mod", Some("**/go.mod")),
        ("composer.json", Some("**/composer.json")),
        // Ordinary sources and docs stay automatic.
        ("src/main.rs", None),
        ("src/build_info.rs", None),
        ("src/makefile.rs", None),
        ("tests/conftest.py", None),
        ("tests/test_app.py", None),
        ("docs/package.json.md", None),
        ("README.md", None),
        ("web/src/index.ts", None),
        ("scripts/release.sh", None),
        ("src/app/app.config.ts", None),
        ("src/build/mod.rs", None),
        ("docs/ci.md", None),
        ("src/project.rs", None),
    ];
    let policy = policy();
    for (path, rule) in table {
        assert_eq!(policy.restricted_rule(path), rule, "{path}");
    }
}

#[test]
fn files_acting_outside_the_diff_need_a_human_with_one_reason_each() {
    let stats = [
        stat("src/main.rs", 3, 1),
        stat("Claude.md", 1, 0),
        // A rename of settings out of `.claude/`: its deleted side counts.
        moded(".claude/settings.json", MODE_FILE, 0),
        moded("docs/settings.json", 0, MODE_FILE),
        stat("mypy.ini", 1, 0),
        stat(".tool/config", 1, 0),
        stat("assets/.gitkeep", 0, 0),
        // Restricted and instructions: the rule is named, once.
        stat(".github/copilot-instructions.md", 1, 0),
        stat(".vscode/settings.json", 1, 0),
        stat("a\nb/AGENTS.md", 1, 0),
    ];
    assert_eq!(
        reasons(decide(&stats, &policy(), true, &[])),
        vec![
            "needs a human: Claude.md is instructions for agents",
            "needs a human: .claude/settings.json runs code in other tools",
            "needs a human: mypy.ini runs code in other tools",
            "needs a human: .tool/config is a dotfile not known to be inert",
            "touches restricted path .github/copilot-instructions.md (rule **/.github/**)",
            "touches restricted path .vscode/settings.json (rule **/.vscode/**)",
            "needs a human: a\\nb/AGENTS.md is instructions for agents",
            "file name with control characters: a\\nb/AGENTS.md",
        ]
    );
}

#[test]
fn limits_come_from_the_policy() {
    let project = tempfile::tempdir().unwrap();
    let file = project.path().join("p.toml");
    std::fs::write(&file, "[review]\nmax_lines = 5\nmax_bytes = 1000\n").unwrap();
    let policy = Policy::load(project.path(), Some(&file), &[], &[]).unwrap();
    assert_eq!(
        reasons(decide(&[stat("a", 6, 0)], &policy, true, &[])),
        vec!["patch too large: 6 changed lines > 5"]
    );
    let big = FileStat {
        bytes: 1001,
        ..stat("a", 1, 0)
    };
    assert_eq!(
        reasons(decide(&[big], &policy, true, &[])),
        vec![
            "patch too large: 1001 bytes > 1000",
            "file too large: a (1001 bytes of patch > 1000)"
        ]
    );
}

#[test]
fn bytes_bound_a_patch_of_few_lines() {
    let policy = policy();
    let limit = policy.review().max_bytes;
    assert_eq!(limit, 256 * 1024);
    let huge = |path: &str, bytes: u64| FileStat {
        bytes,
        ..stat(path, 1, 0)
    };
    let at_limit = [huge("a", limit - 10), huge("b", 10)];
    assert_eq!(decide(&at_limit, &policy, true, &[]), AutoDecision::Apply);
    // Three one-line files of 4 MiB: 3 lines, 3 files, 12 MiB.
    let mib = 1024 * 1024;
    let three = [huge("a", 4 * mib), huge("b", 4 * mib), huge("c", 4 * mib)];
    assert_eq!(
        reasons(decide(&three, &policy, true, &[])),
        vec![
            format!("patch too large: {} bytes > {limit}", 12 * mib),
            format!("file too large: a ({} bytes of patch > {limit})", 4 * mib),
            format!("file too large: b ({} bytes of patch > {limit})", 4 * mib),
            format!("file too large: c ({} bytes of patch > {limit})", 4 * mib),
        ]
    );
    // Many files each under the limit, together over it.
    let many = [huge("a", limit), huge("b", 1)];
    assert_eq!(
        reasons(decide(&many, &policy, true, &[])),
        vec![format!("patch too large: {} bytes > {limit}", limit + 1)]
    );
}

#[test]
fn a_policy_file_adds_restricted_paths_and_never_removes_the_built_in_ones() {
    // The reported hole: a project policy that restricts one more path
    // replaced the whole list, so CI files were applied on their own.
    let project = tempfile::tempdir().unwrap();
    std::fs::create_dir(project.path().join(".ah")).unwrap();
    std::fs::write(
        project.path().join(".ah/policy.toml"),
        "[review]\nrestricted = [\"deploy/**\"]\n",
    )
    .unwrap();
    let file = project.path().join("p.toml");
    std::fs::write(&file, "[review]\nrestricted = []\n").unwrap();
    let policy = Policy::load(project.path(), Some(&file), &[], &[]).unwrap();
    for (path, rule) in [
        ("deploy/prod.sh", "deploy/**"),
        (".gitlab-ci.yml", "**/.gitlab-ci.yml"),
        (".circleci/config.yml", "**/.circleci/**"),
        (".github/workflows/ci.yml", "**/.github/**"),
    ] {
        assert_eq!(
            reasons(decide(&[stat(path, 1, 0)], &policy, true, &[])),
            vec![format!("touches restricted path {path} (rule {rule})")]
        );
    }
}

#[test]
fn diffstat_looks_like_git() {
    let stats = [
        stat("src/main.rs", 3, 2),
        stat("README.md", 1, 0),
        binary("logo.png"),
    ];
    assert_eq!(
        diffstat(&stats),
        concat!(
            " src/main.rs |   5 +++--\n",
            " README.md   |   1 +\n",
            " logo.png    | Bin\n",
            " 3 files changed, 4 insertions(+), 2 deletions(-)\n",
        )
    );
}

#[test]
fn diffstat_adds_git_summary_lines_for_links_submodules_and_modes() {
    let stats = [
        stat("src/a.rs", 1, 1),
        moded("tool.sh", MODE_FILE, MODE_EXECUTABLE),
        FileStat {
            added: 0,
            ..moded("run.sh", 0, MODE_EXECUTABLE)
        },
        moded("link", 0, MODE_SYMLINK),
        moded("moved", MODE_SYMLINK, MODE_SYMLINK),
        moded("gone", MODE_SYMLINK, 0),
        moded("vendor/lib", 0, MODE_SUBMODULE),
        moded("plain.txt", 0, MODE_FILE),
    ];
    assert_eq!(
        diffstat(&stats),
        concat!(
            " src/a.rs   | 2 +-\n",
            " tool.sh    | 1 +\n",
            " run.sh     | 0\n",
            " link       | 1 +\n",
            " moved      | 1 +\n",
            " gone       | 1 +\n",
            " vendor/lib | 1 +\n",
            " plain.txt  | 1 +\n",
            " 8 files changed, 7 insertions(+), 1 deletion(-)\n",
            " mode change 100644 => 100755 tool.sh\n",
            " create mode 100755 run.sh\n",
            " create mode 120000 link\n",
            " delete mode 120000 gone\n",
            " create mode 160000 vendor/lib\n",
        )
    );
}

#[test]
fn diffstat_marks_files_that_act_outside_the_diff_escaped() {
    let stats = [
        stat("src/a.rs", 1, 0),
        stat(".claude/settings.json", 1, 0),
        moded("CLAUDE.md", MODE_FILE, 0),
        stat(".tool/config", 1, 0),
        stat("x\n mode change/AGENTS.md", 1, 0),
    ];
    let text = diffstat(&stats);
    let summary: Vec<&str> = text.lines().skip(stats.len() + 1).collect();
    assert_eq!(
        summary,
        [
            " runs code in other tools: .claude/settings.json",
            " instructions for agents: CLAUDE.md",
            " dotfile not known to be inert: .tool/config",
            " instructions for agents: x\\n mode change/AGENTS.md",
        ],
        "{text}"
    );
}

#[test]
fn diffstat_summary_uses_singular_and_omits_zero_sides() {
    assert_eq!(
        diffstat(&[stat("a", 0, 1)]),
        " a | 1 -\n 1 file changed, 1 deletion(-)\n"
    );
    assert_eq!(
        diffstat(&[binary("b.bin")]),
        " b.bin | Bin\n 1 file changed, 0 insertions(+), 0 deletions(-)\n"
    );
    assert_eq!(diffstat(&[]), " 0 files changed\n");
}

#[test]
fn diffstat_scales_large_changes_to_the_graph_width() {
    let text = diffstat(&[stat("big.rs", 900, 100), stat("small.rs", 1, 1)]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        format!(" big.rs   | 1000 {}{}", "+".repeat(36), "-".repeat(4))
    );
    assert_eq!(lines[1], " small.rs |    2 +-");
    assert_eq!(
        lines[2],
        " 2 files changed, 901 insertions(+), 101 deletions(-)"
    );
}

#[test]
fn diffstat_shortens_long_paths_and_stays_within_80_columns() {
    let long = format!("{}/end.rs", "d".repeat(60));
    let text = diffstat(&[stat(&long, 900, 100), stat("a", 1, 0)]);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with(" ...ddd"), "{text}");
    assert!(lines[0].contains("/end.rs | 1000 +"), "{text}");
    assert_eq!(lines[0].chars().count(), STAT_WIDTH, "{text}");
    assert_eq!(lines[1], format!(" a{} |    1 +", " ".repeat(MAX_NAME - 1)));
}

#[test]
fn diffstat_shows_a_name_with_a_newline_on_one_line() {
    let text = diffstat(&[
        stat("a\n nothing else changed | 1 +", 1, 0),
        moded("run\u{202E}hs.sh", 0, MODE_EXECUTABLE),
    ]);
    assert_eq!(
        text,
        concat!(
            " a\\n nothing else changed | 1 + | 1 +\n",
            " run<U+202E>hs.sh               | 1 +\n",
            " 2 files changed, 2 insertions(+)\n",
            " create mode 100755 run<U+202E>hs.sh\n",
        )
    );
}

/// A patch of one new file with `lines`, as git prints it.
fn new_file_patch(path: &str, lines: &[&str]) -> (ah_record::patch::PatchInfo, String) {
    let mut text = format!(
        "diff --git a/{path} b/{path}\nnew file mode 100644\nindex 0000000..1111111\n\
         --- /dev/null\n+++ b/{path}\n@@ -0,0 +1,{} @@\n",
        lines.len()
    );
    for line in lines {
        text.push('+');
        text.push_str(line);
        text.push('\n');
    }
    let patch = ah_record::patch::PatchInfo {
        bytes: text.len() as u64,
        files: vec![stat(path, lines.len() as u64, 0)],
        added_lines: lines.len() as u64,
        removed_lines: 0,
        left_out: Vec::new(),
    };
    (patch, text)
}

#[test]
fn hidden_characters_are_found_by_file_and_new_line() {
    let (patch, text) = new_file_patch(
        "src/lib.rs",
        &[
            "\u{FEFF}fn ok() {}",
            "let s = \"x\u{202E}\u{202E}y\"; // \u{2066}",
            "ok ⚠\u{FE0F}",
            "z\u{200B}",
        ],
    );
    let found = hidden_chars(&patch, text.as_bytes()).unwrap();
    let places: Vec<(Option<u64>, char)> = found.iter().map(|h| (h.line, h.ch)).collect();
    assert_eq!(
        places,
        vec![
            (Some(2), '\u{202E}'),
            (Some(2), '\u{2066}'),
            (Some(4), '\u{200B}')
        ]
    );
    assert_eq!(
        describe_hidden(&found),
        "src/lib.rs:2 (U+202E RIGHT-TO-LEFT OVERRIDE), src/lib.rs:2 (U+2066 LEFT-TO-RIGHT ISOLATE), \
         src/lib.rs:4 (U+200B ZERO WIDTH SPACE)"
    );
}

#[test]
fn hidden_characters_count_context_lines_and_skip_removed_ones() {
    let text = concat!(
        "diff --git a/a.rs b/a.rs\n",
        "index 1111111..2222222 100644\n",
        "--- a/a.rs\n",
        "+++ b/a.rs\n",
        "@@ -10,3 +10,3 @@ fn f() {\n",
        " keep\n",
        "-old\u{202E}\n",
        "+new\u{202E}\n",
        " keep\n",
    );
    let patch = ah_record::patch::PatchInfo {
        bytes: text.len() as u64,
        files: vec![stat("a.rs", 1, 1)],
        added_lines: 1,
        removed_lines: 1,
        left_out: Vec::new(),
    };
    let found = hidden_chars(&patch, text.as_bytes()).unwrap();
    assert_eq!(
        describe_hidden(&found),
        "a.rs:11 (U+202E RIGHT-TO-LEFT OVERRIDE)"
    );
}

#[test]
fn auto_review_saves_patches_with_hidden_characters_or_strange_names() {
    let (patch, text) = new_file_patch("x\u{200B}.rs", &["a\u{202E}"]);
    let found = hidden_chars(&patch, text.as_bytes()).unwrap();
    assert_eq!(
        describe_hidden(&found),
        "x<U+200B>.rs (its name: U+200B ZERO WIDTH SPACE), x<U+200B>.rs:1 (U+202E RIGHT-TO-LEFT OVERRIDE)"
    );
    assert_eq!(
        reasons(decide(&patch.files, &policy(), true, &found)),
        vec![format!(
            "invisible or bidi characters: {}",
            describe_hidden(&found)
        )]
    );
    assert_eq!(
        reasons(decide(&[stat("a\nb", 1, 0)], &policy(), true, &[])),
        vec!["file name with control characters: a\\nb"]
    );
    let many: Vec<Hidden> = (1..=7)
        .map(|line| Hidden {
            path: "m".to_string(),
            line: Some(line),
            ch: '\u{200D}',
        })
        .collect();
    assert!(describe_hidden(&many).ends_with("m:5 (U+200D ZERO WIDTH JOINER), and 2 more"));
}

#[test]
fn a_patch_over_the_byte_cap_is_saved_whatever_is_in_it() {
    use ah_record::patch::{MAX_PATCH_BYTES, PatchInfo};
    let mut patch = PatchInfo::empty();
    patch.files.push(stat("a", 1, 1));
    patch.bytes = MAX_PATCH_BYTES;
    assert_eq!(
        decide_patch(&patch, &policy(), true, &[]),
        AutoDecision::Apply
    );
    patch.bytes = MAX_PATCH_BYTES + (1 << 20);
    assert_eq!(
        reasons(decide_patch(&patch, &policy(), false, &[])),
        [
            "patch too big: 65.0 MiB > 64.0 MiB (the most --review auto applies)",
            "does not apply cleanly to the host"
        ]
    );
}
