//! The backend contract from the record's side: a backend whose files the
//! host cannot see (here, a folder only its commands touch, like a sandbox
//! on another machine) is driven only through its view and push. Commands
//! change the sandbox, file tools change the host's view, an undo puts the
//! view back: after each step both sides hold what was recorded.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::*;
use crate::workspace::copy_project;
use ah_tools::ExecOutput;

/// A sandbox on "another machine": `sandbox` is only reached by its
/// commands; the host gets a mirror (the run's work copy) on `view` and
/// sends its own changes back on `push`.
struct Remote {
    sandbox: TempDir,
    mirror: PathBuf,
    inner: NoneBackend,
    /// The paths the host pushed, each push in order (`None`: everything).
    pushed: Arc<Mutex<Vec<Option<Vec<String>>>>>,
}

impl Remote {
    fn new(mirror: &Path) -> Remote {
        let sandbox = tempfile::tempdir().unwrap();
        let root = sandbox.path().join("work");
        copy_project(mirror, &root, &|_| false).unwrap();
        let inner = NoneBackend::new(&root);
        Remote {
            sandbox,
            mirror: mirror.to_path_buf(),
            inner,
            pushed: Arc::default(),
        }
    }

    fn root(&self) -> PathBuf {
        self.sandbox.path().join("work")
    }
}

/// Makes `to` hold exactly what `from` holds.
fn mirror(from: &Path, to: &Path) {
    let _ = fs::remove_dir_all(to);
    copy_project(from, to, &|_| false).unwrap();
}

#[async_trait::async_trait]
impl Backend for Remote {
    fn kind(&self) -> BackendKind {
        BackendKind::None
    }

    async fn exec(&self, command: &str, timeout: Duration) -> std::io::Result<ExecOutput> {
        self.inner.exec(command, timeout).await
    }

    async fn view(&self) -> std::io::Result<View> {
        mirror(&self.root(), &self.mirror);
        Ok(View {
            root: self.mirror.clone(),
            changed: Changed::Anywhere,
        })
    }

    async fn push(&self, paths: Option<&[String]>) -> std::io::Result<()> {
        self.pushed
            .lock()
            .unwrap()
            .push(paths.map(<[String]>::to_vec));
        match paths {
            None => mirror(&self.mirror, &self.root()),
            Some(paths) => {
                for path in paths {
                    let (from, to) = (self.mirror.join(path), self.root().join(path));
                    match fs::read(&from) {
                        Ok(bytes) => {
                            fs::create_dir_all(to.parent().unwrap()).unwrap();
                            fs::write(&to, bytes).unwrap();
                        }
                        Err(_) => {
                            let _ = fs::remove_file(&to);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    async fn shutdown(&self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Every file under `dir` with its text.
fn files(dir: &Path) -> BTreeMap<String, String> {
    let mut found = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        for entry in fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let rel = path.strip_prefix(dir).unwrap().display().to_string();
                found.insert(rel, fs::read_to_string(&path).unwrap());
            }
        }
    }
    found
}

#[tokio::test]
async fn a_backend_the_host_cannot_see_stays_in_step_with_the_record() {
    let mut seen = None;
    let mut f = fixture_with(|work| {
        let remote = Remote::new(work);
        seen = Some((remote.root(), Arc::clone(&remote.pushed)));
        Box::new(remote)
    });
    let (sandbox, pushed) = seen.unwrap();
    let (run, work) = (&mut f.run, f.work.clone());

    // A command changes the sandbox: the record sees it through the view.
    let made = bash(run, "echo made > made.txt").await;
    assert_eq!(made.changes.len(), 1, "{:?}", made.output.content);
    // A file tool writes the host's view: the sandbox gets it by a push.
    let wrote = run
        .tool_step("write", &json!({ "path": "notes.md", "content": "host\n" }))
        .await;
    assert!(!wrote.output.is_error, "{}", wrote.output.content);
    assert_eq!(
        fs::read_to_string(sandbox.join("notes.md")).unwrap(),
        "host\n"
    );
    let seen = bash(run, "cat notes.md").await;
    assert!(
        seen.output.content.contains("host"),
        "{}",
        seen.output.content
    );
    // A step that breaks the policy is undone in the view, and in the
    // sandbox once pushed.
    let denied = bash(run, "mkdir -p .github && echo x > .github/ci.yml").await;
    assert!(denied.violation.is_some(), "{}", denied.output.content);
    assert!(!sandbox.join(".github/ci.yml").exists());
    // Both sides hold exactly the last recorded commit.
    assert_eq!(files(&sandbox), files(&work));
    assert_eq!(
        files(&sandbox).keys().cloned().collect::<Vec<_>>(),
        ["made.txt", "notes.md", "src/lib.rs"]
    );
    let pushed = pushed.lock().unwrap().clone();
    assert_eq!(pushed, [Some(vec!["notes.md".to_string()]), None]);
}
