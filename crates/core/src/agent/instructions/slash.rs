//! `/` commands: a prompt that starts with `/name args` is replaced by the
//! template `name.md` from the project's `.ah/commands/`, else the user's
//! global `commands/`, else the ones built into ah (`sys/commands/`), with
//! `$ARGUMENTS` replaced by `args`. `/skill:name args` loads a skill and
//! sends `args` after it. A prompt that starts with `//` is sent with one
//! `/` removed, for prompts that really start with a slash.

use std::path::{Path, PathBuf};

use super::frontmatter;
use super::skills::Skills;
use crate::config::own_files::{Folder, PROMPT_CAP, ProjectFiles};

/// The commands that come with ah: (name, template).
const BUILTIN: &[(&str, &str)] = &[
    (
        "review",
        include_str!("../../../../../sys/commands/review.md"),
    ),
    ("test", include_str!("../../../../../sys/commands/test.md")),
];

/// A prompt after expansion: the user message's text blocks, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Expansion {
    pub blocks: Vec<String>,
    /// What was expanded (`/test`, `/skill:pdf`), for the user's screen.
    pub used: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum SlashError {
    #[error("unknown command /{name}: the commands are {}", list(available))]
    UnknownCommand {
        name: String,
        available: Vec<String>,
    },
    #[error(
        "unknown skill \"{name}\": {}; skills live in .ah/skills/NAME/SKILL.md",
        if available.is_empty() { "there are no skills".to_string() } else { format!("the skills are {}", available.join(", ")) }
    )]
    UnknownSkill {
        name: String,
        available: Vec<String>,
    },
    #[error("cannot use {why}")]
    Read { why: String },
    #[error("{path} has a malformed header ({why}); fix the `---` block at its top")]
    Malformed { path: PathBuf, why: String },
}

fn list(names: &[String]) -> String {
    names
        .iter()
        .map(|name| format!("/{name}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether `name` can name a command or skill.
pub(super) fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !name.starts_with('.')
}

/// Expands `prompt`. `files` are the project's, `global` the user's config
/// folder (see [`super::global_dir`]).
pub fn expand(
    prompt: &str,
    files: &ProjectFiles,
    global: Option<&Path>,
    skills: &Skills,
) -> Result<Expansion, SlashError> {
    let plain = |text: &str| Expansion {
        blocks: vec![text.to_string()],
        used: None,
    };
    if let Some(literal) = prompt.strip_prefix("//") {
        return Ok(plain(&format!("/{literal}")));
    }
    let Some(rest) = prompt.strip_prefix('/') else {
        return Ok(plain(prompt));
    };
    let (word, args) = match rest.split_once(char::is_whitespace) {
        Some((word, args)) => (word, args.trim()),
        None => (rest, ""),
    };
    if let Some(name) = word.strip_prefix("skill:") {
        let mut blocks = vec![skills.load(name)?];
        if !args.is_empty() {
            blocks.push(args.to_string());
        }
        return Ok(Expansion {
            blocks,
            used: Some(format!("/skill:{name}")),
        });
    }
    // `/etc/hosts is wrong` is a prompt about a path, not a command.
    if !valid_name(word) {
        return Ok(plain(prompt));
    }
    let template = find(word, files, global)?;
    let body = frontmatter::parse(&template.text)
        .map_err(|why| SlashError::Malformed {
            path: template.path.clone(),
            why,
        })?
        .body
        .trim()
        .to_string();
    let text = if body.contains("$ARGUMENTS") {
        body.replace("$ARGUMENTS", args)
    } else if args.is_empty() {
        body
    } else {
        format!("{body}\n\n{args}")
    };
    Ok(Expansion {
        blocks: vec![text],
        used: Some(format!("/{word}")),
    })
}

struct Template {
    path: PathBuf,
    text: String,
}

fn find(name: &str, files: &ProjectFiles, global: Option<&Path>) -> Result<Template, SlashError> {
    let file = format!("{name}.md");
    for folder in Folder::both(files, global, "commands") {
        if let Some(text) = folder
            .read(&file, PROMPT_CAP)
            .map_err(|why| SlashError::Read { why })?
        {
            return Ok(Template {
                path: folder.shown(&file),
                text,
            });
        }
    }
    if let Some((_, text)) = BUILTIN.iter().find(|(builtin, _)| *builtin == name) {
        return Ok(Template {
            path: PathBuf::from(format!("sys/commands/{name}.md")),
            text: (*text).to_string(),
        });
    }
    Err(SlashError::UnknownCommand {
        name: name.to_string(),
        available: available(files, global),
    })
}

/// Every command name that can be used, sorted.
fn available(files: &ProjectFiles, global: Option<&Path>) -> Vec<String> {
    let mut names: Vec<String> = BUILTIN.iter().map(|(name, _)| name.to_string()).collect();
    for folder in Folder::both(files, global, "commands") {
        let entries = folder.entries().unwrap_or_default();
        names.extend(entries.into_iter().filter_map(|(file, _)| {
            let name = file.strip_suffix(".md")?.to_string();
            valid_name(&name).then_some(name)
        }));
    }
    names.sort();
    names.dedup();
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// A project folder (`.ah` inside it) and a global folder.
    struct Dirs {
        project: tempfile::TempDir,
        global: tempfile::TempDir,
    }

    impl Dirs {
        fn ah(&self) -> PathBuf {
            self.project.path().join(".ah")
        }
    }

    fn setup() -> Dirs {
        let dirs = Dirs {
            project: tempfile::tempdir().unwrap(),
            global: tempfile::tempdir().unwrap(),
        };
        fs::create_dir_all(dirs.ah().join("commands")).unwrap();
        fs::create_dir_all(dirs.global.path().join("commands")).unwrap();
        dirs
    }

    fn run(prompt: &str, dirs: &Dirs) -> Result<Expansion, SlashError> {
        let project = dirs.project.path().canonicalize().unwrap();
        let files = ProjectFiles::of_project(&project).unwrap();
        let global = dirs.global.path();
        expand(
            prompt,
            &files,
            Some(global),
            &Skills::discover(&files, Some(global)),
        )
    }

    #[test]
    fn project_then_global_then_builtin() {
        let dirs = setup();
        fs::write(
            dirs.ah().join("commands/fix.md"),
            "Project fix: $ARGUMENTS!",
        )
        .unwrap();
        fs::write(dirs.global.path().join("commands/fix.md"), "Global fix").unwrap();
        fs::write(
            dirs.global.path().join("commands/doc.md"),
            "---\ndescription: docs\n---\nWrite docs for",
        )
        .unwrap();
        let fix = run("/fix the parser  ", &dirs).unwrap();
        assert_eq!(fix.blocks, ["Project fix: the parser!"]);
        assert_eq!(fix.used.as_deref(), Some("/fix"));
        let doc = run("/doc src/lib.rs", &dirs).unwrap();
        assert_eq!(doc.blocks, ["Write docs for\n\nsrc/lib.rs"]);
        let test = run("/test", &dirs).unwrap();
        assert!(test.blocks[0].contains("test"), "{:?}", test.blocks);
    }

    #[test]
    fn unknown_commands_list_what_exists() {
        let dirs = setup();
        fs::write(dirs.ah().join("commands/fix.md"), "x").unwrap();
        let err = run("/nope x", &dirs).unwrap_err().to_string();
        assert_eq!(
            err,
            "unknown command /nope: the commands are /fix, /review, /test"
        );
    }

    #[test]
    fn paths_and_double_slashes_are_plain_prompts() {
        let dirs = setup();
        for prompt in ["/etc/hosts is wrong", "fix /tmp use", "plain"] {
            let out = run(prompt, &dirs).unwrap();
            assert_eq!(out.blocks, [prompt]);
            assert_eq!(out.used, None);
        }
        let literal = run("//test is a word", &dirs).unwrap();
        assert_eq!(literal.blocks, ["/test is a word"]);
    }

    #[test]
    fn skills_load_before_the_arguments() {
        let dirs = setup();
        fs::create_dir_all(dirs.ah().join("skills/s")).unwrap();
        fs::write(
            dirs.ah().join("skills/s/SKILL.md"),
            "---\nname: pdf\ndescription: PDFs\n---\nUse pdftotext.",
        )
        .unwrap();
        let out = run("/skill:pdf read a.pdf", &dirs).unwrap();
        assert_eq!(out.blocks.len(), 2);
        assert!(out.blocks[0].ends_with("Use pdftotext."));
        assert_eq!(out.blocks[1], "read a.pdf");
        let err = run("/skill:nope", &dirs).unwrap_err();
        assert!(err.to_string().contains("the skills are pdf"), "{err}");
    }

    #[test]
    fn a_malformed_command_header_names_the_file() {
        let dirs = setup();
        fs::write(dirs.ah().join("commands/bad.md"), "---\ndescription x\n").unwrap();
        let err = run("/bad", &dirs).unwrap_err().to_string();
        assert!(
            err.contains("commands/bad.md has a malformed header"),
            "{err}"
        );
    }
}
