//! `ah image build --engine podman-remote`: the image built here is loaded
//! into the remote engine (`podman save` piped into `podman --remote
//! load`), unless the engine already has it (the same image id). The
//! remote side never builds: it needs no registry, no debootstrap, nothing
//! of this machine but the image's bytes.

use std::process::Stdio;

use super::ImageError;
use crate::podman::{Connection, Podman, PodmanError, rootfs};

/// What [`send_image`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    /// The engine had the image already.
    AlreadyThere,
    /// The image was loaded there.
    Loaded,
}

/// Loads `image` from this machine's podman into the engine of
/// `connection`, unless it is there already.
pub async fn send_image(image: &str, connection: &Connection) -> Result<Sent, ImageError> {
    let local = Podman::find()?;
    let remote = local.clone().remote(connection.clone());
    let here = image_id(&local, image)
        .await?
        .ok_or_else(|| PodmanError::ImageMissing {
            image: image.to_string(),
        })?;
    if image_id(&remote, image).await?.as_deref() == Some(here.as_str()) {
        return Ok(Sent::AlreadyThere);
    }
    let io = |what| move |source| ImageError::Io { what, source };
    let mut save = local
        .command()
        .args(["save", image])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(io("run podman save"))?;
    let stream: Stdio = save
        .stdout
        .take()
        .ok_or_else(|| ImageError::Io {
            what: "run podman save",
            source: std::io::Error::other("no pipe"),
        })?
        .try_into()
        .map_err(io("pass the image on"))?;
    let load = remote
        .command()
        .args(["load"])
        .stdin(stream)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    let (saved, loaded) = tokio::join!(save.wait_with_output(), load);
    let (saved, loaded) = (
        saved.map_err(io("run podman save"))?,
        loaded.map_err(io("run podman load"))?,
    );
    for (step, output) in [("podman save", &saved), ("podman --remote load", &loaded)] {
        if !output.status.success() {
            return Err(ImageError::Step {
                step,
                output: String::from_utf8_lossy(&output.stderr).trim().to_string(),
                fix: "check the connection with 'ah doctor --engine podman-remote'",
            });
        }
    }
    Ok(Sent::Loaded)
}

/// The id of `image` in `podman`'s storage, or `None` when it is not there.
async fn image_id(podman: &Podman, image: &str) -> Result<Option<String>, ImageError> {
    Ok(rootfs::inspect(podman, image).await?.map(|facts| facts.id))
}
