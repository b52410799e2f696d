//! The sandbox as the commands besides a run see it: `ah doctor`'s checks
//! and verdict, `ah image build` (and the build a run asks its front-end
//! for when the image is missing), and the hidden subcommands ah runs
//! inside its own sandbox ([`helper`]).

mod helper;

use std::path::PathBuf;

use anyhow::Result;

use crate::run::{BackendKind, RunOptions, runtime};
pub use ah_sandbox::doctor::{Check, Severity};
pub use ah_sandbox::image::Sent;
use ah_sandbox::image::{self, ImageError, OnProgress};
pub use ah_sandbox::image::{BuildOptions, BuildReport, ImageSource, Phase, Progress};
pub use ah_sandbox::podman::{Connection, DEFAULT_IMAGE};
use ah_sandbox::{doctor as checks, podman};
pub use helper::{Helped, helper};

/// What `ah doctor` found.
pub struct Doctor {
    /// One check per line, in order.
    pub checks: Vec<Check>,
    /// Whether the podman backend can run here (warnings do not count).
    pub ready: bool,
}

/// `ah doctor`: checks podman, the network modes, the image (`image`, else
/// the default one) and git, with the runtime `sandbox` names; for
/// `--engine podman-remote`, the remote engine instead.
pub async fn doctor(image: Option<&str>, options: &RunOptions) -> Doctor {
    let sandbox = &options.sandbox;
    let options = checks::DoctorOptions {
        image: image.unwrap_or(podman::DEFAULT_IMAGE).to_string(),
        runtime: runtime(sandbox),
        engine: remote_engine(options),
    };
    let checks = checks::run_checks(&options).await;
    let ready = checks::backend_ready(&checks);
    Doctor { checks, ready }
}

/// The remote engine `options` name (`--engine podman-remote`), if any.
pub fn remote_engine(options: &RunOptions) -> Option<podman::Connection> {
    (options.backend == BackendKind::PodmanRemote).then(|| crate::run::connection(options))
}

/// Loads `image` (else the default one) from this machine into `engine`,
/// unless it has it already.
pub async fn send_image(
    image: Option<&str>,
    engine: &podman::Connection,
) -> Result<image::Sent, ImageError> {
    image::send_image(image.unwrap_or(podman::DEFAULT_IMAGE), engine).await
}

/// How `ah image build` builds `image` (else the default image) from
/// `source`, or from `containerfile` when one is given.
pub fn build_options(
    image: Option<&str>,
    source: ImageSource,
    containerfile: Option<PathBuf>,
) -> BuildOptions {
    BuildOptions {
        image: image.unwrap_or(podman::DEFAULT_IMAGE).to_string(),
        source,
        containerfile,
        ..BuildOptions::default()
    }
}

/// Whether `image` is there and was built from this ah's recipe (`None`:
/// it is not there); an image built from a Containerfile of the user's
/// is never this ah's recipe.
pub async fn image_is_current(image: &str) -> Result<Option<bool>, ImageError> {
    image::image_is_current(image).await
}

/// Builds the sandbox image as `options` say; `progress` sees each phase,
/// note and line of the build tools' output.
pub async fn build_image(
    options: &BuildOptions,
    progress: &mut OnProgress<'_>,
) -> Result<BuildReport, ImageError> {
    image::build_image(options, progress).await
}
