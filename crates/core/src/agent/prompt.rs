//! The prompts: the system prompt (`sys/system.md` and `sys/claude.md`) and
//! the compaction prompt (`sys/compact.md`), built into the binary, each
//! replaceable by a project file of the same name in `.ah/sys/`; and the
//! run's note on the files the read policy withheld from the work copy.

use std::path::Path;

use crate::config::own_files::{PROMPT_CAP, ProjectFiles};

const SYSTEM: &str = include_str!("../../../../sys/system.md");
const CLAUDE: &str = include_str!("../../../../sys/claude.md");
const COMPACT: &str = include_str!("../../../../sys/compact.md");

/// Where the model's commands run, as the prompt tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workspace {
    /// A container: the copy at `/work`, nothing else of the host.
    Container,
    /// The host: commands run in the copy's directory, which is not `/work`.
    Host,
}

/// Builds the system prompt for a project. An override file that exists but
/// cannot be read is an error, not a silent fallback.
pub fn system_prompt(files: &ProjectFiles, workspace: Workspace) -> std::io::Result<String> {
    let system = part(files, "system.md", SYSTEM)?;
    let claude = part(files, "claude.md", CLAUDE)?;
    let place = match workspace {
        Workspace::Container => {
            "Your commands run in a sandbox container with no network. The work \
             directory is `/work`, a copy of the project; the original is not in the \
             container."
        }
        Workspace::Host => {
            "Your commands run in the work directory (the current directory of every \
             `bash` call); use relative paths in commands, since `/work` is only an \
             alias understood by the file tools."
        }
    };
    Ok(format!(
        "{}\n\n{}",
        system.trim_end().replace("{{workspace}}", place),
        claude.trim_end()
    ))
}

/// How many withheld files are named; the rest are counted.
pub const WITHHELD_NAMED: usize = 50;

/// The withheld files as a list for people and the model: `a, b, c`, at
/// most [`WITHHELD_NAMED`] names, then how many more.
pub fn withheld_list(withheld: &[String]) -> String {
    let mut list = withheld
        .iter()
        .take(WITHHELD_NAMED)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if withheld.len() > WITHHELD_NAMED {
        list.push_str(&format!(
            " and {} more (the run's manifest.json lists them all)",
            withheld.len() - WITHHELD_NAMED
        ));
    }
    list
}

/// `system` with a closing line telling the model which project files the
/// read policy kept out of its work copy, so that it knows they exist and
/// asks the user rather than hunting for them; `system` as it is when none
/// were.
pub fn with_withheld_note(system: &str, withheld: &[String]) -> String {
    if withheld.is_empty() {
        return system.to_string();
    }
    format!(
        "{system}\n\n[ah: these files were withheld from the work copy by the read policy: {} \
         (ask the user if you need them)]",
        withheld_list(withheld)
    )
}

/// The instructions for summarising a conversation when it is compacted.
pub fn compact_prompt(files: &ProjectFiles) -> std::io::Result<String> {
    Ok(part(files, "compact.md", COMPACT)?.trim_end().to_string())
}

/// The prompt `name` (a path under `sys/`, e.g. `work/plan.md`): the
/// project's `.ah/sys/<name>` when it exists, else `builtin`.
pub fn part(files: &ProjectFiles, name: &str, builtin: &str) -> std::io::Result<String> {
    let rel = Path::new(".ah/sys").join(name);
    match files.read(&rel, PROMPT_CAP) {
        Ok(Some(text)) => Ok(text),
        Ok(None) => Ok(builtin.to_string()),
        Err(why) => Err(std::io::Error::other(format!(
            "cannot use the prompt override {why}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A project whose `.ah` is `dir/.ah`, as ah reads it.
    fn files(dir: &Path) -> ProjectFiles {
        ProjectFiles::of_project(&dir.canonicalize().unwrap()).unwrap()
    }

    #[test]
    fn builtin_prompt_names_the_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let text = system_prompt(&files(dir.path()), Workspace::Container).unwrap();
        assert!(text.contains("directory is `/work`, a copy of the project"));
        assert!(text.contains("# Tool use"));
        assert!(!text.contains("{{workspace}}"));
    }

    #[test]
    fn project_override_replaces_one_part() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".ah/sys")).unwrap();
        std::fs::write(dir.path().join(".ah/sys/claude.md"), "CUSTOM TOOL RULES").unwrap();
        let text = system_prompt(&files(dir.path()), Workspace::Host).unwrap();
        assert!(text.contains("CUSTOM TOOL RULES"));
        assert!(!text.contains("# Tool use"));
        assert!(text.contains("You are ah"));
    }

    #[test]
    fn withheld_files_are_named_at_the_end_of_the_system_prompt() {
        assert_eq!(with_withheld_note("SYS", &[]), "SYS");
        let two = [".env".to_string(), "config/prod.pem".to_string()];
        assert_eq!(
            with_withheld_note("SYS", &two),
            "SYS\n\n[ah: these files were withheld from the work copy by the read policy: \
             .env, config/prod.pem (ask the user if you need them)]"
        );
        let many: Vec<String> = (0..WITHHELD_NAMED + 3)
            .map(|i| format!("k{i}.pem"))
            .collect();
        let list = withheld_list(&many);
        assert!(list.starts_with("k0.pem, k1.pem"), "{list}");
        assert!(list.contains("k49.pem and 3 more"), "{list}");
        assert!(!list.contains("k50.pem"), "{list}");
    }

    #[test]
    fn compact_prompt_is_built_in_unless_the_project_overrides_it() {
        let dir = tempfile::tempdir().unwrap();
        let builtin = compact_prompt(&files(dir.path())).unwrap();
        for section in ["## Goal", "## Constraints", "### Blocked", "## Next steps"] {
            assert!(builtin.contains(section), "{section}");
        }
        std::fs::create_dir_all(dir.path().join(".ah/sys")).unwrap();
        std::fs::write(dir.path().join(".ah/sys/compact.md"), "SHORT SUMMARY\n").unwrap();
        assert_eq!(compact_prompt(&files(dir.path())).unwrap(), "SHORT SUMMARY");
    }
}
