//! The corpus [`elsewhere`] is held to: every file issue 28 reported as
//! applied by `--review auto`, their nested and case-changed forms, other
//! tools of the same kinds, dotfiles, and ordinary files that must stay
//! automatic.

use super::{Elsewhere, INERT, elsewhere};

const INSTRUCTIONS: Option<Elsewhere> = Some(Elsewhere::Instructions);
const RUNS_CODE: Option<Elsewhere> = Some(Elsewhere::RunsCode);
const DOTFILE: Option<Elsewhere> = Some(Elsewhere::Dotfile);

fn check(corpus: &[(&str, Option<Elsewhere>)]) {
    let wrong: Vec<String> = corpus
        .iter()
        .filter(|(path, expected)| elsewhere(path) != *expected)
        .map(|(path, expected)| format!("{path}: {:?}, not {expected:?}", elsewhere(path)))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_reported_files_need_a_human() {
    check(&[
        (".claude/settings.json", RUNS_CODE),
        (".mcp.json", RUNS_CODE),
        (".cursor/rules/style.mdc", INSTRUCTIONS),
        (".codex/config.toml", RUNS_CODE),
        (".gemini/settings.json", RUNS_CODE),
        ("AGENTS.md", INSTRUCTIONS),
        ("CLAUDE.md", INSTRUCTIONS),
        ("sub/.claude/commands/x.md", INSTRUCTIONS),
        ("lefthook-local.yml", RUNS_CODE),
        (".lintstagedrc.json", RUNS_CODE),
        (".dir-locals-2.el", RUNS_CODE),
        (".eslintrc.json", RUNS_CODE),
        (".pylintrc", RUNS_CODE),
        ("mypy.ini", RUNS_CODE),
    ]);
}

#[test]
fn instructions_for_agents_at_any_depth_and_in_any_case() {
    check(&[
        ("Claude.md", INSTRUCTIONS),
        ("claude.md", INSTRUCTIONS),
        ("pkg/api/CLAUDE.md", INSTRUCTIONS),
        ("CLAUDE.local.md", INSTRUCTIONS),
        ("docs/agents.md", INSTRUCTIONS),
        ("AGENT.md", INSTRUCTIONS),
        ("AGENTS.override.md", INSTRUCTIONS),
        ("GEMINI.md", INSTRUCTIONS),
        ("web/Gemini.MD", INSTRUCTIONS),
        (".cursorrules", INSTRUCTIONS),
        ("app/.cursorrules", INSTRUCTIONS),
        (".clinerules", INSTRUCTIONS),
        (".clinerules/style.md", INSTRUCTIONS),
        (".windsurfrules", INSTRUCTIONS),
        (".roorules", INSTRUCTIONS),
        (".rules", INSTRUCTIONS),
        (".goosehints", INSTRUCTIONS),
        (".github/copilot-instructions.md", INSTRUCTIONS),
        (".github/instructions/rust.instructions.md", INSTRUCTIONS),
        (".github/prompts/release.prompt.md", INSTRUCTIONS),
        ("docs/rules.mdc", INSTRUCTIONS),
        (".CURSOR/rules/a.mdc", INSTRUCTIONS),
        (".cursor/rules/nested/b.md", INSTRUCTIONS),
        (".Claude/Commands/deploy.md", INSTRUCTIONS),
        (".claude/agents/reviewer.md", INSTRUCTIONS),
        (".claude/skills/pdf/SKILL.md", INSTRUCTIONS),
        (".claude/skills/pdf/fill.py", INSTRUCTIONS),
        ("plugins/x/skills/y/SKILL.md", INSTRUCTIONS),
        (".windsurf/rules/a.md", INSTRUCTIONS),
        (".roo/rules-code/a.md", INSTRUCTIONS),
        (".continue/rules/a.md", INSTRUCTIONS),
        (".kiro/steering/product.md", INSTRUCTIONS),
        (".amazonq/rules/a.md", INSTRUCTIONS),
        (".junie/guidelines.md", INSTRUCTIONS),
        (".openhands/microagents/repo.md", INSTRUCTIONS),
        (".gemini/commands/x.toml", INSTRUCTIONS),
    ]);
}

#[test]
fn configuration_that_runs_code_in_other_tools() {
    check(&[
        // Other agents.
        (".claude/settings.local.json", RUNS_CODE),
        (".claude/hooks/start.sh", RUNS_CODE),
        ("pkg/.mcp.json", RUNS_CODE),
        (".MCP.json", RUNS_CODE),
        (".cursor/mcp.json", RUNS_CODE),
        (".cursor/environment.json", RUNS_CODE),
        (".codex/prompts.toml", RUNS_CODE),
        (".gemini/.env", RUNS_CODE),
        (".continue/config.yaml", RUNS_CODE),
        (".aider.conf.yml", RUNS_CODE),
        (".aiderignore", RUNS_CODE),
        (".roo/mcp.json", RUNS_CODE),
        (".roomodes", RUNS_CODE),
        (".windsurf/mcp.json", RUNS_CODE),
        (".kiro/settings/mcp.json", RUNS_CODE),
        (".openhands/setup.sh", RUNS_CODE),
        ("opencode.json", RUNS_CODE),
        ("crush.json", RUNS_CODE),
        // Editors.
        (".vscode/settings.json", RUNS_CODE),
        (".idea/workspace.xml", RUNS_CODE),
        (".zed/tasks.json", RUNS_CODE),
        ("app.sublime-project", RUNS_CODE),
        (".dir-locals.el", RUNS_CODE),
        ("lisp/.dir-locals-2.el", RUNS_CODE),
        (".editorconfig", RUNS_CODE),
        (".nvim.lua", RUNS_CODE),
        // Hook managers.
        ("lefthook.yml", RUNS_CODE),
        ("Lefthook-Local.YAML", RUNS_CODE),
        (".lefthook-local.yml", RUNS_CODE),
        (".lefthook/pre-commit/x.sh", RUNS_CODE),
        (".lintstagedrc", RUNS_CODE),
        ("lint-staged.config.mjs", RUNS_CODE),
        ("commitlint.config.js", RUNS_CODE),
        // Linters, formatters, compilers.
        ("web/.eslintrc.json", RUNS_CODE),
        (".eslintrc", RUNS_CODE),
        ("eslint.config.js", RUNS_CODE),
        (".prettierrc", RUNS_CODE),
        (".prettierrc.json", RUNS_CODE),
        ("prettier.config.cjs", RUNS_CODE),
        (".stylelintrc.json", RUNS_CODE),
        (".babelrc", RUNS_CODE),
        ("babel.config.json", RUNS_CODE),
        (".swcrc", RUNS_CODE),
        (".mocharc.yml", RUNS_CODE),
        (".rubocop.yml", RUNS_CODE),
        (".golangci.yml", RUNS_CODE),
        ("pylintrc", RUNS_CODE),
        ("svc/.pylintrc", RUNS_CODE),
        (".mypy.ini", RUNS_CODE),
        ("MyPy.ini", RUNS_CODE),
        ("setup.cfg", RUNS_CODE),
        (".flake8", RUNS_CODE),
        ("pytest.ini", RUNS_CODE),
        (".coveragerc", RUNS_CODE),
        // Interpreters and debuggers.
        (".pdbrc", RUNS_CODE),
        (".gdbinit", RUNS_CODE),
        (".Rprofile", RUNS_CODE),
    ]);
}

#[test]
fn every_other_dotfile_or_dot_folder_needs_a_human() {
    check(&[
        (".tool/config", DOTFILE),
        (".foo", DOTFILE),
        ("src/.hidden", DOTFILE),
        ("a/b/.c/d/e.rs", DOTFILE),
        (".well-known/security.txt", DOTFILE),
        (".changeset/brave-cats.md", DOTFILE),
        (".config/tool.toml", DOTFILE),
        (".dockerignore", DOTFILE),
        (".npmignore", DOTFILE),
        (".eslintignore", DOTFILE),
        (".mailmap", DOTFILE),
        (".nvmrc", DOTFILE),
        (".python-version", DOTFILE),
        (".clang-format", DOTFILE),
        (".rustfmt.toml", DOTFILE),
        // An inert name inside a dot-folder still makes that folder.
        (".venv/.gitkeep", DOTFILE),
        (".hooks/.keep", DOTFILE),
    ]);
}

#[test]
fn ordinary_files_and_inert_dotfiles_stay_automatic() {
    check(&[
        ("src/main.rs", None),
        ("README.md", None),
        ("docs/guide.md", None),
        ("tests/test_x.py", None),
        ("env.rs", None),
        ("src/env.rs", None),
        ("src/claude.rs", None),
        ("docs/claude-code.md", None),
        ("docs/AGENTS.md.orig", None),
        ("agents/mod.rs", None),
        ("commands/deploy.md", None),
        ("src/rules.rs", None),
        ("config/settings.json", None),
        ("tests/conftest.py", None),
        ("web/src/index.ts", None),
        ("tsconfig.json", None),
        ("src/v1.2/x.rs", None),
        (".gitkeep", None),
        ("assets/.gitkeep", None),
        ("static/.KEEP", None),
        (".prettierignore", None),
    ]);
}

#[test]
fn the_inert_names_are_dotfiles_of_no_list() {
    for name in INERT {
        assert!(name.starts_with('.'), "{name}");
        assert_eq!(elsewhere(name), None, "{name}");
    }
}
