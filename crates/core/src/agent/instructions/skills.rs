//! Skills: `SKILL.md` files under `.ah/skills/<dir>/` (the project's) and
//! `<global>/skills/<dir>/` (the user's), each with a header naming it and
//! saying what it is for. The system prompt lists names and descriptions
//! only; the full text enters the conversation when the user loads a skill
//! (`/skill:name` or `--skill name`). A project skill hides a global one of
//! the same name. A malformed file is a warning, never a failed run.

use std::fs;
use std::path::{Path, PathBuf};

use super::frontmatter;
use super::slash::{SlashError, valid_name};

/// A skill that can be loaded.
#[derive(Debug, Clone, PartialEq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    pub path: PathBuf,
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
    pub fn discover(ah_dir: &Path, global: Option<&Path>) -> Skills {
        let mut skills = Skills::default();
        let dirs = [Some(ah_dir.to_path_buf()), global.map(Path::to_path_buf)];
        for base in dirs.into_iter().flatten() {
            skills.scan(&base.join("skills"));
        }
        skills.list.sort_by(|a, b| a.name.cmp(&b.name));
        skills
    }

    fn scan(&mut self, dir: &Path) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        let mut files: Vec<PathBuf> = entries
            .flatten()
            .map(|entry| entry.path().join("SKILL.md"))
            .filter(|file| file.is_file())
            .collect();
        files.sort();
        for file in files {
            match read_header(&file) {
                Ok(skill) if self.find(&skill.name).is_none() => self.list.push(skill),
                Ok(_) => {}
                Err(why) => self
                    .warnings
                    .push(format!("skill {} skipped: {why}", file.display())),
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
        let text = fs::read_to_string(&skill.path).map_err(|source| SlashError::Read {
            path: skill.path.clone(),
            source,
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

fn read_header(file: &Path) -> Result<Skill, String> {
    let text = fs::read_to_string(file).map_err(|err| format!("cannot read it: {err}"))?;
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
    Ok(Skill {
        name,
        description: field("description")?,
        path: file.to_path_buf(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skill(base: &Path, dir: &str, text: &str) {
        fs::create_dir_all(base.join("skills").join(dir)).unwrap();
        fs::write(base.join("skills").join(dir).join("SKILL.md"), text).unwrap();
    }

    #[test]
    fn project_skills_hide_global_ones_and_bad_files_are_warnings() {
        let project = tempfile::tempdir().unwrap();
        let global = tempfile::tempdir().unwrap();
        skill(
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
        skill(project.path(), "d", "---\nname: broken\n");
        skill(project.path(), "e", "no header at all\n");
        let skills = Skills::discover(project.path(), Some(global.path()));
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
        skill(
            project.path(),
            "x",
            "---\nname: x\ndescription: X things\n---\nStep 1\n",
        );
        let skills = Skills::discover(project.path(), None);
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
            Skills::discover(project.path(), None)
                .prompt_section()
                .is_none()
        );
    }
}
