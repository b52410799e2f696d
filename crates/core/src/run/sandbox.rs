//! Settings of the sandbox and the tools taken from the command line, and
//! the podman checks made before a run copies anything.

use anyhow::{Context, Result, bail};

use super::{Front, OutputLimit, SandboxOptions, UlimitKind};
use ah_sandbox::{image, podman};
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

/// Before anything is copied: podman must be there (never a silent fallback
/// to no sandbox), containers left by a crashed run are removed, and a missing
/// image is built, with progress, as `ah image build` would.
pub(crate) async fn podman_preflight(image_name: &str, front: &mut dyn Front) -> Result<()> {
    podman::find_podman().map_err(|err| {
        anyhow::anyhow!("{err}\nrun `ah doctor` for details, or pass --backend none to run tools unsandboxed on a copy")
    })?;
    // Leftovers of crashed runs are removed; failing to do so is worth a
    // warning, not a refusal to run.
    let removed = podman::cleanup_stale().await.unwrap_or_else(|err| {
        front.notice(&format!(
            "warning: could not remove containers left by crashed runs: {err}"
        ));
        Vec::new()
    });
    if !removed.is_empty() {
        front.notice(&format!(
            "removed {} container(s) left by an earlier run that did not finish",
            removed.len()
        ));
    }
    if !image::image_exists(image_name).await? {
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
    }
    Ok(())
}
