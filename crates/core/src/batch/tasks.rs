//! The tasks file of `ah batch`: one JSON object a line, read whole and
//! checked before anything starts — every bad line is reported with its
//! number, and none runs while one is bad.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use serde::Deserialize;

/// The most tasks one file may hold.
const MAX_TASKS: usize = 10_000;
/// The most bytes of a tasks file.
const MAX_BYTES: u64 = 16 * 1024 * 1024;
/// The most attempts of one task.
const MAX_ATTEMPTS: u32 = 16;

/// One task of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Task {
    pub id: String,
    /// The project's folder (a relative path is the tasks file's folder's).
    pub project: PathBuf,
    pub work: Work,
    pub model: Option<String>,
    pub check: Option<String>,
    pub attempts: u32,
    /// Apply the patch when the auto-review rules allow (`auto`), or only
    /// save it (`never`).
    pub auto: bool,
}

/// What a task asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Work {
    /// A task for the agent.
    Prompt(String),
    /// An issue for `ah work`'s phases.
    Issue(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    id: String,
    project: PathBuf,
    prompt: Option<String>,
    issue: Option<String>,
    model: Option<String>,
    check: Option<String>,
    attempts: Option<u32>,
    review: Option<String>,
}

/// Reads the tasks at `path`; every bad line is in the error, with its
/// number.
pub(super) fn read(path: &Path) -> Result<Vec<Task>> {
    let size = std::fs::metadata(path)
        .map_err(|err| anyhow::anyhow!("cannot read {}: {err}", path.display()))?
        .len();
    if size > MAX_BYTES {
        bail!(
            "{} is {size} bytes; a tasks file holds at most {MAX_BYTES}: split it",
            path.display()
        );
    }
    let text = std::fs::read_to_string(path)
        .map_err(|err| anyhow::anyhow!("cannot read {}: {err}", path.display()))?;
    let base = path.parent().unwrap_or(Path::new("."));
    parse(&text, base).map_err(|errors| {
        anyhow::anyhow!(
            "{} has {} bad line(s); nothing was started:\n{}",
            path.display(),
            errors.len(),
            errors.join("\n")
        )
    })
}

/// The tasks of `text`, projects relative to `base`; or every line's
/// error, numbered from 1.
fn parse(text: &str, base: &Path) -> Result<Vec<Task>, Vec<String>> {
    let mut tasks = Vec::new();
    let mut errors = Vec::new();
    let mut ids = HashSet::new();
    for (index, raw) in text.lines().enumerate() {
        let number = index + 1;
        if raw.trim().is_empty() {
            continue;
        }
        match task(raw, base) {
            Ok(task) if !ids.insert(task.id.clone()) => {
                errors.push(format!("line {number}: the id {:?} is used twice", task.id));
            }
            Ok(task) => tasks.push(task),
            Err(why) => errors.push(format!("line {number}: {why}")),
        }
    }
    if tasks.len() > MAX_TASKS {
        errors.push(format!(
            "{} tasks; a batch holds at most {MAX_TASKS}",
            tasks.len()
        ));
    }
    match errors.is_empty() {
        true => Ok(tasks),
        false => Err(errors),
    }
}

fn task(raw: &str, base: &Path) -> Result<Task, String> {
    let line: Line = serde_json::from_str(raw).map_err(|err| err.to_string())?;
    let id = line.id.trim().to_string();
    if id.is_empty() || id.len() > 200 || id.chars().any(char::is_control) {
        return Err("the id must be 1 to 200 characters, none of them control characters".into());
    }
    let work = match (line.prompt, line.issue) {
        (Some(prompt), None) if !prompt.trim().is_empty() => Work::Prompt(prompt),
        (None, Some(issue)) if !issue.trim().is_empty() => Work::Issue(issue),
        (Some(_), Some(_)) => return Err("give a prompt or an issue, not both".into()),
        _ => return Err("a task needs a non-empty prompt or issue".into()),
    };
    let project = base.join(&line.project);
    if !project.is_dir() {
        return Err(format!("project {} is not a folder", project.display()));
    }
    let auto = match line.review.as_deref() {
        None | Some("never") => false,
        Some("auto") => true,
        Some(other) => return Err(format!("review {other:?}: say \"never\" or \"auto\"")),
    };
    let attempts = line.attempts.unwrap_or(1);
    if !(1..=MAX_ATTEMPTS).contains(&attempts) {
        return Err(format!("attempts must be 1 to {MAX_ATTEMPTS}"));
    }
    Ok(Task {
        id,
        project,
        work,
        model: line.model,
        check: line.check,
        attempts,
        auto,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bad_line_is_named_and_good_ones_are_read() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("p")).unwrap();
        let text = [
            r#"{"id": "a", "project": "p", "prompt": "fix it", "review": "auto"}"#,
            "",
            r#"{"id": "b", "project": "p", "prompt": "x", "colour": "red"}"#,
            r#"{"id": "a", "project": "p", "prompt": "again"}"#,
            r#"{"id": "c", "project": "nowhere", "prompt": "x"}"#,
            r#"{"id": "d", "project": "p"}"#,
            "not json",
            r#"{"id": "e", "project": "p", "issue": "the bug", "attempts": 99}"#,
        ]
        .join("\n");
        let errors = parse(&text, dir.path()).unwrap_err();
        let lines: Vec<&str> = errors
            .iter()
            .map(|e| e.split(':').next().unwrap())
            .collect();
        assert_eq!(
            lines,
            ["line 3", "line 4", "line 5", "line 6", "line 7", "line 8"],
            "{errors:#?}"
        );
        assert!(
            errors[0].contains("unknown field `colour`"),
            "{}",
            errors[0]
        );
        let good = parse(text.lines().next().unwrap(), dir.path()).unwrap();
        assert_eq!(good.len(), 1);
        assert!(good[0].auto);
        assert_eq!(good[0].work, Work::Prompt("fix it".into()));
    }
}
