//! The org engine (`ah org --agents "lead:opus,coder" "task"`): several
//! agents in one run (see `crate::org`). A new org is a new session of the
//! project whose root is the task; `ah org -S SESSION "words"` continues
//! one (an answer to an open `@@user` question goes to the asker), on the
//! files as its last run left them. The run starts and ends as any run
//! does: one work copy, one patch, one review.

use anyhow::{Result, anyhow};

use super::engine::{Driven, Engine, Entry, Loop};
use super::queue::{claim_exclusive, shell_word};
use super::resolve::{self, Target};
use super::settle::{RunSetup, resolve_project, retry_policy, settle};
use super::{Front, LockedRun, Open, RunEnd, RunOptions, RunParts, Stop, UsageError};
use crate::agent::instructions::global_dir;
use crate::agent::{AgentConfig, EndReason, prompt};
use crate::config::ProjectFiles;
use crate::event::{Event, RunEvent};
use crate::org::roster::{AgentSpec, listed, roster};
use crate::org::schedule::{ROSTER_KEY, STATE_KEY, Schedule};
use crate::org::{Interjections, Org, OrgAgent, OrgConfig, OrgEnd, OrgFront, letters};
use crate::time_travel::files::Origin;
use ah_base::count;
use ah_llm::models::{self, ModelInfo};
use ah_llm::providers::Selection;
use ah_llm::{Block, Provider};
use ah_record::run::Run;
use ah_record::safe_text::terminal_safe;
use ah_session::queue::{QueueKind, Queued, SessionLock};
use ah_session::{Session, SessionError};

/// What `ah org` was asked, besides the run's options.
#[derive(Debug, Clone, Default)]
pub struct OrgRequest {
    /// `--agents`.
    pub agents: Option<String>,
    pub max_ticks: Option<u32>,
    pub idle_ticks: Option<u32>,
}

/// The org, settled: its agents, their models and providers.
struct OrgPlan {
    specs: Vec<AgentSpec>,
    members: Vec<Member>,
    roster: String,
    request: OrgRequest,
    input: Option<String>,
    /// The session is an org already (its files come from its last run).
    continuing: bool,
}

/// An agent's model: what the API calls it, what people call it, and its
/// connection.
struct Member {
    model: ModelInfo,
    /// The name it was asked by (`opus`, an alias of the configuration).
    requested: String,
    shown: String,
    provider: Box<dyn Provider>,
}

/// Several agents, as an engine of the run: what `ah org` asked, then the
/// org as its opening settled it.
pub(crate) struct OrgEngine {
    request: OrgRequest,
    plan: Option<OrgPlan>,
}

impl OrgEngine {
    pub(crate) fn new(request: OrgRequest) -> OrgEngine {
        OrgEngine {
            request,
            plan: None,
        }
    }
}

#[async_trait::async_trait(?Send)]
impl Engine for OrgEngine {
    async fn open(&mut self, options: &mut RunOptions, front: &mut dyn Front) -> Result<Open> {
        let (open, plan) = open(options, self.request.clone(), front).await?;
        self.plan = plan;
        Ok(open)
    }

    fn enter(self: Box<Self>, at: Entry<'_>) -> Result<Box<dyn Loop>> {
        let plan = self
            .plan
            .ok_or_else(|| anyhow!("the org was entered into a run it did not open"))?;
        let config = enter(
            at.options,
            at.setup,
            (at.session, at.run, at.origin),
            plan,
            at.front,
        )?;
        Ok(Box::new(OrgLoop(config)))
    }
}

/// The org in its started run.
struct OrgLoop(OrgConfig);

#[async_trait::async_trait(?Send)]
impl Loop for OrgLoop {
    async fn drive(self: Box<Self>, with: RunParts<'_>) -> Driven {
        Driven::of(drive(self.0, with).await)
    }
}

/// Reads the roster, settles the run, connects every agent's model, and
/// opens and locks the org's session: a new one, or the one `-S` names;
/// the org as settled (none when the prompt was queued).
async fn open(
    options: &mut RunOptions,
    request: OrgRequest,
    front: &mut dyn Front,
) -> Result<(Open, Option<OrgPlan>)> {
    let project = resolve_project(options.project.as_deref())?;
    let ah_dir = project.join(".ah");
    let words = options.prompt.join(" ");
    let words = Some(words.trim().to_string()).filter(|w| !w.is_empty());
    // Without a session named, a new one: `ah org` never continues the
    // project's latest session on its own.
    let chosen = &options.session;
    let named = chosen.session.is_some() || chosen.db.is_some() || chosen.name.is_some();
    let target = resolve::resolve(&ah_dir, chosen, !named)?;
    let existing = match &target {
        Target::Existing(_) => Some(target.clone().open(&ah_dir)?),
        Target::Create { .. } => None,
    };
    let (list, task) = match &existing {
        Some(session) => continued(session, request.agents.as_deref())?,
        None => {
            let Some(task) = words.clone() else {
                return Err(UsageError::Message(
                    "no task given: ah org --agents \"lead:opus,coder\" \"what to do\"".into(),
                )
                .into());
            };
            (request.agents.clone(), task)
        }
    };
    // Only the agents' models are connected: the run's own is an agent's
    // only when the agent names none.
    let agents = |_: &Selection, options: &RunOptions, files: &ProjectFiles| {
        let specs =
            roster(list.as_deref(), files, global_dir().as_deref()).map_err(UsageError::Message)?;
        let members = connect(&specs, options)?;
        Ok((specs, members))
    };
    let (mut setup, (specs, members)) = settle(options, task, agents, front).await?;
    setup.agent_models = specs
        .iter()
        .zip(&members)
        .map(|(spec, member)| (spec.name.clone(), member.shown.clone()))
        .collect();
    for (spec, member) in specs.iter().zip(&members) {
        // A cloned repository may ship agent files: say what they choose.
        if let Some(file) = &spec.defined_in {
            front.notice(&format!(
                "agent {}: model {}, defined in {}",
                spec.name,
                terminal_safe(&member.shown),
                terminal_safe(&file.display().to_string())
            ));
        }
    }
    check_tools(&specs, &setup)?;
    let session = match existing {
        Some(session) => session,
        None => target.open(&setup.ah_dir)?,
    };
    let lock = claim_exclusive(&session, true)?;
    // Each agent with the model it runs, so a continued org keeps them.
    let roster_line = specs
        .iter()
        .zip(&members)
        .map(|(spec, member)| format!("{}:{}", spec.name, member.requested))
        .collect::<Vec<_>>()
        .join(",");
    let continuing = session.context(STATE_KEY)?.is_some();
    let input = match continuing {
        true => words,
        false => Some(setup.prompts.blocks.join("\n\n")),
    };
    // The files of a continued org are those of its latest step, in
    // whichever agent's branch (the head may be in another's).
    if continuing && let Some(latest) = session.newest_step_message()? {
        session.set_head(&latest)?;
    }
    let plan = OrgPlan {
        specs,
        members,
        roster: roster_line,
        request,
        input,
        continuing,
    };
    let opened = LockedRun {
        setup,
        session,
        lock,
    };
    Ok((Open::Run(Box::new(opened)), Some(plan)))
}

/// A continued org: its roster (which `--agents` may only repeat) and its
/// task.
fn continued(session: &Session, agents: Option<&str>) -> Result<(Option<String>, String)> {
    let Some(stored) = session.context(ROSTER_KEY)? else {
        return Err(UsageError::Message(format!(
            "session {} is not an org session: continue it with `ah -S {}`",
            session.id(),
            session.id()
        ))
        .into());
    };
    let names = |list: &str| -> Vec<String> {
        listed(list)
            .into_iter()
            .map(|(name, _)| name.to_string())
            .filter(|name| !name.is_empty())
            .collect()
    };
    if let Some(given) = agents
        && names(given) != names(&stored)
    {
        return Err(UsageError::Message(format!(
            "session {} is an org of {}: continue it without --agents, or start a new org",
            session.id(),
            names(&stored).join(", ")
        ))
        .into());
    }
    let state: Option<Schedule> = session
        .context(STATE_KEY)?
        .and_then(|state| serde_json::from_str(&state).ok());
    let task = state
        .and_then(|state| state.root)
        .map(|root| session.path_to(&root))
        .transpose()?
        .and_then(|path| path.last().cloned())
        .and_then(|root| {
            root.blocks.iter().find_map(|b| match &b.block {
                Block::Text { text } => Some(text.clone()),
                _ => None,
            })
        })
        .ok_or_else(|| anyhow!("session {} has no task at its root", session.id()))?;
    // The agents given again may name other models.
    Ok((Some(agents.map_or(stored, str::to_string)), task))
}

/// Every agent's model and provider (the run's model where it names none).
fn connect(specs: &[AgentSpec], options: &RunOptions) -> Result<Vec<Member>> {
    let run_model = options.model.as_deref().unwrap_or(models::DEFAULT_MODEL);
    specs
        .iter()
        .map(|spec| {
            let name = spec.model.as_deref().unwrap_or(run_model);
            let selection = super::model::select(name, &options.config)
                .map_err(|err| UsageError::Message(format!("agent {}: {err:#}", spec.name)))?;
            let shown = selection.display_name();
            let provider = selection.connect(retry_policy(&options.config.retry))?;
            Ok(Member {
                model: selection.model,
                requested: name.to_string(),
                shown,
                provider,
            })
        })
        .collect()
}

/// An agent's `tools` must name ah's tools, the project's, or tools of
/// the MCP servers (`SERVER__TOOL`: which tools a server has is known once
/// the run starts it).
fn check_tools(specs: &[AgentSpec], setup: &RunSetup) -> Result<()> {
    let mut known = ah_tools::names();
    known.extend(setup.project_tools.iter().map(|tool| tool.name.clone()));
    let of_server = |tool: &str| {
        tool.split_once(ah_tools::mcp::SEPARATOR)
            .is_some_and(|(server, _)| setup.mcp_servers.iter().any(|known| known.name == server))
    };
    known.extend(
        setup
            .mcp_servers
            .iter()
            .map(|server| format!("{}{}TOOL", server.name, ah_tools::mcp::SEPARATOR)),
    );
    for spec in specs {
        for tool in spec.tools.iter().flatten() {
            if !known.contains(tool) && !of_server(tool) {
                return Err(UsageError::Message(format!(
                    "agent {}: unknown tool {tool:?} in its tools (the tools are {})",
                    spec.name,
                    known.join(", ")
                ))
                .into());
            }
        }
    }
    Ok(())
}

/// The org's configuration in its started run.
fn enter(
    options: &RunOptions,
    setup: &RunSetup,
    (session, run, origin): (&Session, &Run, &Origin),
    plan: OrgPlan,
    front: &mut dyn Front,
) -> Result<OrgConfig> {
    front.notice(&format!("org session {}", session.id()));
    let system = prompt::with_withheld_note(&setup.prompts.system, run.withheld());
    let shown: Vec<String> = plan
        .members
        .iter()
        .map(|member| member.shown.clone())
        .collect();
    let compact_prompt = prompt::compact_prompt(&setup.files)?;
    let agents = plan
        .specs
        .iter()
        .zip(plan.members)
        .map(
            |(
                spec,
                Member {
                    model, provider, ..
                },
            )| OrgAgent {
                name: spec.name.clone(),
                config: AgentConfig {
                    tools: run.tool_specs(model.edit_format),
                    model,
                    system: format!(
                        "{system}\n\n{}",
                        letters::system_section(spec, &plan.specs, &shown)
                    ),
                    max_tools: spec.max_tools,
                    loop_window: options.loop_window,
                    thinking_budget: None,
                    compact_reserve: options.compact_reserve,
                    compact_prompt: compact_prompt.clone(),
                },
                tools: spec.tools.clone(),
                provider,
            },
        )
        .collect();
    Ok(OrgConfig {
        agents,
        roster: plan.roster,
        max_ticks: plan
            .request
            .max_ticks
            .unwrap_or(crate::org::DEFAULT_MAX_TICKS),
        idle_ticks: plan
            .request
            .idle_ticks
            .unwrap_or(crate::org::DEFAULT_IDLE_TICKS),
        max_tools: options.max_tools,
        input: plan.input,
        files_note: plan.continuing.then(|| origin.note()),
    })
}

/// Runs the org; returns how the session's intake closes and what the end
/// of the run does.
async fn drive(config: OrgConfig, with: RunParts<'_>) -> (EndReason, RunEnd) {
    let RunParts {
        options,
        session,
        run,
        abort,
        lock,
        front,
    } = with;
    let session_id = session.id();
    let question_file = run.dir().path().join(QUESTION_FILE);
    let mut adapter = Adapter {
        front,
        run: run.id(),
        answer_later: org_command(options, &session_id, "\"answer\""),
    };
    let ran = Org {
        config: &config,
        session,
        run,
        abort,
        interjections: &QueueInterjections(lock),
        front: &mut adapter,
    }
    .run()
    .await;
    let record = match ran {
        Err(err) => return (EndReason::Failed, RunEnd::Failed(err.into())),
        Ok(record) => record,
    };
    if let OrgEnd::Asked { agent, question } = &record.end {
        let written = serde_json::to_vec_pretty(&serde_json::json!({
            "session": session_id,
            "agent": agent,
            "question": question,
        }))
        .map_err(std::io::Error::other)
        .and_then(|text| std::fs::write(&question_file, text));
        if let Err(err) = written {
            let err = anyhow!("could not write {}: {err}", question_file.display());
            return (EndReason::Failed, RunEnd::Failed(err));
        }
    }
    run_end(
        &record.end,
        |words| org_command(options, &session_id, words),
        config.max_tools,
    )
}

/// `ah org` on the session `session` as the user would type it: with the
/// project (`-C`) and the session's database (`--db`) as this run was given
/// them, quoted for a shell, then `words` (a placeholder, as it stands).
fn org_command(options: &RunOptions, session: &str, words: &str) -> String {
    let mut command = vec!["ah org".to_string()];
    if let Some(project) = &options.project {
        command.push(format!("-C {}", shell_word(&project.to_string_lossy())));
    }
    match &options.session.db {
        Some(db) => command.push(format!("--db {}", shell_word(&db.to_string_lossy()))),
        None => command.push(format!("-S {}", shell_word(session))),
    }
    command.push(words.to_string());
    command.join(" ")
}

/// The file in the run directory that holds an unanswered `@@user`
/// question.
pub const QUESTION_FILE: &str = "question.json";

/// What the end of the org means for the run; `command` gives the command
/// that continues the org with the words it is given.
fn run_end(
    end: &OrgEnd,
    command: impl Fn(&str) -> String,
    max_tools: Option<u32>,
) -> (EndReason, RunEnd) {
    let stopped = |why: String, next: String, stop: Stop| {
        (EndReason::Done, RunEnd::Stopped { why, next, stop })
    };
    let go_on = format!("go on with `{}`", command("\"what to do\""));
    match end {
        OrgEnd::Done | OrgEnd::Finished => (EndReason::Done, RunEnd::Finished),
        OrgEnd::Asked { agent, question } => stopped(
            format!(
                "{agent} asks the user: {}",
                terminal_safe(question.lines().next().unwrap_or_default())
            ),
            format!(
                "answer with `{}` (the answer goes to {agent})",
                command("\"ANSWER\"")
            ),
            Stop::Question,
        ),
        OrgEnd::Idle { ticks } => stopped(
            format!(
                "the agents exchanged messages for {} without a tool call or a file change \
                 (--idle-ticks)",
                count(*ticks, "tick", "ticks")
            ),
            go_on,
            Stop::Unfinished,
        ),
        OrgEnd::TickLimit { ticks } => stopped(
            format!("the run reached its tick limit (--max-ticks {ticks})"),
            go_on,
            Stop::Limit,
        ),
        OrgEnd::ToolLimit { calls } => stopped(
            format!(
                "the run reached the tool call limit (--max-tools {}) after {}",
                max_tools.unwrap_or_default(),
                count(*calls, "call", "calls")
            ),
            go_on,
            Stop::Limit,
        ),
        OrgEnd::Stopped { reason, agent } => match reason {
            EndReason::Aborted => (EndReason::Aborted, RunEnd::Aborted),
            EndReason::Poisoned | EndReason::Done | EndReason::Finalized => {
                (EndReason::Done, RunEnd::Finished)
            }
            EndReason::DiskBudget => stopped(
                format!("{agent}'s step passed the run's disk budget"),
                "look at the patch, then free space and raise --disk-budget".to_string(),
                Stop::Limit,
            ),
            EndReason::Looping => {
                stopped(format!("{agent} repeated itself"), go_on, Stop::Unfinished)
            }
            EndReason::ToolLimit | EndReason::Stopped | EndReason::Failed => stopped(
                format!("{agent}'s model stopped before ending its turn"),
                go_on,
                Stop::Unfinished,
            ),
        },
    }
}

/// The front-end as the org of run `run` sees it.
struct Adapter<'a> {
    front: &'a mut dyn Front,
    run: String,
    /// The command that answers a question after the run.
    answer_later: String,
}

#[async_trait::async_trait(?Send)]
impl OrgFront for Adapter<'_> {
    fn show(&mut self, agent: Option<&str>, event: &Event) {
        self.front.show(&RunEvent {
            run: &self.run,
            agent,
            event,
        });
    }

    async fn ask_user(&mut self, agent: &str, question: &str) -> Option<String> {
        self.front
            .ask_user(agent, question, &self.answer_later)
            .await
    }
}

/// The session's queue as the org's interjections: steering and follow-ups
/// alike, taken between ticks.
struct QueueInterjections<'a>(&'a SessionLock);

impl Interjections for QueueInterjections<'_> {
    fn take(&self) -> Result<Vec<Queued>, SessionError> {
        let mut taken = self.0.take(QueueKind::Steer)?;
        taken.extend(self.0.take(QueueKind::Followup)?);
        taken.sort_by_key(|message| message.id);
        Ok(taken)
    }

    fn posted(&self, ids: &[i64], root: &str) -> Result<(), SessionError> {
        self.0.delivered(ids, root)
    }
}
