//! Which changed files act outside the diff, in one decision
//! ([`elsewhere`]) that `--review auto` turns into reasons and the review
//! screen into marks.
//!
//! The principle: `--review auto` applies a change only to files that
//! cannot run code or steer an agent outside a normal look at the diff. A
//! source edit runs when the user chooses to run that source; these files
//! act on their own, on the host, the next time an agent session starts in
//! the repository, the folder is opened in an editor, a commit is made or
//! a linter runs. Three kinds need a human, at any depth and whatever their
//! letter case:
//!
//! - **instructions for agents**: files every later agent session reads as
//!   orders (ah's own too: it puts `AGENTS.md` and `CLAUDE.md` into its
//!   system prompt);
//! - **runs code in other tools**: other agents' configuration (hooks, MCP
//!   servers, permissions), and configuration of editors, hook managers,
//!   linters, formatters, interpreters and debuggers that names code to load
//!   or commands to run;
//! - **dotfiles not known to be inert**: any path with a component that
//!   starts with `.`, a dotfile or a dot-folder. Tools find their
//!   configuration under such names by convention, so every one is taken
//!   for one unless it is a file on the short list known to be inert
//!   ([`INERT`]).
//!
//! The lists of the first two kinds are examples, kept so that a file is
//! named for what it is, and so that configuration without a leading dot
//! (`mypy.ini`, `lefthook-local.yml`, `opencode.json`) is caught. A tool
//! missing from them is still caught when its file is a dotfile; a new tool
//! that reads a file without a dot is the gap, closed by adding its name.
//! Paths the policy restricts (`[review] restricted`) need a human too; for
//! those `--review auto` names the rule instead.

#[cfg(test)]
mod tests;

use std::sync::LazyLock;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

/// What a changed file does outside the diff.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Elsewhere {
    /// Read as orders by agent sessions.
    Instructions,
    /// Configuration that makes another tool run code or commands.
    RunsCode,
    /// A dotfile or a file in a dot-folder that is not known to be inert.
    Dotfile,
}

impl Elsewhere {
    /// The mark the review screen shows beside the file.
    pub fn label(self) -> &'static str {
        match self {
            Elsewhere::Instructions => "instructions for agents",
            Elsewhere::RunsCode => "runs code in other tools",
            Elsewhere::Dotfile => "dotfile not known to be inert",
        }
    }

    /// What `--review auto` says of the file, after its path.
    pub fn reason(self) -> &'static str {
        match self {
            Elsewhere::Instructions => "is instructions for agents",
            Elsewhere::RunsCode => "runs code in other tools",
            Elsewhere::Dotfile => "is a dotfile not known to be inert",
        }
    }
}

/// Whether the changed file at `path` (relative to the project root, `/` as
/// separator; either side of a change) acts outside the diff, and how.
/// `None` is an ordinary file that `--review auto` may apply.
pub fn elsewhere(path: &str) -> Option<Elsewhere> {
    let lists = &*LISTS;
    if lists.instructions.is_match(path) {
        return Some(Elsewhere::Instructions);
    }
    if lists.runs_code.is_match(path) {
        return Some(Elsewhere::RunsCode);
    }
    let (folders, name) = path.rsplit_once('/').unwrap_or(("", path));
    let in_dot_folder = folders.split('/').any(|folder| folder.starts_with('.'));
    let inert = INERT.iter().any(|known| known.eq_ignore_ascii_case(name));
    (in_dot_folder || (name.starts_with('.') && !inert)).then_some(Elsewhere::Dotfile)
}

/// Dotfiles known to be inert, by name, outside dot-folders: no tool runs
/// them, loads code or commands through them, or takes orders from them.
/// Each one is here with its reason; a name not here needs a human.
///
/// - `.gitkeep`, `.keep`: empty markers that keep a folder in git; no tool
///   reads them.
/// - `.prettierignore`: paths Prettier leaves unformatted, in `.gitignore`
///   syntax; nothing else reads it and it names no code.
///
/// Left out on purpose: `.editorconfig` (Emacs' EditorConfig plugin ran
/// code from `file_type_emacs`; editors act on it when a file is opened),
/// `.dockerignore` and `.npmignore` (what goes into an image or a published
/// package: a secret left in), other ignore files (they hide files from
/// scanners and linters), `.mailmap` (whose name history shows),
/// `.gitignore` (restricted by the policy), version pins such as `.nvmrc`
/// (which interpreter runs).
pub(super) const INERT: &[&str] = &[".gitkeep", ".keep", ".prettierignore"];

/// Instructions for agents, at any depth. Claude Code, Codex, Gemini CLI,
/// Cursor, Copilot, Cline, Windsurf, Roo, Zed, Goose, Amp, Crush, Kiro,
/// Amazon Q, Junie, OpenHands, Augment, opencode, Continue, and any tool
/// that reads the shared `AGENTS.md` or agent skills.
const INSTRUCTIONS: &[&str] = &[
    // Instruction files by name.
    "**/AGENTS.md",
    "**/AGENTS.override.md",
    "**/AGENT.md",
    "**/CLAUDE.md",
    "**/CLAUDE.local.md",
    "**/GEMINI.md",
    "**/QWEN.md",
    "**/CRUSH.md",
    "**/SKILL.md",
    "**/copilot-instructions.md",
    "**/*.instructions.md",
    "**/*.prompt.md",
    "**/*.chatmode.md",
    "**/*.agent.md",
    "**/*.mdc",
    "**/.cursorrules",
    "**/.windsurfrules",
    "**/.clinerules",
    "**/.clinerules/**",
    "**/.roorules",
    "**/.roorules-*",
    "**/.rules",
    "**/.goosehints",
    "**/.augment-guidelines",
    // Folders of rules, commands, subagents and skills in agents' folders.
    "**/.claude/{commands,agents,skills,output-styles}/**",
    "**/.cursor/{rules,commands}/**",
    "**/.windsurf/{rules,workflows}/**",
    "**/.roo/rules*/**",
    "**/.roo/commands/**",
    "**/.continue/{rules,prompts}/**",
    "**/.codex/prompts/**",
    "**/.gemini/commands/**",
    "**/.opencode/{agent,agents,command,commands}/**",
    "**/.github/{instructions,prompts,chatmodes,agents}/**",
    "**/.kiro/steering/**",
    "**/.amazonq/rules/**",
    "**/.augment/rules/**",
    "**/.junie/**",
    "**/.openhands/microagents/**",
    "**/.aiassistant/rules/**",
];

/// Configuration that makes another tool on the host run code or commands,
/// at any depth.
const RUNS_CODE: &[&str] = &[
    // Other agents' configuration: hooks that run on a session's start or
    // a tool call (`.claude/settings.json`'s `SessionStart`), MCP servers
    // started by command (`.mcp.json`, `[mcp_servers]`), permissions,
    // setup scripts, lint and test commands.
    "**/.claude/**",
    "**/.mcp.json",
    "**/.cursor/**",
    "**/.codex/**",
    "**/.gemini/**",
    "**/.qwen/**",
    "**/.continue/**",
    "**/.aider*",
    "**/.aider*/**",
    "**/.roo/**",
    "**/.roomodes",
    "**/.windsurf/**",
    "**/.kiro/**",
    "**/.amazonq/**",
    "**/.kilocode/**",
    "**/.augment/**",
    "**/.openhands/**",
    "**/.opencode/**",
    "**/opencode.json",
    "**/opencode.jsonc",
    "**/.crush.json",
    "**/crush.json",
    // Editors: tasks, interpreter paths, startup code and evaluated local
    // variables, acted on when the folder or a file is opened.
    "**/.vscode/**",
    "**/.idea/**",
    "**/.zed/**",
    "**/*.code-workspace",
    "**/*.sublime-project",
    "**/.dir-locals*.el",
    "**/.editorconfig",
    "**/.nvim.lua",
    "**/.nvimrc",
    "**/.exrc",
    // Git hook managers: commands run on the next commit.
    "**/lefthook*.{yml,yaml,json,toml}",
    "**/.lefthook*",
    "**/.lefthook*/**",
    "**/.lintstagedrc*",
    "**/lint-staged.config.*",
    "**/.simple-git-hooks*",
    "**/simple-git-hooks.*",
    "**/.commitlintrc*",
    "**/commitlint.config.*",
    // Linters, formatters and compilers whose configuration names code to
    // load (parsers, plugins, presets, init hooks); editors run them on
    // opening or saving a file, hooks on commit.
    "**/.eslintrc*",
    "**/eslint.config.*",
    "**/.prettierrc*",
    "**/prettier.config.*",
    "**/.stylelintrc*",
    "**/stylelint.config.*",
    "**/.babelrc*",
    "**/babel.config.*",
    "**/.swcrc",
    "**/.mocharc*",
    "**/.markdownlint-cli2.*",
    "**/.rubocop*.yml",
    "**/.golangci.*",
    // Python tools: pylint's `init-hook` and plugins, mypy's plugins,
    // flake8's local plugins, pytest's `-p` plugins in `addopts`, and
    // `setup.cfg`, which holds any of them and setuptools' `cmdclass`;
    // coverage's plugins.
    "**/.pylintrc",
    "**/pylintrc",
    "**/mypy.ini",
    "**/.mypy.ini",
    "**/.flake8",
    "**/setup.cfg",
    "**/pytest.ini",
    "**/.pytest.ini",
    "**/.coveragerc",
    // Startup files that interpreters and debuggers run from the current
    // folder.
    "**/.pdbrc",
    "**/.pdbrc.py",
    "**/.gdbinit",
    "**/.lldbinit",
    "**/.Rprofile",
    "**/.irbrc",
    "**/.pryrc",
];

/// The two lists, compiled once.
struct Lists {
    instructions: GlobSet,
    runs_code: GlobSet,
}

static LISTS: LazyLock<Lists> = LazyLock::new(|| Lists {
    instructions: compile(INSTRUCTIONS),
    runs_code: compile(RUNS_CODE),
});

/// One matcher of built-in globs: `*` never crosses a `/`, letter case is
/// ignored (a case-insensitive file system reads `Claude.md` as
/// `CLAUDE.md`). The globs are constants the unit tests compile, so a bad
/// one is a bug, not an input.
fn compile(globs: &[&str]) -> GlobSet {
    let mut set = GlobSetBuilder::new();
    for glob in globs {
        let glob = GlobBuilder::new(glob)
            .literal_separator(true)
            .case_insensitive(true)
            .build();
        set.add(glob.unwrap_or_else(|err| panic!("built-in review glob: {err}")));
    }
    set.build()
        .unwrap_or_else(|err| panic!("built-in review globs: {err}"))
}
