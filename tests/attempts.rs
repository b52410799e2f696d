//! Several runs of one task side by side in one process, through the
//! engine's own API (`ah_core::run::run_attempts`) with real podman and the
//! mock model: two attempts of one session each get a sandbox, a work copy
//! and a patch of their own, go on at the same time, and every event a
//! front-end receives carries the run it belongs to.

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::support::host::Host;
use crate::support::mock::{MockServer, Reply, Turn};
use crate::support::podman::{containers_of, podman_ready_blocking};
use ah_core::event::RunEvent;
use ah_core::run::{
    Choice, Console, Engine, Front, LiveControls, Outcome, PatchToChoose, ReviewFront, RunOptions,
    Tone, run_attempts,
};

/// A front-end that keeps every event as JSON and every notice.
#[derive(Default)]
struct Recorder {
    events: Vec<Value>,
    notices: Vec<String>,
}

struct Quiet;

impl Console for Quiet {
    fn say(&self, _line: &str) {}
    fn restore_terminal(&self) {}
}

#[async_trait::async_trait(?Send)]
impl Front for Recorder {
    fn show(&mut self, event: &RunEvent<'_>) {
        self.events.push(serde_json::to_value(event).unwrap());
    }

    async fn ask_user(&mut self, _agent: &str, _question: &str, _later: &str) -> Option<String> {
        None
    }

    fn notice(&mut self, line: &str) {
        self.notices.push(line.to_string());
    }

    fn console(&self) -> Arc<dyn Console> {
        Arc::new(Quiet)
    }

    fn live(&mut self, _controls: LiveControls) -> Option<Box<dyn Any>> {
        None
    }

    async fn build_image(
        &mut self,
        _options: &ah_core::sandbox::BuildOptions,
    ) -> anyhow::Result<()> {
        anyhow::bail!("the test image is built by the test set-up")
    }
}

impl ReviewFront for Recorder {
    fn choose(&mut self, _patch: &PatchToChoose<'_>) -> anyhow::Result<Choice> {
        panic!("an attempt asked what to do with its patch")
    }

    fn say(&mut self, _tone: Tone, lead: &str, rest: &str) {
        self.notices.push(format!("{lead} {rest}"));
    }
}

#[test]
fn two_attempts_of_one_task_run_side_by_side_in_one_process() {
    let Some(podman) = podman_ready_blocking() else {
        return;
    };
    let host = Host::git(&[("README.md", "hello\n")]);
    // nextest runs each test in a process of its own, and no thread of
    // this test runs yet: setting the environment here races with nothing.
    // SAFETY: see above.
    unsafe {
        std::env::set_var("ANTHROPIC_API_KEY", "test-key");
        std::env::set_var("XDG_CONFIG_HOME", host.home.join(".config"));
    }
    let write = |id: &str, path: &str| {
        Turn::reply(Reply::new().tool_use(
            id,
            "bash",
            json!({ "command": format!("sleep 0.3; echo {path} > {path}") }),
        ))
    };
    // Whichever attempt asks first gets the first file; each then ends.
    let mock = MockServer::start(vec![
        write("toolu_1", "first.txt"),
        write("toolu_2", "second.txt"),
        Turn::reply(Reply::new().text("done")),
        Turn::reply(Reply::new().text("done")),
    ]);
    let options = RunOptions {
        prompt: vec!["write a file".into()],
        project: Some(host.project.clone()),
        overrides: vec![format!("providers.anthropic.base_url={}", mock.url())],
        ..RunOptions::default()
    };
    let mut front = Recorder::default();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let attempts = runtime
        .block_on(run_attempts(options, Engine::Agent, 2, &mut front))
        .unwrap_or_else(|e| panic!("{e:#}\n{:?}", front.notices));
    assert_eq!(attempts.len(), 2);
    let mut files = BTreeMap::new();
    for attempt in &attempts {
        match &attempt.outcome {
            Ok(Outcome::Done) => {}
            other => panic!("{}: {other:?}\n{:?}", attempt.run, front.notices),
        }
        // Its own patch: exactly the one file its own command wrote.
        let run = host.project.join(".ah/runs").join(&attempt.run);
        let patch = std::fs::read_to_string(run.join("session.patch")).unwrap();
        let written: Vec<&str> = patch
            .lines()
            .filter_map(|line| line.strip_prefix("+++ b/"))
            .collect();
        assert_eq!(written.len(), 1, "{patch}");
        let file = written[0].to_string();
        assert!(patch.contains(&format!("+{file}")), "{patch}");
        files.insert(file, attempt.run.clone());
        // Every event of the run carries it and nothing of the other's.
        let own: Vec<&Value> = front
            .events
            .iter()
            .filter(|e| e["run"] == json!(attempt.run))
            .collect();
        let start = own.iter().find(|e| e["type"] == "agent_start").unwrap();
        assert_eq!(start["run_id"], json!(attempt.run));
        for event in own.iter().filter(|e| e["type"] == "step_committed") {
            assert_eq!(event["changes"][0]["path"], json!(written[0]), "{event}");
        }
        let end = own.iter().find(|e| e["type"] == "run_end").unwrap();
        assert_eq!(end["files"], json!(1));
        // One model answer with a call and one without: its own two calls.
        assert_eq!(end["usage"]["output_tokens"], json!(60), "{end}");
    }
    assert_eq!(
        files.keys().cloned().collect::<Vec<_>>(),
        ["first.txt", "second.txt"]
    );
    assert!(
        front.events.iter().all(|e| e["run"].is_string()),
        "no event without its run"
    );
    // Side by side: each started before either ended.
    let position = |run: &str, kind: &str| {
        front
            .events
            .iter()
            .position(|e| e["run"] == json!(run) && e["type"] == kind)
            .unwrap()
    };
    let (one, two) = (&attempts[0].run, &attempts[1].run);
    assert!(
        position(one, "agent_start") < position(two, "run_end")
            && position(two, "agent_start") < position(one, "run_end"),
        "the attempts ran one after the other"
    );
    // One session, a branch each under the one prompt.
    let sessions = host.sessions();
    assert_eq!(sessions.len(), 1);
    let prompts = crate::support::host::query(
        &sessions[0],
        "SELECT count(*) FROM messages WHERE role = 'user' AND parent_id IS NULL",
    );
    assert_eq!(prompts, [vec![json!(1)]]);
    // Both sandboxes are gone, and the project is as it was.
    for attempt in &attempts {
        assert_eq!(containers_of(&podman, &attempt.run), "", "{}", attempt.run);
    }
    assert_eq!(host.git_out(&["status", "--porcelain"]), "");
}
