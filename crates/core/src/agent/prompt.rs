//! The prompts: the system prompt (`sys/system.md` and `sys/claude.md`) and
//! the compaction prompt (`sys/compact.md`), built into the binary, each
//! replaceable by a project file of the same name in `.ah/sys/`; the words
//! that name the tools of one request in them (`name_tools`); and the
//! run's note on the files the read policy withheld from the work copy.

use std::path::Path;

use ah_llm::ToolDef;
use ah_llm::models::{ModelInfo, ToolProtocol};

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
            "Your commands run in the work directory (it is their current directory); \
             use relative paths in commands, since `/work` is only an alias that the \
             tools for files understand."
        }
    };
    Ok(format!(
        "{}\n\n{}",
        system.trim_end().replace("{{workspace}}", place),
        claude.trim_end()
    ))
}

/// `system` with its tool placeholders filled for a request that offers
/// `tools` to `model`: the one place that decides how the prompts name the
/// tools, so that they name those the model has, by its edit format and
/// tool protocol, in this phase or for this agent. `{{tools}}` lists them;
/// `{{editing}}` says which to change files with (nothing when none can);
/// `{{tool_use}}` holds the notes on using them. Under the text protocol
/// they are named by their blocks (`##file:`, `##run`, `##tool`).
pub(crate) fn name_tools(system: &str, tools: &[ToolDef], model: &ModelInfo) -> String {
    let own = ah_tools::specs(model.edit_format);
    // ah's own tool `name`, not a project's tool that took its name.
    let has = |name: &str| {
        tools
            .iter()
            .any(|tool| tool.name == name && own.contains(tool))
    };
    let others = || tools.iter().filter(|tool| !own.contains(tool));
    let text = model.tool_protocol == ToolProtocol::Text;
    let (list, editing, mut notes) = if text {
        let mut ways = Vec::new();
        if has("write") {
            ways.push("`##file:` blocks".to_string());
        }
        if has("bash") {
            ways.push("`##run` blocks".to_string());
        }
        let others: Vec<String> = others().map(|tool| format!("`{}`", tool.name)).collect();
        if !others.is_empty() {
            ways.push(format!("`##tool` blocks for {}", and_list(&others)));
        }
        let editing = match has("write") {
            true => "Write a file whole in a `##file:` block to create or change it. ",
            false => "",
        };
        let notes = vec![
            "- Write several blocks in one reply when they are independent; they run in order."
                .to_string(),
        ];
        (ways, editing.to_string(), notes)
    } else {
        let names: Vec<String> = tools
            .iter()
            .map(|tool| format!("`{}`", tool.name))
            .collect();
        let edit = ["edit", "apply_patch"].into_iter().find(|name| has(name));
        let editing = match (edit, has("write")) {
            (Some(edit), true) => {
                format!("Prefer `{edit}` for changes to existing files and `write` for new files. ")
            }
            (Some(edit), false) => format!("Use `{edit}` for changes to existing files. "),
            (None, true) => "Use `write` to create a file or replace its content. ".to_string(),
            (None, false) => String::new(),
        };
        let notes = vec![
            "- You can call several tools in one response when they are independent (for \
             example, reading several files); they run in order."
                .to_string(),
        ];
        (names, editing, notes)
    };
    let run = if text { "`##run`" } else { "`bash`" };
    if has("bash") {
        notes.push(format!(
            "- {run} output is truncated when long; narrow commands (`grep -n`, `head`, \
             `sed -n`) instead of printing whole files."
        ));
    }
    if !text && has("read") {
        notes.push("- Use `read` with `offset`/`limit` for large files.".to_string());
    }
    if !text && has("edit") {
        notes.push(
            "- `edit` needs `old_string` to match exactly once (include enough surrounding \
             lines), or set `replace_all`."
                .to_string(),
        );
    }
    if !text && has("apply_patch") {
        notes.push(
            "- `apply_patch` needs the context lines of each change to match the file \
             exactly (read them first); a patch applies whole or not at all."
                .to_string(),
        );
    }
    let list = match list.is_empty() {
        true => "no tools".to_string(),
        false => and_list(&list),
    };
    system
        .replace("{{tools}}", &list)
        .replace("{{editing}}", &editing)
        .replace("{{tool_use}}", &notes.join("\n"))
}

/// `a`, `a and b`, `a, b and c`.
fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [first @ .., last] => format!("{} and {last}", first.join(", ")),
    }
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
    use ah_llm::models::EditFormat;

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

    fn model(edit_format: EditFormat, tool_protocol: ToolProtocol) -> ModelInfo {
        ModelInfo {
            id: "m".to_string(),
            context_window: 100_000,
            max_output_tokens: 8_000,
            edit_format,
            tool_protocol,
            images: false,
        }
    }

    /// ah's own tools `names` as offered in `format`, then a project's
    /// tool `write` (which is not ah's) when `project_write`.
    fn offered(format: EditFormat, names: &[&str], project_write: bool) -> Vec<ToolDef> {
        let mut tools: Vec<ToolDef> = ah_tools::specs(format)
            .into_iter()
            .filter(|tool| names.contains(&tool.name.as_str()))
            .collect();
        if project_write {
            tools.push(ToolDef {
                name: "write".to_string(),
                description: "the project's own".to_string(),
                input_schema: serde_json::json!({"type": "object"}),
            });
        }
        tools
    }

    const PLACES: &str = "{{tools}}|{{editing}}|{{tool_use}}";

    #[test]
    fn tools_are_named_as_the_request_offers_them() {
        let native = model(EditFormat::Edit, ToolProtocol::Native);
        // Read-only: nothing to change files with is named.
        let tools = offered(EditFormat::Edit, &["read", "bash"], false);
        let text = name_tools(PLACES, &tools, &native);
        assert!(
            text.starts_with("`read` and `bash`||- You can call"),
            "{text}"
        );
        assert!(!text.contains("`edit`"), "{text}");
        // A project's `write` is not ah's: no advice to write new files with it.
        let tools = offered(EditFormat::ApplyPatch, &["apply_patch"], true);
        let patch = model(EditFormat::ApplyPatch, ToolProtocol::Native);
        let text = name_tools(PLACES, &tools, &patch);
        assert!(
            text.starts_with("`apply_patch` and `write`|Use `apply_patch` for changes"),
            "{text}"
        );
        // The text protocol names blocks, and `##tool` for the project's.
        let local = model(EditFormat::ApplyPatch, ToolProtocol::Text);
        let tools = offered(EditFormat::ApplyPatch, &["read", "bash"], true);
        let text = name_tools(PLACES, &tools, &local);
        assert!(
            text.starts_with("`##run` blocks and `##tool` blocks for `write`||- Write several"),
            "{text}"
        );
        assert!(!text.contains("`read`"), "{text}");
        assert_eq!(
            name_tools(PLACES, &[], &native).split('|').next(),
            Some("no tools")
        );
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
