//! A run on the remote engine as the test user: a project it owns, a copy
//! of ah it can run, and the engine ([`RemoteEngine`]) with the connection
//! the runs use, for the remote engine tests (`tests/remote_engine*.rs`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::host::{json_file, project_of};
use crate::support::mock::MockServer;
use crate::support::podman::TestUser;
use crate::support::remote::{CONNECTION, ROOTFUL_CONNECTION, RemoteEngine};

/// A project the test user owns, ah it can run, and the remote engine.
pub(crate) struct Remote {
    pub(crate) engine: RemoteEngine,
    /// The podman connection runs use.
    connection: &'static str,
    pub(crate) user: TestUser,
    _root: tempfile::TempDir,
    pub(crate) ah: PathBuf,
    pub(crate) project: PathBuf,
}

impl Remote {
    /// On the remote user's rootless engine.
    pub(crate) fn new(files: &[(&str, &str)]) -> Option<Remote> {
        Remote::on(CONNECTION, files)
    }

    /// On the rootful engine (root's podman, through the same login).
    pub(crate) fn rootful(files: &[(&str, &str)]) -> Option<Remote> {
        Remote::on(ROOTFUL_CONNECTION, files)
    }

    fn on(connection: &'static str, files: &[(&str, &str)]) -> Option<Remote> {
        let engine = RemoteEngine::from_env()?;
        let user = TestUser::from_env()?;
        engine.ensure_image("localhost/ah-sandbox:latest");
        let (root, ah) = user.reachable_copy(Path::new(env!("CARGO_BIN_EXE_ah")));
        let project = root.path().join("project");
        project_of(&user, &project, files);
        Some(Remote {
            engine,
            connection,
            user,
            _root: root,
            ah,
            project,
        })
    }

    /// `ah --engine podman-remote -C PROJECT ARGS` as the test user.
    pub(crate) fn ah(&self, mock: &MockServer, args: &[&str]) -> Output {
        self.command(mock, args).output().unwrap()
    }

    /// [`Remote::ah`], not started yet.
    pub(crate) fn command(&self, mock: &MockServer, args: &[&str]) -> Command {
        let url = mock.url();
        let env = [
            ("ANTHROPIC_BASE_URL", url.as_str()),
            ("ANTHROPIC_API_KEY", "test-key"),
            ("NO_COLOR", "1"),
        ];
        let mut command = self.user.command(&self.ah, &env);
        command
            .args(["--engine", "podman-remote", "--connection", self.connection])
            .arg("-C")
            .arg(&self.project)
            .args(args);
        command
    }

    /// `ah doctor --engine podman-remote --connection CONNECTION` as the
    /// test user.
    pub(crate) fn doctor(&self, connection: &str) -> Output {
        self.user
            .command(&self.ah, &[("NO_COLOR", "1")])
            .args(["doctor", "--engine", "podman-remote", "--connection"])
            .arg(connection)
            .output()
            .unwrap()
    }

    /// The ids of the project's runs, oldest first.
    pub(crate) fn runs(&self) -> Vec<String> {
        let mut runs: Vec<String> = std::fs::read_dir(self.project.join(".ah/runs"))
            .map(|dir| {
                dir.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        runs.sort();
        runs
    }

    /// `ah apply ID` as the test user.
    pub(crate) fn apply(&self, id: &str) -> Output {
        self.user
            .command(&self.ah, &[("NO_COLOR", "1")])
            .arg("-C")
            .arg(&self.project)
            .args(["apply", id])
            .output()
            .unwrap()
    }

    /// The only run's id.
    pub(crate) fn run_id(&self) -> String {
        let runs = self.runs();
        assert_eq!(runs.len(), 1, "{runs:?}");
        runs[0].clone()
    }

    /// Run `id`'s `manifest.json`.
    pub(crate) fn manifest(&self, id: &str) -> serde_json::Value {
        json_file(&self.project.join(".ah/runs").join(id).join("manifest.json"))
    }
}
