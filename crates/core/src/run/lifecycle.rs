//! The two ends of every run: starting it (run directory, work copy,
//! baseline, the sandbox's start in the background) and ending it (patch,
//! manifest, egress report, review, the run's end event). Once the engine
//! has run, the patch is always saved and the manifest written, whatever
//! happens after; a run whose sandbox cannot start is taken back out of its
//! session instead (see [`SessionRollback`]).
//!
//! The end does not wait for the sandbox: a start still under way is
//! abandoned (the run never needed it), and the container and the work
//! copy are handed to a cleanup of their own that outlives ah
//! (`ah_sandbox::cleanup`), before the review (`[sandbox] cleanup = "wait"`
//! keeps the old way: wait for the start, remove, then review). That
//! cleanup then sweeps what killed runs of the project left.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use ah_base::count;
use anyhow::Result;

use super::limits::{NotEnforced, RunLimits};
use super::network;
use super::queue::dropped_lines;
use super::review::{self, Decided, Review, Reviewed};
use super::sandbox::{configure_sandbox, output_limits};
use super::settle::RunSetup;
use super::{Front, Outcome, ReviewMode, RunEnd, RunOptions, Stop};
use crate::agent::prompt::Workspace;
use crate::agent::{EndReason, Event, record_event, set_state};
use crate::cost::{Cost, Prices};
use crate::event::RunEvent;
use crate::event::SessionState;
use crate::org::schedule::{ROSTER_KEY, STATE_KEY};
use crate::time_travel::files::{self as time_travel, Origin};
use ah_record::artifacts::SkipReason;
use ah_record::patch::PatchInfo;
use ah_record::run::{Run, RunResult, Start};
use ah_record::rundir::{
    CheckRecord, LiveLock, Manifest, RestoredFrom, ReviewDecision, ReviewRecord, ReviseRound,
    RunDir,
};
use ah_record::safe_text::{name_safe, terminal_safe};
use ah_record::snapshot::{BaselineSnapshot, Commit};
use ah_sandbox::cleanup::{Cleanup, Remains};
use ah_sandbox::disk::DiskBudget;
use ah_sandbox::limits::StandIns;
use ah_sandbox::none::NoneBackend;
use ah_sandbox::none::holder::Holder;
use ah_sandbox::starting::{StartError, Starting};
use ah_sandbox::{Backend, BackendKind, podman};
use ah_session::queue::SessionLock;
use ah_session::{Session, Tokens, WORKSPACE_AT_KEY, total_usage};

/// A run that has started, and what the end of the run needs of its start.
pub(crate) struct Started {
    pub(crate) run: Run,
    /// Where the files came from.
    pub(crate) origin: Origin,
    /// Held while the run is live, so `ah runs prune` leaves it alone.
    pub(crate) live: LiveLock,
    /// The run's containers, starting in the background.
    pub(crate) sandbox: SandboxStart,
}

/// Makes the run directory, prepares the work copy and the baseline (the
/// project's files, or those of the session's fork point: see
/// `time_travel`) and starts the sandbox in the background: the model is
/// asked while the container starts, and the run's first command waits for
/// it (see [`SandboxStart`]). Every engine's run has the one sandbox: a
/// step whose rules make `/work` read-only (`ah work`'s plan and check)
/// runs there too, and is undone when it changes anything (`ah_record::run`).
pub(crate) fn start_run(
    args: &RunOptions,
    setup: &RunSetup,
    session: &Session,
    front: &mut dyn Front,
) -> Result<Started> {
    let id = setup
        .run_id
        .parse()
        .map_err(|_| anyhow::anyhow!("the run id {} is not one", setup.run_id))?;
    let (limits, stand_ins) = RunLimits::plan(args)?;
    let dir = RunDir::create_as(&setup.ah_dir, id)?;
    let live = dir.hold_live()?;
    // A remote engine's run keeps its mirror of /work as a none run keeps
    // its work folder.
    let holder = match args.backend {
        BackendKind::None | BackendKind::PodmanRemote => Some(none_holder(&setup.project, &dir)),
        BackendKind::Podman => None,
    };
    let copying = match &holder {
        Some(Err(why)) => format!("; copying the project: {}", terminal_safe(why)),
        _ => String::new(),
    };
    front.notice(&format!(
        "run {} ({} backend, {}{copying})",
        dir.id(),
        args.backend.as_str(),
        setup.models_shown()
    ));
    let planned = Event::Limits {
        checked: false,
        limits: limits.held().0,
    };
    announce(session, front, &setup.run_id, planned);
    let holder = holder.and_then(Result::ok);
    let overlay = holder.is_some() || use_overlay(args, &setup.project, &dir, front);
    let (start, origin) = time_travel::prepare_files(
        session,
        args.no_restore,
        &setup.project,
        &setup.ah_dir,
        &dir,
        &setup.policy,
        overlay,
        front,
    )?;
    if !start.withheld.is_empty() {
        let list = crate::agent::prompt::withheld_list(&start.withheld);
        front.notice(&format!(
            "withheld from the work copy by the read policy: {}",
            terminal_safe(&list)
        ));
    }
    if let Some(why) = start.late.as_ref().and_then(|late| late.blind()) {
        front.notice(&format!(
            "warning: {}; each step reads the whole project to keep new secret files out of \
             the sandbox (slower)",
            terminal_safe(why)
        ));
    }
    let notices = Notices::default();
    let work_copy = |holder: Option<Holder>| -> Result<NoneBackend> {
        Ok(match (holder, &start.overlay) {
            (Some(holder), Some(overlay)) => {
                let namespace = holder.mount().map_err(|why| {
                    anyhow::anyhow!(
                        "{why} (a probe mount had worked); run again, or use --backend podman"
                    )
                })?;
                NoneBackend::over(dir.work_dir(), namespace, overlay.dirs.clone())
            }
            _ => NoneBackend::new(dir.work_dir()),
        })
    };
    let (backend, sandbox): (Box<dyn Backend>, _) = match args.backend {
        BackendKind::None => {
            let backend = work_copy(holder)?;
            (
                Box::new(backend) as Box<dyn Backend>,
                SandboxStart {
                    main: None,
                    notices,
                    limits,
                },
            )
        }
        BackendKind::Podman | BackendKind::PodmanRemote => {
            let how = Confinement {
                limits: &limits,
                stand_ins,
                notices: &notices,
            };
            let remote = match args.backend {
                BackendKind::PodmanRemote => Some(podman::remote::RemoteOptions {
                    connection: connection(args),
                    mirror: work_copy(holder)?,
                    snapshot: Arc::new(BaselineSnapshot::new(
                        start.shadow.git_dir(),
                        match &start.taking {
                            Some(taking) => Commit::Taking(taking.clone()),
                            None => Commit::Taken(start.baseline),
                        },
                    )),
                }),
                _ => None,
            };
            let main = start_podman(args, setup, &dir, &start, &how, remote, front)?;
            let sandbox = SandboxStart {
                main: Some(main.clone()),
                notices,
                limits,
            };
            (Box::new(main), sandbox)
        }
    };
    let mut run = Run::attach(
        dir,
        start,
        backend,
        setup.policy.clone(),
        args.max_artifact_size.saturating_mul(1024 * 1024),
    );
    run.set_output_limits(output_limits(&args.output_limits));
    if let Some(max_bytes) = args.sandbox.disk_budget {
        run.set_disk_budget(DiskBudget {
            max_bytes,
            ..DiskBudget::default()
        });
    }
    run.set_bash_timeout(args.bash_timeout.unwrap_or(ah_tools::bash::DEFAULT_TIMEOUT));
    run.set_cleanup(args.sandbox.cleanup);
    Ok(Started {
        run,
        origin,
        live,
        sandbox,
    })
}

/// What the run's container is confined by besides its options: the
/// limits planned for it and what stands in for missing cgroup limits,
/// and where its start leaves what it has to say.
struct Confinement<'a> {
    limits: &'a RunLimits,
    stand_ins: StandIns,
    notices: &'a Notices,
}

/// Configures the run's container (its network notes go to `front` now)
/// and starts it in the background. Its start counts into `notices` the
/// containers of crashed runs it removed, and checks the limits its init
/// got.
fn start_podman(
    args: &RunOptions,
    setup: &RunSetup,
    dir: &RunDir,
    start: &Start,
    how: &Confinement<'_>,
    remote: Option<podman::remote::RemoteOptions>,
    front: &mut dyn Front,
) -> Result<Starting> {
    let name = dir.id().to_string();
    let kind = args.backend;
    let mut options = match &start.overlay {
        // A remote engine's /work is the baseline it was sent.
        _ if remote.is_some() => podman::PodmanOptions::new(&name, &dir.work_dir()),
        Some(overlay) => {
            let mut options = podman::PodmanOptions::new(&name, &overlay.project);
            options.overlay = Some(overlay.dirs.clone());
            options.network_log = dir.path().join("network.log");
            options
        }
        None => podman::PodmanOptions::new(&name, &dir.work_dir()),
    };
    options.image = setup.image.clone();
    configure_sandbox(&mut options, &args.sandbox);
    options.stand_ins = how.stand_ins;
    options.remote = remote;
    network::configure_network(&mut options, &args.sandbox, &setup.policy, dir, front)?;
    // Said before anything starts (the start would refuse it too, but a
    // run that needs no command never waits for its start).
    if options.remote.is_some() && options.network == ah_sandbox::egress::NetworkMode::Proxy {
        anyhow::bail!(podman::remote::PROXY_REFUSED);
    }
    let notices = how.notices.clone();
    let limits = how.limits.clone();
    let strict = args.sandbox.strict_limits;
    // The container's start is over once the baseline is taken too: a
    // baseline that cannot be taken fails the start, and the first command
    // waits for both.
    let taking = start.taking.clone();
    let leaving = (options.remains(), options.makers.clone());
    let starting = Starting::spawn(kind, async move {
        let baseline = async move {
            let Some(taking) = taking else {
                return Ok(());
            };
            tokio::task::spawn_blocking(move || taking.wait())
                .await
                .unwrap_or_else(|e| Err(e.to_string()))
        };
        let (backend, baseline) = tokio::join!(podman::PodmanBackend::start(&options), baseline);
        let backend = backend?;
        if let Err(why) = baseline {
            backend.shutdown().await.ok();
            return Err(StartFailure::Baseline(why));
        }
        if let Some(seen) = backend.observed_limits()
            && let Err(refused) = limits.check(&seen, strict)
        {
            backend.shutdown().await.ok();
            return Err(StartFailure::Limits(refused));
        }
        let removed = backend.removed_stale().len();
        notices.add(
            backend
                .notes()
                .into_iter()
                .map(|note| format!("note: {note}")),
        );
        if removed > 0 {
            notices.add([format!(
                "removed {} left by an earlier run that did not finish",
                count(removed, "container", "containers")
            )]);
        }
        Ok::<_, StartFailure>(backend)
    });
    Ok(starting.leaving(leaving.0, leaving.1))
}

/// Why the container's start failed.
#[derive(Debug, thiserror::Error)]
enum StartFailure {
    #[error(transparent)]
    Podman(#[from] podman::PodmanError),
    #[error("could not read the project's files for the run's baseline: {0}")]
    Baseline(String),
    #[error(transparent)]
    Limits(#[from] NotEnforced),
}

/// What the starts in the background have to say (a fallback, containers
/// of crashed runs they removed), said once the run has waited for them.
#[derive(Clone, Default)]
pub(crate) struct Notices(Arc<Mutex<Vec<String>>>);

impl Notices {
    fn add(&self, notices: impl IntoIterator<Item = String>) {
        let mut held = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        held.extend(notices);
    }

    fn take(&self) -> Vec<String> {
        let mut held = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        std::mem::take(&mut *held)
    }
}

/// The run's container while it starts: the run stops if it fails
/// ([`SandboxStart::failed`]), and learns how the start ended before it
/// finishes ([`SandboxStart::settled`]). No container for the none
/// backend; its limits for every backend.
pub(crate) struct SandboxStart {
    main: Option<Starting>,
    notices: Notices,
    /// Planned at the start, checked by the container's.
    pub(crate) limits: RunLimits,
}

impl SandboxStart {
    /// Completes only if the container fails to start, with its error.
    pub(crate) async fn failed(&self) -> StartError {
        match &self.main {
            Some(start) => start.failed().await,
            None => std::future::pending().await,
        }
    }

    /// How the start ended: its error, if it failed. What it had to say
    /// goes to `front`. A start still under way is waited for only under
    /// [`Cleanup::Wait`]: the run did not need it, and its end abandons it
    /// (see `Starting::leaving`).
    pub(crate) async fn settled(
        &self,
        front: &mut dyn Front,
        cleanup: Cleanup,
    ) -> Result<(), StartError> {
        if let Some(start) = &self.main {
            match (start.ended(), cleanup) {
                (Some(ended), _) => ended?,
                (None, Cleanup::Wait) => drop(start.ready().await?),
                (None, Cleanup::Detached) => {}
            }
        }
        for notice in self.notices.take() {
            front.notice(&notice);
        }
        Ok(())
    }

    /// Removes whatever the start made, once it is over (for a run that
    /// ends without finishing: its sandbox failed, or it could not begin).
    pub(crate) async fn shutdown(&self, front: &mut dyn Front) {
        if let Some(start) = &self.main
            && let Err(err) = start.shutdown().await
        {
            front.notice(&format!("warning: the sandbox could not be removed: {err}"));
        }
    }
}

/// The session as it was before the run wrote to it. A run whose sandbox
/// cannot start is taken back out, as if it had never begun (as it never
/// did when the sandbox started before the model was asked): its messages
/// go, the model's answers among them, the head goes back and a fork point
/// (`workspace_at`) stays for the next attempt.
pub(crate) struct SessionRollback {
    /// The session's last `@N` before the run.
    pub(crate) seq: i64,
    head: Option<String>,
    /// The context values a run changes besides the head: the fork point,
    /// and an org's state and roster.
    context: Vec<(&'static str, Option<String>)>,
    /// The newest letter of an org's inboxes.
    mail: i64,
}

/// The context keys [`SessionRollback`] puts back.
const RUN_CONTEXT: [&str; 3] = [WORKSPACE_AT_KEY, STATE_KEY, ROSTER_KEY];

impl SessionRollback {
    pub(crate) fn of(session: &Session) -> Result<SessionRollback> {
        let context = RUN_CONTEXT
            .into_iter()
            .map(|key| Ok((key, session.context(key)?)))
            .collect::<Result<_>>()?;
        Ok(SessionRollback {
            seq: session.last_seq()?,
            head: session.head()?,
            context,
            mail: session.last_mail_id()?,
        })
    }

    /// Removes what the run added (messages, letters) and puts the head,
    /// the fork point and an org's state back.
    pub(crate) fn restore(&self, session: &mut Session) -> Result<()> {
        let last = session.last_seq()?;
        for seq in self.seq + 1..=last {
            // A message of the run still there is the first of a branch.
            if let Some(message) = session.message_at(seq)? {
                session.remove_branch(&message.id, true)?;
            }
        }
        session.remove_mail_after(self.mail)?;
        if let Some(head) = &self.head {
            session.set_head(head)?;
        }
        for (key, value) in &self.context {
            match value {
                Some(value) => session.set_context(key, value)?,
                None => session.remove_context(key)?,
            }
        }
        Ok(())
    }
}

/// The none backend's namespace holder, probed (see
/// `ah_sandbox::none::holder`), or why the run copies the project instead.
fn none_holder(project: &Path, dir: &RunDir) -> Result<Holder, String> {
    let dirs = podman::OverlayDirs {
        upper: dir.upper_dir(),
        work: dir.overlay_scratch_dir(),
    };
    Holder::probe(project, &dirs, &dir.work_dir(), &dir.path().join("probe"))
}

/// Whether a podman run's `/work` is an overlay of the project rather than
/// a copy. Where podman cannot mount the project or the run directory, the
/// run copies, and says so.
fn use_overlay(args: &RunOptions, project: &Path, dir: &RunDir, front: &mut dyn Front) -> bool {
    if args.backend != BackendKind::Podman {
        return false;
    }
    let paths = [project.to_path_buf(), dir.path().to_path_buf()];
    if let Some(bad) = paths.iter().find(|p| !podman::can_mount(p)) {
        front.notice(&format!(
            "copying the project into the sandbox: podman cannot mount {} as an overlay \
             (a path with ':' or ','), which would spare the copy",
            terminal_safe(&bad.display().to_string())
        ));
        return false;
    }
    true
}

/// Where the model's commands run, as its prompt tells it.
pub(crate) fn workspace_of(backend: BackendKind) -> Workspace {
    match backend {
        BackendKind::Podman | BackendKind::PodmanRemote => Workspace::Container,
        BackendKind::None => Workspace::Host,
    }
}

/// The remote engine a run's options name: `--connection` (or the user's
/// `sandbox.connection`), else `CONTAINER_HOST`, else podman's default.
pub(crate) fn connection(args: &RunOptions) -> podman::Connection {
    podman::Connection::choose(
        args.sandbox.connection.as_deref(),
        std::env::var("CONTAINER_HOST").ok().as_deref(),
    )
}

/// What the end of a run needs to know of its start.
pub(crate) struct Ending<'a> {
    pub(crate) options: &'a RunOptions,
    pub(crate) setup: &'a RunSetup,
    pub(crate) started_at: SystemTime,
    /// The session's last `@N` before the run: the messages after it are
    /// the run's (those on `branches` when it names them).
    pub(crate) seq_before: i64,
    /// Where the run's branches of the session end, when runs of one
    /// session went on side by side, each on its own.
    pub(crate) branches: Vec<String>,
    pub(crate) restored: Option<RestoredFrom>,
    /// The run's liveness, which a detached cleanup keeps until it is done.
    pub(crate) live: &'a LiveLock,
    /// The run's limits as they held (see `run::limits`).
    pub(crate) limits: RunLimits,
    /// The choice of the review held before the run's end, if one was.
    pub(crate) decided: Option<Decided>,
    /// The rounds that sent the model back to work.
    pub(crate) rounds: Vec<ReviseRound>,
    /// The check an attempt was judged by, when one ran.
    pub(crate) check: Option<CheckRecord>,
}

/// How a run ended, with its patch, for whoever compares runs (the
/// attempts of a task).
pub(crate) struct Finished {
    pub(crate) outcome: Outcome,
    pub(crate) patch: PatchInfo,
    pub(crate) patch_path: PathBuf,
    /// Why the patch must never be applied, when it must not.
    pub(crate) poisoned: Option<String>,
    /// The shadow repo's last commit.
    pub(crate) head: String,
}

/// Builds and saves the patch, writes the manifest, and reviews the patch
/// when the run `Finished`; returns how the run ended.
pub(crate) async fn finish_run(
    run: Run,
    end: RunEnd,
    ending: &Ending<'_>,
    session: &Session,
    front: &mut dyn Front,
) -> Result<Finished> {
    let Ending {
        options: args,
        setup,
        started_at,
        seq_before,
        branches,
        ..
    } = ending;
    let review_mode = setup.review_mode;
    let run_dir = run.dir().clone();
    let run_id = setup.run_id.as_str();
    let mut result = run.finish().await?;
    if let Some(remains) = result.remains.take() {
        clean_up(remains, (ending.live, &setup.ah_dir), &run_dir, front).await;
    }
    for decision in &result.egress {
        announce(
            session,
            front,
            run_id,
            Event::egress(result.steps, decision),
        );
    }
    let (limits, changed) = ending.limits.held();
    if changed {
        let checked = Event::Limits {
            checked: true,
            limits: limits.clone(),
        };
        announce(session, front, run_id, checked);
    }
    let mut manifest = start_manifest(ending, session, &run_dir, &result);
    manifest.limits = limits;
    manifest.check = ending.check.clone();
    for warning in &result.warnings {
        front.notice(&format!("warning: {}", terminal_safe(warning)));
    }
    if let Some(line) = left_out_line(&result, &run_dir.artifacts_dir()) {
        front.notice(&line);
    }
    if let Some(line) = not_kept_line(&result, &run_dir.artifacts_dir()) {
        front.notice(&line);
    }
    if let Some(why) = &result.patch_not_saved {
        front.notice(&format!(
            "{} was not saved: {why}; the run's changes are in its shadow repository, and \
             `git --git-dir {} diff --binary --full-index {} {}` prints the patch",
            result.patch_path.display(),
            run_dir.shadow_dir().display(),
            result.baseline,
            result.head
        ));
    }
    manifest.save(&run_dir.manifest_path())?;
    // A finished run whose patch did not fit has nothing to review: it
    // stopped at a limit.
    let end = match (&result.patch_not_saved, end) {
        (Some(_), RunEnd::Finished) => RunEnd::Stopped {
            why: "the writes at the run's end would pass its disk budget".to_string(),
            next: UNSAVED_NEXT.to_string(),
            stop: Stop::Limit,
        },
        (_, end) => end,
    };

    let not_applied = |decision: ReviewDecision, why: String| ReviewRecord {
        mode: review_mode,
        decision,
        reason: Some(why),
        rounds: ending.rounds.clone(),
        hunks: Vec::new(),
    };
    // The end line, and its event for `--json`.
    let prices = Prices::new(&args.config.prices);
    let run_end = |front: &mut dyn Front, decision: &str| {
        let own = match branches.as_slice() {
            [] => session.usage_after(*seq_before),
            heads => session.usage_on_branches(heads, *seq_before),
        };
        let (usage, cost) = match own {
            Ok(rows) => (total_usage(&rows), prices.cost(&rows)),
            Err(err) => {
                front.notice(&format!(
                    "warning: cannot read the run's token usage: {err}"
                ));
                (Tokens::default(), Cost::default())
            }
        };
        let event = Event::RunEnd {
            duration_ms: started_at.elapsed().unwrap_or_default().as_millis() as u64,
            usage,
            cost_usd: cost.total_usd(),
            unpriced: cost.unpriced,
            steps: result.steps,
            violations: result.violations.len(),
            files: result.patch.files.len(),
            added: result.patch.added_lines,
            removed: result.patch.removed_lines,
            decision: decision.to_string(),
        };
        announce(session, front, run_id, event);
    };
    match end {
        RunEnd::Failed(err) => {
            front.notice(&format!("patch so far {}", patch_place(&result)));
            run_end(front, "none (the run failed)");
            Err(err)
        }
        RunEnd::Aborted => {
            front.notice(&format!("aborted; patch so far {}", patch_place(&result)));
            let record = not_applied(
                ReviewDecision::Aborted,
                "the run was interrupted".to_string(),
            );
            announce(
                session,
                front,
                run_id,
                review_event(&result, &record, false),
            );
            manifest.review = Some(record);
            manifest.save(&run_dir.manifest_path())?;
            run_end(front, ReviewDecision::Aborted.as_str());
            Ok(finished(Outcome::Aborted, result))
        }
        RunEnd::Stopped { why, next, stop } => {
            // Not offered for applying: the patch is kept for `ah apply`
            // after a look.
            front.notice(&match &result.patch_not_saved {
                None => format!(
                    "stopped: {why}; the patch so far is saved, not applied: {}\n\
                     look at it and apply it with `ah apply {}`, or {next}",
                    result.patch_path.display(),
                    run_dir.id()
                ),
                // Only the disk budget keeps a patch from being saved: what
                // to do is the same whatever stopped the run.
                Some(_) => {
                    format!("stopped: {why}; its patch was not saved (see above): {UNSAVED_NEXT}")
                }
            });
            let record = not_applied(ReviewDecision::Stopped, why);
            announce(
                session,
                front,
                run_id,
                review_event(&result, &record, false),
            );
            run_end(front, ReviewDecision::Stopped.as_str());
            manifest.review = Some(record);
            manifest.finished_at = Some(ah_base::format_rfc3339(SystemTime::now()));
            manifest.save(&run_dir.manifest_path())?;
            Ok(finished(Outcome::Stopped(stop), result))
        }
        RunEnd::Finished => {
            let request = Review {
                mode: review_mode,
                project: &setup.project,
                patch: &result.patch,
                patch_path: &result.patch_path,
                poisoned: result.poisoned.as_deref(),
                policy: &setup.policy,
                task: &setup.task,
                no_commit: args.no_commit,
                head: &result.head,
                decided: ending.decided.as_ref(),
                rounds: &ending.rounds,
                pager: setup.pager.as_deref(),
            };
            let reviewed = review::review(&request, front)?;
            announce(
                session,
                front,
                run_id,
                review_event(&result, &reviewed.record, reviewed.applied),
            );
            manifest.review = Some(reviewed.record.clone());
            manifest.applied = reviewed.applied;
            manifest.finished_at = Some(ah_base::format_rfc3339(SystemTime::now()));
            manifest.save(&run_dir.manifest_path())?;
            run_end(front, reviewed.record.decision.as_str());
            let outcome = outcome(review_mode, &result, &reviewed);
            Ok(finished(outcome, result))
        }
    }
}

/// Hands what the sandbox left to a cleanup of its own, which goes on
/// after ah exits (keeping the run live meanwhile, and noting what it could
/// not remove in the run's `cleanup.log`); where none can start (the
/// running program is not ah), removes it here.
async fn clean_up(
    remains: Remains,
    (live, ah_dir): (&LiveLock, &Path),
    dir: &RunDir,
    front: &mut dyn Front,
) {
    let log = dir.path().join("cleanup.log");
    let left = match live.share() {
        Ok(held) => match remains.detach(held, &log, ah_dir) {
            Ok(()) => return,
            Err((remains, _)) => remains,
        },
        Err(_) => remains,
    };
    if let Err(failed) = left.remove().await {
        for why in failed {
            front.notice(&format!(
                "warning: the sandbox's cleanup could not remove {}",
                terminal_safe(&why)
            ));
        }
    }
}

/// Shows an event of the run's end and keeps it in the session's event log
/// (a failed insert only loses the log entry; the manifest has the facts).
fn announce(session: &Session, front: &mut dyn Front, run: &str, event: Event) {
    record_event(session, None, &event);
    front.show(&RunEvent::of(run, &event));
}

/// The event that tells consumers what became of the patch.
fn review_event(result: &RunResult, record: &ReviewRecord, applied: bool) -> Event {
    review_done(&result.patch_path, &result.patch, record, applied)
}

/// The `review_done` event of the patch at `patch_path`.
pub(crate) fn review_done(
    patch_path: &Path,
    patch: &PatchInfo,
    record: &ReviewRecord,
    applied: bool,
) -> Event {
    Event::ReviewDone {
        patch: patch_path.display().to_string(),
        files: patch.files.len(),
        added: patch.added_lines,
        removed: patch.removed_lines,
        left_out: patch.left_out.len(),
        mode: record.mode.as_str().to_string(),
        decision: record.decision.as_str().to_string(),
        reason: record.reason.clone(),
        applied,
        rounds: record.rounds.clone(),
        hunks: record.hunks.clone(),
    }
}

fn finished(outcome: Outcome, result: RunResult) -> Finished {
    Finished {
        outcome,
        patch: result.patch,
        patch_path: result.patch_path,
        poisoned: result.poisoned,
        head: result.head,
    }
}

fn outcome(mode: ReviewMode, result: &RunResult, reviewed: &Reviewed) -> Outcome {
    if reviewed.failed {
        Outcome::Failed
    } else if mode != ReviewMode::Never && !result.patch.files.is_empty() && !reviewed.applied {
        Outcome::NotApplied
    } else {
        Outcome::Done
    }
}

/// How many build and cache outputs the patch leaves out, and where they
/// are, when it leaves any out.
fn left_out_line(result: &RunResult, artifacts: &Path) -> Option<String> {
    let count = result.patch.left_out.len();
    let files = match count {
        0 => return None,
        1 => "1 build/cache file".to_string(),
        n => format!("{n} build/cache files"),
    };
    let copied = result
        .patch
        .left_out
        .iter()
        .filter(|path| result.artifacts.copied.iter().any(|c| &c.path == *path))
        .count();
    let kept = match copied {
        n if n == count => format!("kept in {}", artifacts.display()),
        n => format!(
            "{n} of them kept in {}; manifest.json lists them all",
            artifacts.display()
        ),
    };
    Some(format!("{files} left out of the patch ({kept})"))
}

/// What to do when a run's patch was not saved (it would have passed the
/// disk budget).
const UNSAVED_NEXT: &str = "free space or raise --disk-budget, then go on with `ah`";

/// Where the patch is, for the lines that end a run.
fn patch_place(result: &RunResult) -> String {
    match &result.patch_not_saved {
        None => format!("saved: {}", result.patch_path.display()),
        Some(_) => "not saved (see above)".to_string(),
    }
}

/// The run's new files the disk budget kept from `artifacts`, named (the
/// first few), when there are any.
fn not_kept_line(result: &RunResult, artifacts: &Path) -> Option<String> {
    let over: Vec<&str> = result
        .artifacts
        .skipped
        .iter()
        .filter(|skip| matches!(skip.reason, SkipReason::OverBudget { .. }))
        .map(|skip| skip.path.as_str())
        .collect();
    if over.is_empty() {
        return None;
    }
    let new = result.artifacts.copied.len() + result.artifacts.skipped.len();
    let mut named: Vec<String> = over
        .iter()
        .take(NAMED)
        .map(|path| name_safe(path).into_owned())
        .collect();
    if over.len() > NAMED {
        named.push(format!("and {} more", over.len() - NAMED));
    }
    Some(format!(
        "{} of the run's {} {} not kept in {}: {} would pass the run's disk budget ({}); \
         manifest.json lists {}",
        over.len(),
        count(new, "new file", "new files"),
        if over.len() == 1 { "was" } else { "were" },
        artifacts.display(),
        if over.len() == 1 { "it" } else { "they" },
        named.join(", "),
        if over.len() == 1 { "it" } else { "them" },
    ))
}

/// How many files a line names before it counts the rest.
const NAMED: usize = 5;

/// The manifest of a finished run, before its review.
fn start_manifest(
    ending: &Ending<'_>,
    session: &Session,
    run_dir: &RunDir,
    result: &RunResult,
) -> Manifest {
    let Ending {
        options,
        setup,
        started_at,
        restored,
        ..
    } = ending;
    let mut manifest = Manifest::new(
        &run_dir.id().to_string(),
        &setup.task,
        &setup.models(),
        options.backend.as_str(),
    );
    let sandboxed = options.backend.is_podman();
    manifest.image = sandboxed.then(|| setup.image.clone());
    let network = options.sandbox.network.unwrap_or_default();
    manifest.network = sandboxed.then(|| network.as_str().to_string());
    manifest.session_db = Some(session.path().display().to_string());
    manifest.restored_from = restored.clone();
    manifest.started_at = ah_base::format_rfc3339(*started_at);
    fill_manifest(&mut manifest, result);
    manifest
}

fn fill_manifest(manifest: &mut Manifest, result: &RunResult) {
    manifest.baseline = Some(result.baseline.clone());
    manifest.head = Some(result.head.clone());
    manifest.withheld = result.withheld.clone();
    manifest.steps = result.steps;
    manifest.violations = result.violations.clone();
    manifest.patch = result
        .patch_not_saved
        .is_none()
        .then(|| result.patch.summary());
    if result.patch_not_saved.is_none() {
        manifest.files = result.patch.files.clone();
    }
    manifest.patch_not_saved = result.patch_not_saved.clone();
    manifest.artifacts_skipped = result.artifacts.skipped.clone();
    manifest.warnings = result.warnings.clone();
    manifest.poisoned = result.poisoned.clone();
    manifest.left_out = result.patch.left_out.clone();
    manifest.traffic = result.traffic;
    manifest.artifacts = result
        .artifacts
        .copied
        .iter()
        .map(|c| c.path.clone())
        .collect();
}

/// The agent's part of the run is over: the session takes no more steering
/// or follow-ups (what could not be delivered is reported) and is idle.
pub(crate) fn close_intake(
    session: &Session,
    lock: &SessionLock,
    outcome: EndReason,
    (front, runs): (&mut dyn Front, &[&str]),
) -> Result<()> {
    let head = session.head().ok().flatten();
    match lock.close(head.as_deref(), outcome.as_str()) {
        Ok(dropped) => dropped_lines(&dropped).for_each(|line| front.notice(&line)),
        Err(err) => front.notice(&format!(
            "warning: could not close the session queue: {err}"
        )),
    }
    let idle = set_state(session, SessionState::Idle)?;
    for run in runs {
        front.show(&RunEvent::of(run, &idle));
    }
    Ok(())
}

/// Whatever happened, no process works on the session any more: its state
/// says closed and its lock is released.
pub(crate) fn leave_session(
    session: &Session,
    lock: &SessionLock,
    front: &mut dyn Front,
    runs: &[&str],
) {
    if let Ok(event) = set_state(session, SessionState::Closed) {
        for run in runs {
            front.show(&RunEvent::of(run, &event));
        }
    }
    match lock.release() {
        Ok(dropped) => dropped_lines(&dropped).for_each(|line| front.notice(&line)),
        Err(err) => front.notice(&format!(
            "warning: could not release the session lock: {err}"
        )),
    }
}
