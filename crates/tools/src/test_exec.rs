//! A real-process [`Exec`] for the tools' tests: runs `bash -c` in a temp work
//! directory and denies writes under one folder, standing in for the sandbox
//! backends (which live in a higher layer).

use std::path::{Path, PathBuf};
use std::time::Duration;

use tempfile::TempDir;
use tokio::io::AsyncReadExt;
use tokio::process::Command;

use super::{Exec, ExecOutput, OutputLimits};

/// Writes under this folder (relative to the root) are refused.
pub(crate) const DENIED: &str = "protected";

pub(crate) struct TestExec {
    _dir: TempDir,
    root: PathBuf,
    limits: OutputLimits,
    full_output: Option<String>,
}

impl TestExec {
    pub(crate) fn new() -> TestExec {
        let dir = tempfile::tempdir().expect("create temp dir");
        let root = dir.path().join("work");
        std::fs::create_dir(&root).expect("create work dir");
        TestExec {
            _dir: dir,
            root,
            limits: OutputLimits::default(),
            full_output: None,
        }
    }

    /// The same, with these output caps.
    pub(crate) fn with_limits(self, limits: OutputLimits) -> TestExec {
        TestExec { limits, ..self }
    }

    /// The same, naming `path` as the file that keeps each call's whole output.
    pub(crate) fn with_full_output(self, path: &str) -> TestExec {
        TestExec {
            full_output: Some(path.to_string()),
            ..self
        }
    }

    /// A host path next to (outside) the work root, in the same temp dir.
    pub(crate) fn outside(&self, name: &str) -> PathBuf {
        self.root.parent().expect("root has a parent").join(name)
    }

    pub(crate) fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }
}

#[async_trait::async_trait]
impl Exec for TestExec {
    fn root(&self) -> &Path {
        &self.root
    }

    async fn run(&self, command: &str, timeout: Duration) -> std::io::Result<ExecOutput> {
        let mut child = Command::new("bash")
            .arg("-c")
            .arg(command)
            .current_dir(&self.root)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()?;
        let group = child
            .id()
            .and_then(|id| rustix::process::Pid::from_raw(id.try_into().ok()?));
        let (Some(mut out), Some(mut err)) = (child.stdout.take(), child.stderr.take()) else {
            return Err(std::io::Error::other("child pipes missing"));
        };
        let stdout = tokio::spawn(async move {
            let mut buf = Vec::new();
            out.read_to_end(&mut buf).await.map(|_| buf)
        });
        let stderr = tokio::spawn(async move {
            let mut buf = Vec::new();
            err.read_to_end(&mut buf).await.map(|_| buf)
        });
        let (status, timed_out) = match tokio::time::timeout(timeout, child.wait()).await {
            Ok(status) => (Some(status?), false),
            Err(_) => {
                if let Some(group) = group {
                    // The process group the child leads; already gone is fine.
                    let _ =
                        rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
                }
                child.wait().await?;
                (None, true)
            }
        };
        Ok(ExecOutput {
            stdout: stdout.await.map_err(std::io::Error::other)??,
            stderr: stderr.await.map_err(std::io::Error::other)??,
            exit_code: status.and_then(|s| s.code()),
            timed_out,
            dropped_bytes: 0,
            memory_limit_hit: None,
        })
    }

    fn limits(&self) -> OutputLimits {
        self.limits
    }

    fn full_output(&self) -> Option<String> {
        self.full_output.clone()
    }

    fn check_write(&self, rel_path: &str) -> Result<(), String> {
        if rel_path == DENIED || rel_path.starts_with(&format!("{DENIED}/")) {
            Err(format!("the test policy denies writes under {DENIED}/"))
        } else {
            Ok(())
        }
    }
}
