//! What the doctor's probe containers (the runtime, limits and proxy
//! checks) start from. Where rootless podman's storage copies the whole
//! image into every container it creates (`vfs`), a probe started from the
//! image would wait seconds for its own copy, and `ah doctor` makes up to
//! three: there the probes stand on the cached copy of the image's root,
//! as runs do (`podman::rootfs`, made first if there is none), in the user
//! namespace the copy is owned for (`--userns=keep-id`, as runs). Rootful,
//! on storage that shares the image's layers, and where the copy cannot be
//! made, they start from the image.

use std::ffi::OsString;
use std::path::Path;

use tokio::process::Command;

use crate::podman::{Podman, rootfs};

/// The root of the probe containers; holds the copy while they run.
pub(super) struct ProbeRoot {
    image: String,
    copy: Option<rootfs::Rootfs>,
    /// Why the cached copy could not be made, where it would have been used.
    pub(super) missed: Option<String>,
}

impl ProbeRoot {
    /// The root for probes of `image`: its cached copy where a rootless
    /// container would copy the image, else the image.
    pub(super) async fn new(podman: &Podman, image: &str, rootless: bool) -> ProbeRoot {
        let mut root = ProbeRoot {
            image: image.to_string(),
            copy: None,
            missed: None,
        };
        if !rootless {
            return root;
        }
        // When podman cannot say, the probes start from the image and the
        // image and storage lines say what is wrong.
        if let Ok(Some(facts)) = rootfs::inspect(podman, image).await
            && facts.copied_per_container()
        {
            match rootfs::prepare(podman, &facts.id).await {
                Ok(copy) => root.copy = Some(copy),
                Err(why) => root.missed = Some(why),
            }
        }
        root
    }

    /// Ends the options of `run` (a `podman run`) with the root: the image,
    /// or the copy as an overlay's lower layer (never written).
    pub(super) fn start_from(&self, run: &mut Command) {
        run.args(root_args(
            &self.image,
            self.copy.as_ref().map(rootfs::Rootfs::path),
        ));
    }
}

/// The arguments of `podman run` that give its container `image`'s root,
/// or `copy`'s.
fn root_args(image: &str, copy: Option<&Path>) -> Vec<OsString> {
    match copy {
        Some(copy) => {
            let mut lower = copy.as_os_str().to_owned();
            lower.push(":O");
            vec!["--userns=keep-id".into(), "--rootfs".into(), lower]
        }
        None => vec![image.into()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_start_from_the_copy_as_runs_do_else_from_the_image() {
        let image = "localhost/ah-sandbox:latest";
        assert_eq!(root_args(image, None), [image]);
        let copy = Path::new("/home/u/.cache/ah/rootfs/abc");
        assert_eq!(
            root_args(image, Some(copy)),
            [
                "--userns=keep-id",
                "--rootfs",
                "/home/u/.cache/ah/rootfs/abc:O"
            ]
        );
    }
}
