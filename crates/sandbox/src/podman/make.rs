//! Making a local run's container. Where ah's agent can run, the
//! container's init is ah's own (`crate::channel::init`), which starts the
//! agent on the container's stdin and stdout: one `podman run -i` makes
//! the container and opens the command channel, with no `podman exec`
//! after it. Where that start fails (an ah that cannot run in the image,
//! say), the container is made again the slower way: catatonit pausing as
//! the init (`podman run -d`), and the agent, if any, entering with `podman
//! exec`, whose own failure the run is told of (the first failure says no
//! more than the second: an agent that cannot run, or a container that
//! cannot start).

use super::args::{self, RunSpec};
use super::channel::{Channel, OpenError};
use super::init::ExecOnly;
use super::{LOCAL_AGENT, Makers, Podman, PodmanError, create, find_init, remove_container};

/// A made and running container.
pub(super) struct Made {
    /// The execute-only copy of catatonit, where it is the init.
    pub(super) init: Option<ExecOnly>,
    /// The channel to the agent, or why there is none (`None`: no agent).
    pub(super) opened: Option<Result<Channel, OpenError>>,
}

/// Makes and starts the container `spec` describes: with ah's init when
/// `spec.attached` (its `init` is then ah's copy, as its `agent` is), else
/// with the catatonit at `spec.init`.
pub(super) async fn make(
    podman: &Podman,
    spec: &RunSpec<'_>,
    makers: &Makers,
) -> Result<Made, PodmanError> {
    if spec.attached {
        if let Some(channel) = Channel::attach(podman, args::run_args(spec), makers).await {
            return Ok(Made {
                init: None,
                opened: Some(Ok(channel)),
            });
        }
        // Made or half made: it goes before the other start.
        let _ = remove_container(podman, spec.name).await;
    }
    let init = match spec.attached {
        true => Some(copy_init(makers)?),
        false => None,
    };
    let paused = RunSpec {
        init: init.as_ref().map_or(spec.init, ExecOnly::path),
        attached: false,
        ..spec.clone()
    };
    create(podman, &paused, makers).await?;
    let opened = match spec.agent {
        Some(_) => Some(Channel::open(podman, spec.name, &LOCAL_AGENT).await),
        None => None,
    };
    Ok(Made { init, opened })
}

/// The execute-only copy of the host's catatonit (see `init`).
pub(super) fn copy_init(makers: &Makers) -> Result<ExecOnly, PodmanError> {
    ExecOnly::copy(
        &find_init().ok_or(PodmanError::InitMissing)?,
        "ah-init",
        makers,
    )
    .map_err(|source| PodmanError::Io {
        what: "make the execute-only copy of the init",
        source,
    })
}
