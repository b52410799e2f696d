use std::path::Path;

use super::*;
use crate::overlay::survey;
use crate::shadow::ShadowRepo;

/// A project with a folder, surveyed (and watched) as a run's start would.
struct Project {
    _dir: tempfile::TempDir,
    root: std::path::PathBuf,
    shadow: ShadowRepo,
}

fn project() -> Project {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("project");
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(root.join("src/main.rs"), "fn main() {}\n").unwrap();
    std::fs::write(root.join(".env"), "KEY=1\n").unwrap();
    let shadow = ShadowRepo::init(&dir.path().join("shadow.git"), &root).unwrap();
    Project {
        _dir: dir,
        root,
        shadow,
    }
}

fn withheld(rel: &Path) -> bool {
    rel.file_name()
        .and_then(|name| name.to_str())
        .is_some_and(|name| name.starts_with(".env") || name.ends_with(".pem"))
}

fn watched(project: &Project, watch: Watch) -> LateFiles {
    let mut watch = watch;
    let mut names = project.shadow.name_check().unwrap();
    let found = survey(&project.root, &withheld, &mut names, Some(&mut watch)).unwrap();
    assert_eq!(found.withheld, [".env"]);
    LateFiles::new(&project.root, watch, &found.hidden)
}

fn check(project: &Project, late: &mut LateFiles) -> Vec<String> {
    let found = late
        .check(&withheld, || {
            project.shadow.name_check().map_err(|e| e.to_string())
        })
        .unwrap();
    found
        .into_iter()
        .map(|path| String::from_utf8(path).unwrap())
        .collect()
}

#[test]
fn files_that_appear_later_are_found_once() {
    let project = project();
    let mut late = watched(&project, Watch::new());
    assert!(late.blind().is_none());
    assert!(check(&project, &mut late).is_empty());
    std::fs::write(project.root.join("src/.env.local"), "KEY=2\n").unwrap();
    std::fs::write(project.root.join("src/lib.rs"), "\n").unwrap();
    std::fs::write(project.root.join(".env~"), "KEY=1\n").unwrap();
    assert_eq!(check(&project, &mut late), [".env~", "src/.env.local"]);
    // Made again: hidden already.
    std::fs::remove_file(project.root.join(".env~")).unwrap();
    std::fs::write(project.root.join(".env~"), "KEY=1\n").unwrap();
    assert!(check(&project, &mut late).is_empty());
}

#[test]
fn a_new_folder_is_walked_and_watched() {
    let project = project();
    let mut late = watched(&project, Watch::new());
    std::fs::create_dir_all(project.root.join("deploy/keys")).unwrap();
    std::fs::write(project.root.join("deploy/keys/prod.pem"), "x").unwrap();
    assert_eq!(check(&project, &mut late), ["deploy/keys/prod.pem"]);
    std::fs::write(project.root.join("deploy/keys/dev.pem"), "x").unwrap();
    assert_eq!(check(&project, &mut late), ["deploy/keys/dev.pem"]);
}

#[test]
fn a_moved_folder_makes_the_whole_project_walked_again() {
    let project = project();
    let mut late = watched(&project, Watch::new());
    std::fs::rename(project.root.join("src"), project.root.join("lib")).unwrap();
    assert!(check(&project, &mut late).is_empty());
    // Watched by its new path from now on.
    std::fs::write(project.root.join("lib/.env"), "KEY=3\n").unwrap();
    assert_eq!(check(&project, &mut late), ["lib/.env"]);
}

#[test]
fn special_files_that_appear_are_found() {
    let project = project();
    let mut late = watched(&project, Watch::new());
    let socket = std::os::unix::net::UnixListener::bind(project.root.join("src/agent.sock"));
    assert!(socket.is_ok());
    assert_eq!(check(&project, &mut late), ["src/agent.sock"]);
}

#[test]
fn without_a_watch_every_check_walks_the_project() {
    let project = project();
    let blind = Watch {
        fd: None,
        folders: HashMap::new(),
        blind: Some("no watches left".into()),
    };
    let mut late = watched(&project, blind);
    assert_eq!(late.blind(), Some("no watches left"));
    assert!(check(&project, &mut late).is_empty());
    std::fs::write(project.root.join("src/.env"), "KEY=2\n").unwrap();
    assert_eq!(check(&project, &mut late), ["src/.env"]);
}
