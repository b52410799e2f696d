//! Who is in an `ah org` run: `--agents "lead:opus,coder,tester:haiku"`
//! names agents (a `name:model` pair, or a defined agent's name), and
//! `.ah/agents/NAME.md` (the project's) or `<global>/agents/NAME.md` (the
//! user's, for every project) defines one: a `---` header with `model`,
//! `description`, `tools` (a comma-separated subset of the run's tools) and
//! `max_tools` (tool calls per turn), and the body, its role prompt.
//! Without `--agents`, every defined agent takes part, by name. Unknown,
//! duplicate or reserved names are the user's mistake, found before
//! anything starts.

use std::path::{Path, PathBuf};

use crate::agent::instructions::frontmatter;
use crate::config::own_files::{Folder, ProjectFiles, SMALL_CAP};

use super::route::is_name_char;

/// Names no agent may have: they are routing words or ah's own.
const RESERVED: &[&str] = &["user", "group", "ah", "all"];

/// The most agents in one run.
pub const MAX_AGENTS: usize = 16;

/// One agent of the run, as the user gave or defined it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentSpec {
    pub name: String,
    /// The model; `None` takes the run's (`-m`, the configuration).
    pub model: Option<String>,
    pub description: Option<String>,
    /// The tools it may use; `None`: all of the run's.
    pub tools: Option<Vec<String>>,
    /// Tool calls per turn.
    pub max_tools: Option<u32>,
    /// Its role prompt (the definition's body).
    pub role: String,
    /// The file that defined it.
    pub defined_in: Option<PathBuf>,
}

/// The run's agents: those `list` names (in its order), else every defined
/// one. Errors are the user's to fix, in words.
pub fn roster(
    list: Option<&str>,
    files: &ProjectFiles,
    global: Option<&Path>,
) -> Result<Vec<AgentSpec>, String> {
    // The project's files are read as hostile: a cloned repository's link
    // to a file of yours would send it to the model.
    let dirs = Folder::both(files, global, "agents");
    let agents = match list {
        Some(list) => list
            .split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
            .map(|item| named(item, &dirs))
            .collect::<Result<Vec<_>, _>>()?,
        None => defined(&dirs)?,
    };
    if agents.is_empty() {
        return Err(match list {
            Some(_) => "--agents names no agent: give e.g. --agents \"lead:opus,coder\"".into(),
            None => "no agents: give --agents \"lead:opus,coder:sonnet\", or define agents in \
                     .ah/agents/NAME.md"
                .into(),
        });
    }
    if agents.len() > MAX_AGENTS {
        return Err(format!(
            "{} agents is more than ah runs together ({MAX_AGENTS})",
            agents.len()
        ));
    }
    for (i, agent) in agents.iter().enumerate() {
        if agents[..i].iter().any(|a| a.name == agent.name) {
            return Err(format!("the agent {:?} is named twice", agent.name));
        }
    }
    Ok(agents)
}

/// The agents of a roster in `--agents`' form, as the session keeps it
/// (`lead:opus,coder:ollama:qwen2.5-coder:7b`): each name with its model,
/// if the item gives one.
pub fn listed(list: &str) -> Vec<(&str, Option<&str>)> {
    list.split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(|item| match item.split_once(':') {
            Some((name, model)) => (name.trim(), Some(model.trim())),
            None => (item, None),
        })
        .collect()
}

/// One `--agents` item: `name:model` (a defined agent's other settings
/// kept), or a defined agent's name.
fn named(item: &str, dirs: &[Folder]) -> Result<AgentSpec, String> {
    let (name, model) = match item.split_once(':') {
        Some((name, model)) => (name.trim(), Some(model.trim())),
        None => (item, None),
    };
    check_name(name)?;
    if model == Some("") {
        return Err(format!("--agents: {item:?} names no model after `:`"));
    }
    let file = format!("{name}.md");
    let mut definition = None;
    for folder in dirs {
        let bad = |why: String| format!("agent definition {why}");
        if let Some(text) = folder.read(&file, SMALL_CAP).map_err(bad)? {
            definition = Some((text, folder));
            break;
        }
    }
    let mut agent = match (definition, model) {
        (Some((text, folder)), _) => parse(name, &text, &folder.shown(&file))?,
        (None, Some(_)) => AgentSpec {
            name: name.to_string(),
            model: None,
            description: None,
            tools: None,
            max_tools: None,
            role: String::new(),
            defined_in: None,
        },
        (None, None) => {
            return Err(format!(
                "unknown agent {name:?}: define it in .ah/agents/{name}.md, or give its model \
                 as {name}:MODEL"
            ));
        }
    };
    if let Some(model) = model {
        agent.model = Some(model.to_string());
    }
    Ok(agent)
}

/// Every agent defined in `dirs` (the first directory's hide the later
/// ones' of the same name), by name.
fn defined(dirs: &[Folder]) -> Result<Vec<AgentSpec>, String> {
    let mut agents: Vec<AgentSpec> = Vec::new();
    for folder in dirs {
        for (file, _) in folder.entries()? {
            let Some(name) = file.strip_suffix(".md") else {
                continue;
            };
            if agents.iter().any(|a| a.name == name) {
                continue;
            }
            let shown = folder.shown(&file);
            check_name(name).map_err(|why| format!("{}: {why}", shown.display()))?;
            let bad = |why: String| format!("agent definition {why}");
            // Gone since it was listed: nothing to define.
            let Some(text) = folder.read(&file, SMALL_CAP).map_err(bad)? else {
                continue;
            };
            agents.push(parse(name, &text, &shown)?);
        }
    }
    agents.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(agents)
}

/// An agent definition, read from `file`.
fn parse(name: &str, text: &str, file: &Path) -> Result<AgentSpec, String> {
    let bad = |why: String| format!("agent definition {}: {why}", file.display());
    let doc = frontmatter::parse(text).map_err(bad)?;
    if let Some(key) = doc
        .fields
        .keys()
        .find(|key| !["model", "description", "tools", "max_tools", "name"].contains(&key.as_str()))
    {
        return Err(bad(format!(
            "unknown key {key:?} (known: model, description, tools, max_tools)"
        )));
    }
    if let Some(given) = doc.fields.get("name").filter(|given| *given != name) {
        return Err(bad(format!(
            "its header names it {given:?} but its file names it {name:?}"
        )));
    }
    let field = |key: &str| {
        doc.fields
            .get(key)
            .map(|value| value.trim().to_string())
            .filter(|value| !value.is_empty())
    };
    let max_tools = field("max_tools")
        .map(|value| {
            value.parse::<u32>().ok().filter(|n| *n > 0).ok_or_else(|| {
                bad(format!(
                    "max_tools {value:?} is not a positive whole number"
                ))
            })
        })
        .transpose()?;
    let tools = field("tools").map(|list| {
        list.split(',')
            .map(|tool| tool.trim().to_string())
            .filter(|tool| !tool.is_empty())
            .collect()
    });
    Ok(AgentSpec {
        name: name.to_string(),
        model: field("model"),
        description: field("description"),
        tools,
        max_tools,
        role: doc.body.trim().to_string(),
        defined_in: Some(file.to_path_buf()),
    })
}

fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty()
        || name.len() > 32
        || !name.chars().all(is_name_char)
        || name.ends_with(['-', '_'])
    {
        return Err(format!(
            "{name:?} is not an agent name: up to 32 letters, digits, `-` and `_`, \
             not ending in `-` or `_`"
        ));
    }
    if RESERVED.contains(&name.to_ascii_lowercase().as_str()) {
        return Err(format!(
            "{name:?} cannot name an agent: {} are routing words of ah",
            RESERVED.join(", ")
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// The project folder `project`, as ah reads it.
    fn files(project: &Path) -> ProjectFiles {
        ProjectFiles::of_project(&project.canonicalize().unwrap()).unwrap()
    }

    /// Defines an agent in the project `project`'s `.ah/agents`.
    fn define_in(project: &Path, name: &str, text: &str) {
        define(&project.join(".ah"), name, text);
    }

    fn define(dir: &Path, name: &str, text: &str) {
        fs::create_dir_all(dir.join("agents")).unwrap();
        fs::write(dir.join("agents").join(format!("{name}.md")), text).unwrap();
    }

    #[test]
    fn pairs_and_definitions_in_the_given_order() {
        let project = tempfile::tempdir().unwrap();
        define_in(
            project.path(),
            "tester",
            "---\nmodel: haiku\ndescription: runs tests\ntools: read, bash\nmax_tools: 5\n---\nYou test.\n",
        );
        let agents = roster(
            Some("lead:opus, tester,coder:sonnet"),
            &files(project.path()),
            None,
        )
        .unwrap();
        let names: Vec<&str> = agents.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["lead", "tester", "coder"]);
        let tester = &agents[1];
        assert_eq!(tester.model.as_deref(), Some("haiku"));
        assert_eq!(tester.tools, Some(vec!["read".into(), "bash".into()]));
        assert_eq!(tester.max_tools, Some(5));
        assert_eq!(tester.role, "You test.");
        // A pair overrides a definition's model only.
        let again = roster(Some("tester:opus"), &files(project.path()), None).unwrap();
        assert_eq!(again[0].model.as_deref(), Some("opus"));
        assert_eq!(again[0].max_tools, Some(5));
    }

    #[test]
    fn without_a_list_every_defined_agent_project_first() {
        let project = tempfile::tempdir().unwrap();
        let global = tempfile::tempdir().unwrap();
        define_in(project.path(), "b", "project b");
        define(global.path(), "b", "global b");
        define(global.path(), "a", "global a");
        let agents = roster(None, &files(project.path()), Some(global.path())).unwrap();
        let found: Vec<(&str, &str)> = agents
            .iter()
            .map(|a| (a.name.as_str(), a.role.as_str()))
            .collect();
        assert_eq!(found, [("a", "global a"), ("b", "project b")]);
    }

    #[test]
    fn mistakes_are_refused_in_words() {
        let project = tempfile::tempdir().unwrap();
        let err = |list: &str| roster(Some(list), &files(project.path()), None).unwrap_err();
        assert!(err("lead:opus,lead:haiku").contains("named twice"));
        assert!(err("ghost").contains("unknown agent \"ghost\""));
        assert!(err("user:opus").contains("routing words"));
        assert!(err("bad name:opus").contains("not an agent name"));
        assert!(err("lead:").contains("no model"));
        assert!(err(" , ").contains("names no agent"));
        assert!(
            roster(None, &files(project.path()), None)
                .unwrap_err()
                .contains("no agents")
        );
        define_in(project.path(), "x", "---\nmax_tools: -1\n---\n");
        assert!(err("x").contains("max_tools"));
        define_in(project.path(), "y", "---\ncolour: red\n---\n");
        assert!(err("y").contains("unknown key"));
        define_in(project.path(), "big", &"x".repeat(70 * 1024));
        assert!(err("big").contains("larger than 64 KiB"));
    }

    #[test]
    fn a_project_agent_file_linking_out_of_the_project_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let project = root.path().join("project");
        fs::create_dir_all(project.join(".ah/agents")).unwrap();
        fs::write(root.path().join("secret.txt"), "key=hunter2").unwrap();
        std::os::unix::fs::symlink(
            root.path().join("secret.txt"),
            project.join(".ah/agents/lead.md"),
        )
        .unwrap();
        let err = roster(Some("lead"), &files(&project), None).unwrap_err();
        assert!(err.contains("out of the project"), "{err}");
        let err = roster(None, &files(&project), None).unwrap_err();
        assert!(err.contains("out of the project"), "{err}");
        // A link within the project is read.
        fs::write(project.join("roles.md"), "You lead.").unwrap();
        fs::remove_file(project.join(".ah/agents/lead.md")).unwrap();
        std::os::unix::fs::symlink(project.join("roles.md"), project.join(".ah/agents/lead.md"))
            .unwrap();
        let agents = roster(Some("lead"), &files(&project), None).unwrap();
        assert_eq!(agents[0].role, "You lead.");
    }

    #[test]
    fn a_stored_roster_lists_each_agent_with_its_model() {
        assert_eq!(
            listed("lead:opus, coder:ollama:qwen2.5-coder:7b,tester,"),
            [
                ("lead", Some("opus")),
                ("coder", Some("ollama:qwen2.5-coder:7b")),
                ("tester", None)
            ]
        );
    }
}
