//! Skills: `SKILL.md` files under `.ah/skills/<dir>/` (the project's) and
//! `<global>/skills/<dir>/` (the user's), each with a header naming it and
//! saying what it is for. The system prompt lists names and descriptions
//! only; the full text enters the conversation when the user loads a skill
//! (`/skill:name` or `--skill name`). A project skill hides a global one of
//! the same name. A malformed file is a warning, never a failed run.

use std::path::{Path, PathBuf};

use super::frontmatter;
use super::slash::{SlashError, valid_name};
use crate::config::own_files::{Folder, PROMPT_CAP, ProjectFiles};
use ah_tools::fs_beneath::dir::Kind;

/// A skill that can be loaded.
#[derive(Debug, Clone)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// Its file, for people.
    pub path: PathBuf,
    /// The folder it was found in and its path there (`DIR/SKILL.md`).
    folder: Folder,
    rel: String,
}

/// The skills found for a project, by name.
#[derive(Debug, Default)]
pub struct Skills {
    pub list: Vec<Skill>,
    /// Files that could not be used, each with why.
    pub warnings: Vec<String>,
}

impl Skills {
    /// Looks for skills in the project's `.ah/skills` and in the global
    /// `skills` folder.
    pub fn discover(files: &ProjectFiles, global: Option<&Path>) -> Skills {
        let mut skills = Skills::default();
        for folder in Folder::both(files, global, "skills") {
            skills.scan(&folder);
        }
        skills.list.sort_by(|a, b| a.name.cmp(&b.name));
        skills
    }

    fn scan(&mut self, folder: &Folder) {
        let entries = match folder.entries() {
            Ok(entries) => entries,
            Err(why) => {
                self.warnings.push(format!("skills skipped: {why}"));
                return;
            }
        };
        for (dir, kind) in entries {
            if !matches!(kind, Kind::Dir | Kind::Link) {
                continue;
            }
            let rel = format!("{dir}/SKILL.md");
            match read_header(folder, &rel) {
                Ok(Some(skill)) if self.find(&skill.name).is_none() => self.list.push(skill),
                Ok(_) => {}
                Err(why) => self.warnings.push(format!(
                    "skill {} skipped: {why}",
                    folder.shown(&rel).display()
                )),
            }
        }
    }

    pub fn find(&self, name: &str) -> Option<&Skill> {
        self.list.iter().find(|skill| skill.name == name)
    }

    /// The skill's full text as a conversation block, read now.
    pub fn load(&self, name: &str) -> Result<String, SlashError> {
        let skill = self.find(name).ok_or_else(|| SlashError::UnknownSkill {
            name: name.to_string(),
            available: self.names(),
        })?;
        let text = skill
            .folder
            .read(&skill.rel, PROMPT_CAP)
            .map_err(|why| SlashError::Read { why })?
            .ok_or_else(|| SlashError::Read {
                why: format!("{}: it is gone", skill.path.display()),
            })?;
        let body = frontmatter::parse(&text)
            .map_err(|why| SlashError::Malformed {
                path: skill.path.clone(),
                why,
            })?
            .body;
        Ok(format!(
            "[ah: the user loaded the skill \"{}\": {}]\n\n{}",
            skill.name,
            skill.description,
            body.trim()
        ))
    }

    /// The system prompt's list of skills; `None` when there are none.
    pub fn prompt_section(&self) -> Option<String> {
        if self.list.is_empty() {
            return None;
        }
        let lines: Vec<String> = self
            .list
            .iter()
            .map(|skill| format!("- {}: {}", skill.name, skill.description))
            .collect();
        Some(format!(
            "# Skills\nThe user has these skills (instructions for particular kinds of work). \
             A skill's full text appears in the conversation when the user loads it with \
             `/skill:NAME`; when one would help and is not loaded, say so.\n{}",
            lines.join("\n")
        ))
    }

    fn names(&self) -> Vec<String> {
        self.list.iter().map(|skill| skill.name.clone()).collect()
    }
}

/// The skill in `rel` of `folder`; `None` when there is no such file.
fn read_header(folder: &Folder, rel: &str) -> Result<Option<Skill>, String> {
    let Some(text) = folder.read(rel, PROMPT_CAP)? else {
        return Ok(None);
    };
    let doc = frontmatter::parse(&text)?;
    let field = |key: &str| {
        doc.fields
            .get(key)
            .map(|value| value.trim().to_string())
            .filter(|value| !value.is_empty())
            .ok_or_else(|| format!("its header has no `{key}:` line"))
    };
    let name = field("name")?;
    if !valid_name(&name) {
        return Err(format!(
            "the name {name:?} may only use letters, digits, `-`, `_` and `.`"
        ));
    }
    Ok(Some(Skill {
        name,
        description: field("description")?,
        path: folder.shown(rel),
        folder: folder.clone(),
        rel: rel.to_string(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// The project `dir` (its skills in `dir/.ah/skills`), as ah reads it.
    fn files(dir: &Path) -> ProjectFiles {
        ProjectFiles::of_project(&dir.canonicalize().unwrap()).unwrap()
    }

    fn project_skill(project: &Path, dir: &str, text: &str) {
        skill(&project.join(".ah"), dir, text);
    }

    fn skill(base: &Path, dir: &str, text: &str) {
        fs::create_dir_all(base.join("skills").join(dir)).unwrap();
        fs::write(base.join("skills").join(dir).join("SKILL.md"), text).unwrap();
    }

    #[test]
    fn project_skills_hide_global_ones_and_bad_files_are_warnings() {
        let project = tempfile::tempdir().unwrap();
        let global = tempfile::tempdir().unwrap();
        project_skill(
            project.path(),
            "a",
            "---\nname: pdf\ndescription: Project PDF\n---\nBODY-P\n",
        );
        skill(
            global.path(),
            "b",
            "---\nname: pdf\ndescription: Global PDF\n---\nBODY-G\n",
        );
        skill(
            global.path(),
            "c",
            "---\nname: sql\ndescription: Queries\n---\nBODY-S\n",
        );
        project_skill(project.path(), "d", "---\nname: broken\n");
        project_skill(project.path(), "e", "no header at all\n");
        let skills = Skills::discover(&files(project.path()), Some(global.path()));
        let names: Vec<_> = skills.list.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["pdf", "sql"]);
        assert_eq!(skills.find("pdf").unwrap().description, "Project PDF");
        assert_eq!(skills.warnings.len(), 2, "{:?}", skills.warnings);
        assert!(
            skills
                .warnings
                .iter()
                .all(|w| w.contains("SKILL.md skipped"))
        );
        let section = skills.prompt_section().unwrap();
        assert!(section.contains("- pdf: Project PDF\n- sql: Queries"));
        assert!(
            !section.contains("BODY"),
            "only names and descriptions: {section}"
        );
    }

    #[test]
    fn loading_reads_the_body_without_its_header() {
        let project = tempfile::tempdir().unwrap();
        project_skill(
            project.path(),
            "x",
            "---\nname: x\ndescription: X things\n---\nStep 1\n",
        );
        let skills = Skills::discover(&files(project.path()), None);
        assert_eq!(
            skills.load("x").unwrap(),
            "[ah: the user loaded the skill \"x\": X things]\n\nStep 1"
        );
        let unknown = skills.load("y").unwrap_err().to_string();
        assert!(
            unknown.contains("\"y\"") && unknown.contains("x"),
            "{unknown}"
        );
    }

    #[test]
    fn no_skills_no_section() {
        let project = tempfile::tempdir().unwrap();
        assert!(
            Skills::discover(&files(project.path()), None)
                .prompt_section()
                .is_none()
        );
    }
}
