//! The run's limits: planned before its sandbox starts (what the host's
//! cgroups will give the container, and what stands in where they give
//! nothing; see `ah_sandbox::limits`), refused up front under
//! `--strict-limits` when one cannot be enforced by a cgroup, and corrected
//! by what the container really got once it runs. The start line and the
//! `limits` event say the plan; the manifest records what held.

use std::sync::{Arc, Mutex, PoisonError};

use super::RunOptions;
use crate::config::settings::SandboxSettings;
use ah_sandbox::BackendKind;
use ah_sandbox::limits::{self, Asked, Cgroups, Held, Observed, StandIns};
use ah_sandbox::podman;

/// The limits of one run, planned, and checked once the sandbox started.
#[derive(Clone)]
pub(crate) struct RunLimits {
    state: Arc<Mutex<State>>,
}

struct State {
    held: Vec<Held>,
    /// The sandbox's check found other limits than the plan.
    changed: bool,
}

/// What a `--backend none` run asks: the sandbox's defaults are limits for
/// a sandbox, and a run that has none asked for nothing unless the command
/// line or a configuration file named a limit of its own (then it is said,
/// and `--strict-limits` refuses, that it cannot hold on the host).
fn asked_on_host(args: &RunOptions, asked: Asked) -> Asked {
    let defaults = SandboxSettings::default();
    let given = &args.given;
    Asked {
        memory: match given.memory || asked.memory != defaults.memory {
            true => asked.memory,
            false => "0".to_string(),
        },
        pids: match given.pids_limit || asked.pids != defaults.pids_limit {
            true => asked.pids,
            false => 0,
        },
        disk_budget: asked.disk_budget,
    }
}

/// `--strict-limits` and a limit that cannot be enforced here.
#[derive(Debug, thiserror::Error)]
#[error(
    "refusing to run (--strict-limits): {}; run 'ah doctor' to see how to get cgroup limits \
     here, or run without --strict-limits (and sandbox.strict_limits) to accept what stands in",
    .0.iter().map(Held::describe).collect::<Vec<_>>().join("; ")
)]
pub(crate) struct NotEnforced(pub(crate) Vec<Held>);

impl RunLimits {
    /// Plans the limits `args` ask for on this host, with what the
    /// container must be started with to stand in for missing cgroup
    /// limits. Under `--strict-limits`, a limit that would not be enforced
    /// by a cgroup (or by ah, for the disk budget) refuses the run.
    pub(crate) fn plan(args: &RunOptions) -> Result<(RunLimits, StandIns), NotEnforced> {
        let sandbox = &args.sandbox;
        let asked = Asked {
            memory: sandbox.memory.clone(),
            pids: sandbox.pids_limit,
            disk_budget: sandbox.disk_budget,
        };
        let (held, stand_ins) = match args.backend {
            BackendKind::None => (
                limits::plan_on_host(&asked_on_host(args, asked)),
                StandIns::default(),
            ),
            BackendKind::Podman => {
                let rootless = podman::rootless();
                limits::plan(&asked, Cgroups::for_containers(rootless), rootless)
            }
            BackendKind::PodmanRemote => {
                let engine = super::lifecycle::connection(args);
                (
                    limits::plan_remote(&asked, engine.name()),
                    StandIns::default(),
                )
            }
        };
        if sandbox.strict_limits {
            refuse_weaker(&held)?;
        }
        let state = State {
            held,
            changed: false,
        };
        Ok((
            RunLimits {
                state: Arc::new(Mutex::new(state)),
            },
            stand_ins,
        ))
    }

    /// The limits as they stand, and whether the sandbox's check changed
    /// them from the plan.
    pub(crate) fn held(&self) -> (Vec<Held>, bool) {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        (state.held.clone(), state.changed)
    }

    /// Corrects the plan with what the container got; under
    /// `--strict-limits`, a limit that turned out not to hold as asked is
    /// the start's error.
    pub(crate) fn check(&self, seen: &Observed, strict: bool) -> Result<(), NotEnforced> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let checked = limits::check(&state.held, seen);
        state.changed = checked != state.held;
        state.held = checked;
        if strict {
            refuse_weaker(&state.held)?;
        }
        Ok(())
    }
}

fn refuse_weaker(held: &[Held]) -> Result<(), NotEnforced> {
    let weaker: Vec<Held> = held.iter().filter(|l| !l.as_asked()).cloned().collect();
    match weaker.is_empty() {
        true => Ok(()),
        false => Err(NotEnforced(weaker)),
    }
}
