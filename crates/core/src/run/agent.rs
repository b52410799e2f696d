//! The single-agent engine (`ah [OPTIONS] PROMPT`): the run's place in the
//! project's session (a new prompt under the head, a fork, or a cut turn
//! continued), the prompt stored, then the agent loop until the model is
//! done, stopped or interrupted.

use std::sync::Arc;

use anyhow::{Result, anyhow};

use super::begin::{self, Begin, plan, position, split_prompt};
use super::engine::{Driven, Engine, Entry, Loop};
use super::queue::{Claim, claim_exclusive, claim_for_run};
use super::resolve::{self, Target};
use super::settle::{RunSetup, resolve_project, run_model, settle};
use super::{Front, LockedRun, Open, RunEnd, RunOptions, RunParts, Stop};
use crate::agent::loop_detect::MAX_DETECTIONS;
use crate::agent::prompt;
use crate::agent::{AgentConfig, EndReason, run_agent};
use crate::event::{Event, RunEvent};
use crate::time_travel::files::Origin;
use ah_llm::{Block, Provider, Role};
use ah_record::run::Run;
use ah_session::{BlockRecord, MessageMeta, Session};

/// Resolves and opens the session, settles the run and takes the session's
/// lock; a new prompt for a session another ah holds is queued there. The
/// run's model, connected.
async fn open(
    options: &mut RunOptions,
    front: &mut dyn Front,
) -> Result<(Open, Box<dyn Provider>)> {
    let (fork, prompt) = split_prompt(&options.prompt);
    let project = resolve_project(options.project.as_deref())?;
    let ah_dir = project.join(".ah");
    let target = resolve::resolve(&ah_dir, &options.session, options.new_session)?;
    // An existing session is opened now: whether and where the run can
    // start depends on it. A new one is created once the checks pass.
    let existing = match &target {
        Target::Existing(_) => Some(target.clone().open(&ah_dir)?),
        Target::Create { .. } => None,
    };
    if let Some(session) = &existing
        && session.context(crate::org::schedule::ROSTER_KEY)?.is_some()
    {
        return Err(super::UsageError::Message(format!(
            "session {id} is an `ah org` session: continue it with `ah org -S {id} \"...\"`, \
             or start a new session with -n",
            id = session.id()
        ))
        .into());
    }
    let (begin, task) = plan(existing.as_ref(), fork, &prompt)?;
    let (mut setup, provider) = settle(options, task, run_model, front).await?;
    let session = match existing {
        Some(session) => session,
        None => target.open(&setup.ah_dir)?,
    };
    let lock = match &begin {
        // A new prompt for a busy session waits its turn there.
        Begin::Prompt => {
            let prompt = setup.prompts.blocks.join("\n\n");
            match claim_for_run(&session, &prompt, options.wait).await? {
                Claim::Owner(lock) => lock,
                Claim::Queued(outcome) => return Ok((Open::Queued(outcome), provider)),
            }
        }
        // A fork or a continuation moves the head: not under a live ah.
        Begin::Fork { .. } | Begin::Continue { .. } => claim_exclusive(&session, true)?,
    };
    begin::enter(&session, &begin)?;
    setup.begin = begin;
    let opened = LockedRun {
        setup,
        session,
        lock,
    };
    Ok((Open::Run(Box::new(opened)), provider))
}

/// The single agent, as an engine of the run: the run's model once its
/// opening connected it.
#[derive(Default)]
pub(crate) struct AgentEngine {
    provider: Option<Arc<dyn Provider>>,
}

#[async_trait::async_trait(?Send)]
impl Engine for AgentEngine {
    async fn open(&mut self, options: &mut RunOptions, front: &mut dyn Front) -> Result<Open> {
        let (open, provider) = open(options, front).await?;
        self.provider = Some(Arc::from(provider));
        Ok(open)
    }

    fn enter(self: Box<Self>, at: Entry<'_>) -> Result<Box<dyn Loop>> {
        let provider = self
            .provider
            .ok_or_else(|| anyhow!("the agent was entered into a run it did not open"))?;
        let ready = enter(
            at.options, at.setup, at.session, at.run, at.origin, provider,
        )?;
        Ok(Box::new(ready))
    }
}

#[async_trait::async_trait(?Send)]
impl Loop for AgentLoop {
    async fn drive(self: Box<Self>, with: RunParts<'_>) -> Driven {
        drive(*self, with).await
    }

    fn again(&self) -> Option<Box<dyn Loop>> {
        Some(Box::new(self.clone()))
    }

    fn continued(&self, start: String) -> Option<Box<dyn Loop>> {
        Some(Box::new(AgentLoop {
            start,
            ..self.clone()
        }))
    }
}

/// The agent, entered into its started run: its configuration, the
/// message it answers and its model's connection (one for every attempt).
#[derive(Clone)]
pub(crate) struct AgentLoop {
    config: AgentConfig,
    start: String,
    provider: Arc<dyn Provider>,
}

/// Stores the prompt (or, continuing a cut turn, a note on where the files
/// stand) and configures the agent for `run`.
fn enter(
    options: &RunOptions,
    setup: &RunSetup,
    session: &mut Session,
    run: &Run,
    origin: &Origin,
    provider: Arc<dyn Provider>,
) -> Result<AgentLoop> {
    // A session left mid-turn by a crash gets its missing tool results first.
    let parent = position(session)?;
    let start = match (&setup.begin, parent) {
        // The turn is sent again; the model learns of files that are not
        // what the conversation says.
        (Begin::Continue { .. }, Some(from)) => match origin.continue_note() {
            Some(note) => {
                let block = BlockRecord::from(Block::Text { text: note });
                let meta = MessageMeta::default();
                session.append(Some(&from), Role::User, &[block], &meta)?.id
            }
            None => from,
        },
        (_, parent) => {
            let mut prompt_blocks: Vec<BlockRecord> = setup
                .prompts
                .blocks
                .iter()
                .map(|text| BlockRecord::from(Block::Text { text: text.clone() }))
                .collect();
            if parent.is_some() {
                let note = origin.note();
                prompt_blocks.push(BlockRecord::from(Block::Text { text: note }));
            }
            let user = session.append(
                parent.as_deref(),
                Role::User,
                &prompt_blocks,
                &MessageMeta::default(),
            )?;
            user.id
        }
    };
    crate::time_travel::files::started(session)?;
    let config = AgentConfig {
        model: setup.model.clone(),
        system: prompt::with_withheld_note(&setup.prompts.system, run.withheld()),
        tools: run.tool_specs(setup.model.edit_format),
        max_tools: options.max_tools,
        loop_window: options.loop_window,
        thinking_budget: None,
        compact_reserve: options.compact_reserve,
        compact_prompt: prompt::compact_prompt(&setup.files)?,
    };
    Ok(AgentLoop {
        config,
        start,
        provider,
    })
}

/// Runs the agent loop; returns how the session's intake closes and what
/// the end of the run does.
async fn drive(ready: AgentLoop, with: RunParts<'_>) -> Driven {
    let RunParts {
        options,
        session,
        run,
        abort,
        lock,
        front,
    } = with;
    let finished = {
        let id = run.id();
        let mut on_event = |event: &Event| front.show(&RunEvent::of(&id, event));
        run_agent(
            &ready.config,
            ready.provider.as_ref(),
            session,
            run,
            ready.start,
            abort,
            lock,
            &mut on_event,
        )
        .await
    };
    let summary = match finished {
        Err(err) => return Driven::of((EndReason::Failed, RunEnd::Failed(err.into()))),
        Ok(summary) => summary,
    };
    let end = match summary.reason {
        EndReason::Aborted => RunEnd::Aborted,
        EndReason::Looping => RunEnd::Stopped {
            why: format!("the model repeated itself {MAX_DETECTIONS} times"),
            next: "continue with a clearer prompt (--loop-window 0 turns loop detection off)"
                .to_string(),
            stop: Stop::Unfinished,
        },
        // The model was not done: its unfinished work is not applied.
        EndReason::ToolLimit => RunEnd::Stopped {
            why: format!(
                "the run reached the tool call limit (--max-tools {})",
                options.max_tools.unwrap_or_default()
            ),
            next: "let the model go on from where it stopped with `ah` and no prompt \
                   (a higher --max-tools gives it more calls)"
                .to_string(),
            stop: Stop::Limit,
        },
        EndReason::DiskBudget => RunEnd::Stopped {
            why: "the run's files passed its disk budget".to_string(),
            next: "look at the patch and `ah apply` it if it is what you want, or free \
                   space and raise --disk-budget and go on with `ah`"
                .to_string(),
            stop: Stop::Limit,
        },
        _ => RunEnd::Finished,
    };
    Driven {
        reason: summary.reason,
        end,
        heads: vec![summary.head],
    }
}
