//! Settings of the sandbox and the tools taken from the command line, and
//! the podman checks made before a run copies anything (while the rest of
//! the run is settled).

use anyhow::{Context, Result, bail};

use tokio::task::JoinHandle;

use super::{Front, OutputLimit, SandboxOptions, UlimitKind};
use ah_sandbox::image::{self, ImageError};
use ah_sandbox::podman;
use ah_tools::OutputLimits;

/// The output caps, defaults overridden by `--output-limit`.
pub(crate) fn output_limits(flags: &[(OutputLimit, usize)]) -> OutputLimits {
    let mut limits = OutputLimits::default();
    for (which, value) in flags {
        let slot = match which {
            OutputLimit::Read => &mut limits.read,
            OutputLimit::Bash => &mut limits.bash,
            OutputLimit::BashLines => &mut limits.bash_lines,
            OutputLimit::Edit => &mut limits.edit,
            OutputLimit::Write => &mut limits.write,
        };
        *slot = *value;
    }
    limits
}

/// Applies the sandbox flags to the container options.
pub(crate) fn configure_sandbox(options: &mut podman::PodmanOptions, args: &SandboxOptions) {
    options.runtime = runtime(args);
    options.memory = args.memory.clone();
    options.pids_limit = args.pids_limit;
    for (kind, value) in &args.ulimits {
        match kind {
            UlimitKind::Nofile => options.ulimits.nofile = *value,
            UlimitKind::Nproc => options.ulimits.nproc = *value,
        }
    }
}

/// The runtime the flags ask for.
pub fn runtime(args: &SandboxOptions) -> podman::Runtime {
    args.runtime
        .clone()
        .map_or(podman::Runtime::Auto, podman::Runtime::Named)
}

/// The checks made before a run with podman copies anything: podman must
/// be there (never a silent fallback to no sandbox) and so must the image,
/// which is built, with progress, as `ah image build` would, when it is the
/// default one. `podman image exists` costs tens of milliseconds, so it runs
/// while the rest of the run is settled: [`ImageCheck::start`] early,
/// [`ImageCheck::finish`] once everything else is ready. (Containers left by
/// crashed runs are removed by the container's start, in the background.)
pub(crate) struct ImageCheck {
    image: String,
    /// `None` when podman is missing: [`ImageCheck::finish`] says so.
    exists: Option<JoinHandle<Result<bool, ImageError>>>,
}

impl ImageCheck {
    /// Starts looking for `image` in podman's storage.
    pub(crate) fn start(image: &str) -> ImageCheck {
        let exists = podman::find_podman().ok().map(|_| {
            let image = image.to_string();
            tokio::spawn(async move { image::image_exists(&image).await })
        });
        ImageCheck {
            image: image.to_string(),
            exists,
        }
    }

    /// Waits for the check; a missing default image is built now.
    pub(crate) async fn finish(self, front: &mut dyn Front) -> Result<()> {
        let Some(exists) = self.exists else {
            bail!(
                "{}\nrun `ah doctor` for details, or pass --backend none to run tools unsandboxed on a copy",
                podman::PodmanError::NotFound
            );
        };
        let image_name = &self.image;
        let found = exists
            .await
            .context("the check for the sandbox image stopped before it answered")??;
        if found {
            return Ok(());
        }
        if image_name != podman::DEFAULT_IMAGE {
            bail!(
                "image {image_name} not found: build or pull it with podman, or drop --image to use {}",
                podman::DEFAULT_IMAGE
            );
        }
        front.notice(&format!(
            "the sandbox image {image_name} is missing; building it now (once; `ah image build` does the same)"
        ));
        let options = image::BuildOptions::default();
        front
            .build_image(&options)
            .await
            .context("could not build the sandbox image; run `ah doctor` to see what is missing")?;
        Ok(())
    }
}
