//! The prompts: the system prompt (`sys/system.md` and `sys/claude.md`) and
//! the compaction prompt (`sys/compact.md`), built into the binary, each
//! replaceable by a project file of the same name in `.ah/sys/`.

use std::path::Path;

const SYSTEM: &str = include_str!("../../sys/system.md");
const CLAUDE: &str = include_str!("../../sys/claude.md");
const COMPACT: &str = include_str!("../../sys/compact.md");

/// Where the model's commands run, as the prompt tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workspace {
    /// A container: the copy at `/work`, the original read-only at `/project`.
    Container,
    /// The host: commands run in the copy's directory, which is not `/work`.
    Host,
}

/// Builds the system prompt for a project. An override file that exists but
/// cannot be read is an error, not a silent fallback.
pub fn system_prompt(ah_dir: &Path, workspace: Workspace) -> std::io::Result<String> {
    let system = part(ah_dir, "system.md", SYSTEM)?;
    let claude = part(ah_dir, "claude.md", CLAUDE)?;
    let place = match workspace {
        Workspace::Container => {
            "Your commands run in a sandbox container with no network. The work \
             directory is `/work`; the original project is at `/project`, read-only."
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

/// The instructions for summarising a conversation when it is compacted.
pub fn compact_prompt(ah_dir: &Path) -> std::io::Result<String> {
    Ok(part(ah_dir, "compact.md", COMPACT)?.trim_end().to_string())
}

/// The prompt `name` (a path under `sys/`, e.g. `work/plan.md`): the
/// project's `.ah/sys/<name>` when it exists, else `builtin`.
pub fn part(ah_dir: &Path, name: &str, builtin: &str) -> std::io::Result<String> {
    let path = ah_dir.join("sys").join(name);
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(text),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(builtin.to_string()),
        Err(err) => Err(std::io::Error::new(
            err.kind(),
            format!("cannot read the prompt override {}: {err}", path.display()),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_prompt_names_the_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let text = system_prompt(dir.path(), Workspace::Container).unwrap();
        assert!(text.contains("`/project`, read-only"));
        assert!(text.contains("# Tool use"));
        assert!(!text.contains("{{workspace}}"));
    }

    #[test]
    fn project_override_replaces_one_part() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sys")).unwrap();
        std::fs::write(dir.path().join("sys/claude.md"), "CUSTOM TOOL RULES").unwrap();
        let text = system_prompt(dir.path(), Workspace::Host).unwrap();
        assert!(text.contains("CUSTOM TOOL RULES"));
        assert!(!text.contains("# Tool use"));
        assert!(text.contains("You are ah"));
    }

    #[test]
    fn compact_prompt_is_built_in_unless_the_project_overrides_it() {
        let dir = tempfile::tempdir().unwrap();
        let builtin = compact_prompt(dir.path()).unwrap();
        for section in ["## Goal", "## Constraints", "### Blocked", "## Next steps"] {
            assert!(builtin.contains(section), "{section}");
        }
        std::fs::create_dir_all(dir.path().join("sys")).unwrap();
        std::fs::write(dir.path().join("sys/compact.md"), "SHORT SUMMARY\n").unwrap();
        assert_eq!(compact_prompt(dir.path()).unwrap(), "SHORT SUMMARY");
    }
}
