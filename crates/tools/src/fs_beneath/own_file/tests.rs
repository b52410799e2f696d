use std::os::unix::fs::symlink;
use std::path::Path;

use super::*;

fn tree() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap().join("project");
    std::fs::create_dir_all(root.join(".ah/sys")).unwrap();
    (dir, root)
}

fn env_withheld(path: &Path) -> bool {
    path.file_name().is_some_and(|name| name == ".env")
}

fn read(root: &Path, rel: &str) -> Result<Option<String>, OwnFileError> {
    Tree::new(root, &env_withheld).read_text(Path::new(rel), 1024)
}

fn refusal(root: &Path, rel: &str) -> String {
    match read(root, rel) {
        Err(err) => err.to_string(),
        Ok(text) => panic!("{rel} was read: {text:?}"),
    }
}

#[test]
fn a_plain_file_and_a_link_inside_are_read() {
    let (_dir, root) = tree();
    std::fs::write(root.join("AGENTS.md"), "rules").unwrap();
    symlink("AGENTS.md", root.join("CLAUDE.md")).unwrap();
    std::fs::create_dir(root.join("docs")).unwrap();
    symlink("../AGENTS.md", root.join("docs/agents.md")).unwrap();
    symlink(root.join("AGENTS.md"), root.join(".ah/sys/system.md")).unwrap();
    for rel in [
        "AGENTS.md",
        "CLAUDE.md",
        "docs/agents.md",
        ".ah/sys/system.md",
    ] {
        assert_eq!(read(&root, rel).unwrap().as_deref(), Some("rules"), "{rel}");
    }
    assert_eq!(read(&root, "missing.md").unwrap(), None);
    assert_eq!(read(&root, "nowhere/missing.md").unwrap(), None);
}

#[test]
fn links_out_of_the_tree_are_refused() {
    let (_dir, root) = tree();
    std::fs::write(root.parent().unwrap().join("secret"), "key").unwrap();
    symlink("/proc/self/environ", root.join(".ah/sys/system.md")).unwrap();
    symlink("../secret", root.join("AGENTS.md")).unwrap();
    symlink("../../secret", root.join(".ah/config.toml")).unwrap();
    symlink("..", root.join("up")).unwrap();
    assert!(refusal(&root, ".ah/sys/system.md").contains("out of the project"));
    assert!(refusal(&root, "AGENTS.md").contains("out of the project"));
    assert!(refusal(&root, ".ah/config.toml").contains("out of the project"));
    assert!(refusal(&root, "up/secret").contains("out of the project"));
    assert!(refusal(&root, "../secret").contains("out of the project"));
}

#[test]
fn withheld_files_and_git_folders_are_refused_also_through_links() {
    let (_dir, root) = tree();
    std::fs::write(root.join(".env"), "KEY=1").unwrap();
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::write(root.join(".git/config"), "token").unwrap();
    std::fs::create_dir_all(root.join(".ah/runs/1/upper")).unwrap();
    std::fs::write(root.join(".ah/runs/1/upper/x.md"), "planted").unwrap();
    symlink(".env", root.join("AGENTS.md")).unwrap();
    symlink("../../.env", root.join(".ah/sys/lead.md")).unwrap();
    symlink(".git/config", root.join("CLAUDE.md")).unwrap();
    symlink(".GIT", root.join("g")).unwrap();
    symlink(".ah/runs/1/upper/x.md", root.join("GEMINI.md")).unwrap();
    assert!(refusal(&root, "AGENTS.md").contains("withholds"));
    assert!(refusal(&root, ".ah/sys/lead.md").contains("withholds"));
    assert!(refusal(&root, ".env").contains("withholds"));
    assert!(refusal(&root, "CLAUDE.md").contains(".git folder"));
    assert!(refusal(&root, "g/config").contains(".git folder"));
    assert!(refusal(&root, "GEMINI.md").contains("run folders"));
}

#[test]
fn a_withheld_link_is_refused_even_to_a_plain_file() {
    let (_dir, root) = tree();
    std::fs::write(root.join("notes.md"), "fine").unwrap();
    symlink("notes.md", root.join(".env")).unwrap();
    assert!(refusal(&root, ".env").contains("withholds"));
}

#[test]
fn special_files_pseudo_files_and_big_files_are_refused() {
    let (_dir, root) = tree();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        root.join("fifo"),
        rustix::fs::FileType::Fifo,
        Mode::from(0o600),
        0,
    )
    .unwrap();
    std::fs::write(root.join("big"), vec![b'a'; 2000]).unwrap();
    std::fs::write(root.join("binary"), [0xff, 0xfe]).unwrap();
    assert!(refusal(&root, "fifo").contains("not a regular file"));
    assert!(refusal(&root, "big").contains("larger than 1 KiB"));
    assert!(refusal(&root, "binary").contains("not UTF-8"));
    assert!(refusal(&root, ".ah").contains("not a regular file"));
    let proc = read_trusted(Path::new("/proc/self/environ"), 1024).unwrap_err();
    assert!(proc.to_string().contains("/proc or /sys"), "{proc}");
    let zero = read_trusted(Path::new("/dev/zero"), 1024).unwrap_err();
    assert!(zero.to_string().contains("not a regular file"), "{zero}");
}

#[test]
fn link_loops_end() {
    let (_dir, root) = tree();
    symlink("b", root.join("a")).unwrap();
    symlink("a", root.join("b")).unwrap();
    assert!(refusal(&root, "a").contains("more than 40 links"));
}

#[test]
fn folders_are_listed_through_links_inside_only() {
    let (_dir, root) = tree();
    std::fs::create_dir_all(root.join("shared/agents")).unwrap();
    std::fs::write(root.join("shared/agents/b.md"), "").unwrap();
    std::fs::write(root.join("shared/agents/a.md"), "").unwrap();
    symlink("../shared/agents", root.join(".ah/agents")).unwrap();
    symlink("/etc", root.join(".ah/tools")).unwrap();
    let files = Tree::new(&root, &env_withheld);
    let names: Vec<Vec<u8>> = files
        .list(Path::new(".ah/agents"))
        .unwrap()
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    assert_eq!(names, [b"a.md".to_vec(), b"b.md".to_vec()]);
    assert!(files.list(Path::new(".ah/missing")).unwrap().is_empty());
    let out = files.list(Path::new(".ah/tools")).unwrap_err().to_string();
    assert!(out.contains("out of the project"), "{out}");
}

#[test]
fn a_links_real_path_is_found_inside_the_tree() {
    let (_dir, root) = tree();
    std::fs::create_dir_all(root.join("config")).unwrap();
    std::fs::write(root.join("config/local.env"), "KEY=1").unwrap();
    symlink("config/local.env", root.join(".env")).unwrap();
    symlink("../config/./local.env", root.join(".ah/x")).unwrap();
    symlink(root.join("config"), root.join("conf")).unwrap();
    symlink("nowhere", root.join("dangling")).unwrap();
    let anything = |_: &Path| false;
    let files = Tree::new(&root, &anything);
    let real = |rel: &str| files.real_path(Path::new(rel)).unwrap();
    assert_eq!(real(".env"), Some(PathBuf::from("config/local.env")));
    assert_eq!(real(".ah/x"), Some(PathBuf::from("config/local.env")));
    assert_eq!(
        real("conf/local.env"),
        Some(PathBuf::from("config/local.env"))
    );
    assert_eq!(real("conf/.."), Some(PathBuf::new()));
    assert_eq!(real("dangling"), Some(PathBuf::from("nowhere")));
    assert_eq!(real("missing/x"), None);
}
