//! The project's and the user's own tools: `.ah/tools/NAME.toml` (and
//! `<global>/tools/NAME.toml` for every project; the project's hide the
//! user's of the same name):
//!
//! ```toml
//! description = "Runs the linter on the given files"
//! command = "scripts/lint --json"     # run in the sandbox, in /work, input on stdin
//! timeout = 60                        # seconds (bash's default when unset)
//! [input_schema]                      # JSON Schema of an object
//! type = "object"
//! properties = { files = { type = "array", items = { type = "string" } } }
//! required = ["files"]
//! ```
//!
//! Read before anything starts: a bad file is the user's mistake, in words.
//! A cloned repository ships these files: each is read as
//! [`super::own_files`] reads the project's files, up to 64 KiB.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use super::own_files::{Folder, ProjectFiles, SMALL_CAP};
use ah_tools::bash::MAX_TIMEOUT;
use ah_tools::project::ProjectTool;
use ah_tools::schema;

/// Names ah's own engines give their host tools (`ah work`'s phases).
const RESERVED: [&str; 2] = ["report", "verdict"];

/// The keys a tool file may have.
const KEYS: [&str; 4] = ["description", "command", "timeout", "input_schema"];

/// The tools declared for the project (`files`) and by the user
/// (`global`), by name.
pub fn load(files: &ProjectFiles, global: Option<&Path>) -> Result<Vec<Arc<ProjectTool>>, String> {
    let mut tools: Vec<Arc<ProjectTool>> = Vec::new();
    for folder in Folder::both(files, global, "tools") {
        for (file, _) in folder.entries()? {
            if !file.ends_with(".toml") {
                continue;
            }
            let tool = read(&folder, &file)?;
            if !tools.iter().any(|known| known.name == tool.name) {
                tools.push(Arc::new(tool));
            }
        }
    }
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(tools)
}

/// One tool file.
fn read(folder: &Folder, file: &str) -> Result<ProjectTool, String> {
    let source = folder.shown(file);
    let bad = |why: String| format!("tool file {}: {why}", source.display());
    let name = file.strip_suffix(".toml").unwrap_or(file).to_string();
    if !ah_tools::valid_tool_name(&name) {
        return Err(bad(
            "its name (the file's, without .toml) must be 1 to 64 letters, digits, `-` or `_`"
                .into(),
        ));
    }
    if name.contains(ah_tools::mcp::SEPARATOR) {
        return Err(bad(format!(
            "its name holds {:?}, which marks the tools of MCP servers; choose another",
            ah_tools::mcp::SEPARATOR
        )));
    }
    if RESERVED.contains(&name.as_str()) {
        return Err(bad(format!(
            "{name} is the name of a tool of ah work's phases; choose another"
        )));
    }
    let text = folder
        .read(file, SMALL_CAP)
        .map_err(|why| format!("tool file {why}"))?
        .ok_or_else(|| bad("it is gone".into()))?;
    let table: toml::Table = toml::from_str(&text).map_err(|err| bad(err.to_string()))?;
    if let Some(key) = table.keys().find(|key| !KEYS.contains(&key.as_str())) {
        return Err(bad(format!(
            "unknown key {key:?} (the keys are {})",
            KEYS.join(", ")
        )));
    }
    let text_of = |key: &str| -> Result<String, String> {
        match table.get(key) {
            Some(toml::Value::String(text)) if !text.trim().is_empty() => Ok(text.clone()),
            _ => Err(bad(format!("`{key}` must be a non-empty string"))),
        }
    };
    let timeout = match table.get("timeout") {
        None => None,
        Some(toml::Value::Integer(n)) if (1..=MAX_TIMEOUT as i64).contains(n) => Some(*n as u64),
        Some(_) => {
            return Err(bad(format!(
                "`timeout` must be whole seconds from 1 to {MAX_TIMEOUT}"
            )));
        }
    };
    let input_schema = match table.get("input_schema") {
        None => {
            serde_json::json!({"type": "object", "properties": {}, "additionalProperties": false})
        }
        Some(value) => serde_json::to_value(value).map_err(|err| bad(err.to_string()))?,
    };
    if input_schema.get("type") != Some(&Value::String("object".into())) {
        return Err(bad(
            "`input_schema` must describe an object (type = \"object\")".into(),
        ));
    }
    schema::compile(&input_schema).map_err(bad)?;
    Ok(ProjectTool {
        name,
        description: text_of("description")?,
        input_schema,
        command: text_of("command")?,
        timeout,
        source,
        declared: folder.for_model("tools", file),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// The project folder `project` (made), as ah reads it.
    fn files(project: &Path) -> ProjectFiles {
        fs::create_dir_all(project).unwrap();
        ProjectFiles::of_project(&project.canonicalize().unwrap()).unwrap()
    }

    fn declare(dir: &Path, name: &str, text: &str) {
        fs::create_dir_all(dir.join("tools")).unwrap();
        fs::write(dir.join("tools").join(format!("{name}.toml")), text).unwrap();
    }

    #[test]
    fn project_tools_hide_the_users_and_come_by_name() {
        let root = tempfile::tempdir().unwrap();
        let ah_dir = root.path().join("project/.ah");
        let global = root.path().join("global");
        declare(
            &ah_dir,
            "lint",
            "description = \"Lints\"\ncommand = \"scripts/lint\"\ntimeout = 30\n\
             [input_schema]\ntype = \"object\"\nrequired = [\"files\"]\n\
             properties = { files = { type = \"array\", items = { type = \"string\" } } }\n",
        );
        declare(
            &global,
            "lint",
            "description = \"theirs\"\ncommand = \"x\"\n",
        );
        declare(
            &global,
            "fmt",
            "description = \"Formats\"\ncommand = \"cargo fmt\"\n",
        );
        let tools = load(&files(&root.path().join("project")), Some(&global)).unwrap();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["fmt", "lint"]);
        let lint = &tools[1];
        assert_eq!(lint.description, "Lints");
        assert_eq!(lint.timeout, Some(30));
        assert_eq!(
            lint.input_schema["properties"]["files"]["items"]["type"],
            "string"
        );
        assert_eq!(tools[0].input_schema["additionalProperties"], false);
    }

    #[test]
    fn mistakes_are_refused_in_words() {
        let root = tempfile::tempdir().unwrap();
        let ah_dir = root.path().join("p/.ah");
        let err = |name: &str, text: &str| {
            let _ = fs::remove_dir_all(ah_dir.join("tools"));
            declare(&ah_dir, name, text);
            load(&files(&root.path().join("p")), None).unwrap_err()
        };
        assert!(err("a", "command = \"x\"\n").contains("`description` must be"));
        assert!(err("a", "description = \"d\"\n").contains("`command` must be"));
        assert!(
            err("a", "description = \"d\"\ncommand = \"x\"\ncolour = 1\n").contains("unknown key")
        );
        assert!(
            err("a", "description = \"d\"\ncommand = \"x\"\ntimeout = 0\n").contains("timeout")
        );
        assert!(err("bad name", "description = \"d\"\ncommand = \"x\"\n").contains("its name"));
        assert!(err("report", "description = \"d\"\ncommand = \"x\"\n").contains("ah work"));
        assert!(
            err(
                "a",
                "description = \"d\"\ncommand = \"x\"\n[input_schema]\ntype = \"string\"\n"
            )
            .contains("must describe an object")
        );
        let reaching = "description = \"d\"\ncommand = \"x\"\n[input_schema]\ntype = \"object\"\n\
                        properties = { a = { \"$ref\" = \"http://127.0.0.1:9/s.json\" } }\n";
        assert!(err("a", reaching).contains("not valid JSON Schema"));
        assert!(err("a", "not toml at all [").contains("tool file"));
    }

    #[test]
    fn a_fifo_is_refused_without_being_read() {
        let root = tempfile::tempdir().unwrap();
        let global = root.path().join("global");
        fs::create_dir_all(global.join("tools")).unwrap();
        let fifo = global.join("tools/wait.toml");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let err = load(&files(&root.path().join("p")), Some(&global)).unwrap_err();
        assert!(err.contains("not a regular file"), "{err}");
    }

    #[test]
    fn a_project_tool_file_linking_out_of_the_project_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let ah_dir = root.path().join("p/.ah");
        fs::create_dir_all(ah_dir.join("tools")).unwrap();
        fs::write(
            root.path().join("outside.toml"),
            "description = \"d\"\ncommand = \"x\"\n",
        )
        .unwrap();
        std::os::unix::fs::symlink(
            root.path().join("outside.toml"),
            ah_dir.join("tools/x.toml"),
        )
        .unwrap();
        let err = load(&files(&root.path().join("p")), None).unwrap_err();
        assert!(err.contains("out of the project"), "{err}");
    }
}
