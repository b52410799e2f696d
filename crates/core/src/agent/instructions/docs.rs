//! Project instruction files: `AGENTS.md` (else `CLAUDE.md`) in the project
//! folder and in each parent folder up to the repository root, joined
//! outermost first (general before specific) for the system prompt.
//!
//! The files are read on the host and sent to the model, so they are read
//! as every project file ah reads for itself ([`ProjectFiles`]): a link out
//! of the repository, to a file the read policy withholds or into a `.git`
//! folder, a special file or one over [`FILE_CAP`] is skipped with a
//! warning: a hostile checkout must not be able to mail `~/.ssh/id_rsa`, its
//! `.env` or its clone token to the model provider.

use std::path::{Path, PathBuf};

use crate::config::ProjectFiles;

/// At most this many bytes of instructions go into the system prompt.
pub const DOCS_CAP: usize = 32 * 1024;

/// The largest instruction file read (its text is then cut to [`DOCS_CAP`]).
const FILE_CAP: u64 = 1024 * 1024;

/// The file names looked for in each folder, first found wins.
const NAMES: [&str; 2] = ["AGENTS.md", "CLAUDE.md"];

/// The instructions found for a project.
#[derive(Debug, Default, PartialEq)]
pub struct ProjectDocs {
    /// The text for the system prompt (empty when there are no files).
    pub text: String,
    /// The files used, outermost first.
    pub files: Vec<PathBuf>,
    /// Files skipped or cut, each with why (for the user, not the model).
    pub warnings: Vec<String>,
}

/// Reads the instruction files for the project of `files`.
pub fn load_project_docs(files: &ProjectFiles) -> ProjectDocs {
    let project = files.project();
    let root = repository_root(project);
    let mut docs = ProjectDocs::default();
    let mut found = Vec::new();
    for dir in project.ancestors() {
        let folder = dir.strip_prefix(root).unwrap_or(Path::new(""));
        for name in NAMES {
            match files.read_bytes_in(root, &folder.join(name), FILE_CAP) {
                Ok(None) => continue,
                Ok(Some(bytes)) => found.push((dir.join(name), bytes)),
                Err(why) => docs.warnings.push(format!("{why}; not sent to the model")),
            }
            break;
        }
        if dir == root {
            break;
        }
    }
    // Innermost first: the project's own file is the last to be cut.
    let mut parts = Vec::new();
    let mut budget = DOCS_CAP;
    for (file, bytes) in &found {
        let text = String::from_utf8_lossy(bytes);
        let label = file
            .strip_prefix(root)
            .unwrap_or(file)
            .display()
            .to_string();
        let header = format!("## {label}\n\n");
        let body = text.trim();
        if budget <= header.len() {
            docs.warnings.push(format!(
                "{} left out: project instructions are capped at {} KB",
                file.display(),
                DOCS_CAP / 1024
            ));
            continue;
        }
        let room = budget - header.len();
        let kept = if body.len() > room {
            let note = format!(
                "\n\n[ah: the rest of {label} was cut: project instructions are capped at {} KB]",
                DOCS_CAP / 1024
            );
            let cut = floor_char_boundary(body, room.saturating_sub(note.len()));
            docs.warnings.push(format!(
                "{} cut after {cut} of {} bytes: project instructions are capped at {} KB",
                file.display(),
                body.len(),
                DOCS_CAP / 1024
            ));
            format!("{}{note}", &body[..cut])
        } else {
            body.to_string()
        };
        // Each part after the first is joined with a blank line.
        budget = budget.saturating_sub(header.len() + kept.len() + 2);
        parts.push((file.clone(), format!("{header}{kept}")));
    }
    parts.reverse();
    docs.text = parts
        .iter()
        .map(|(_, part)| part.as_str())
        .collect::<Vec<_>>()
        .join("\n\n");
    docs.files = parts.into_iter().map(|(file, _)| file).collect();
    docs
}

/// The nearest folder at or above `project` that holds `.git`; the project
/// itself when it is in no repository.
fn repository_root(project: &Path) -> &Path {
    project
        .ancestors()
        .find(|dir| dir.join(".git").exists())
        .unwrap_or(project)
}

fn floor_char_boundary(text: &str, index: usize) -> usize {
    (0..=index.min(text.len()))
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// The instructions for the project `dir`, read as a run reads them.
    fn load(dir: &Path) -> ProjectDocs {
        load_project_docs(&ProjectFiles::of_project(dir).unwrap())
    }

    fn tree() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        fs::create_dir_all(root.join("repo/.git")).unwrap();
        fs::create_dir_all(root.join("repo/sub/pkg")).unwrap();
        (dir, root)
    }

    #[test]
    fn files_from_the_repository_root_down_outermost_first() {
        let (_dir, root) = tree();
        fs::write(root.join("AGENTS.md"), "outside the repo").unwrap();
        fs::write(root.join("repo/CLAUDE.md"), "root rules").unwrap();
        fs::write(root.join("repo/sub/pkg/AGENTS.md"), "pkg rules").unwrap();
        fs::write(root.join("repo/sub/pkg/CLAUDE.md"), "not read").unwrap();
        let docs = load(&root.join("repo/sub/pkg"));
        assert_eq!(
            docs.text,
            "## CLAUDE.md\n\nroot rules\n\n## sub/pkg/AGENTS.md\n\npkg rules"
        );
        assert_eq!(docs.files.len(), 2);
        assert!(docs.warnings.is_empty());
    }

    #[test]
    fn a_project_outside_any_repository_reads_only_its_own_file() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        fs::create_dir(root.join("p")).unwrap();
        fs::write(root.join("AGENTS.md"), "parent").unwrap();
        fs::write(root.join("p/AGENTS.md"), "own").unwrap();
        let docs = load(&root.join("p"));
        assert_eq!(docs.text, "## AGENTS.md\n\nown");
    }

    #[test]
    fn the_cap_cuts_outer_files_first_and_says_so() {
        let (_dir, root) = tree();
        fs::write(root.join("repo/AGENTS.md"), "o".repeat(DOCS_CAP)).unwrap();
        fs::write(root.join("repo/sub/AGENTS.md"), "s".repeat(100)).unwrap();
        let docs = load(&root.join("repo/sub"));
        assert!(docs.text.len() <= DOCS_CAP, "{}", docs.text.len());
        assert!(docs.text.ends_with(&"s".repeat(100)));
        assert!(docs.text.contains("[ah: the rest of AGENTS.md was cut"));
        assert_eq!(docs.warnings.len(), 1, "{:?}", docs.warnings);
        assert!(docs.warnings[0].contains("cut after"));
    }

    #[test]
    fn a_link_out_of_the_repository_is_not_read() {
        let (_dir, root) = tree();
        fs::write(root.join("secret"), "PRIVATE KEY").unwrap();
        std::os::unix::fs::symlink(root.join("secret"), root.join("repo/AGENTS.md")).unwrap();
        let docs = load(&root.join("repo"));
        assert!(docs.text.is_empty());
        assert!(
            docs.warnings[0].contains("out of the project"),
            "{:?}",
            docs.warnings
        );
    }

    #[test]
    fn no_files_no_text() {
        let (_dir, root) = tree();
        assert_eq!(load(&root.join("repo")), ProjectDocs::default());
    }
}
