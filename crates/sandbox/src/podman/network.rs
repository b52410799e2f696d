//! The podman side of proxy mode: the host folder whose unix socket the
//! container hands its proxy port through, the run's [`Proxy`], and the
//! handoff itself (`ah __egress-listen` run once with `podman exec`, again
//! after the container was restarted).

use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::args::{AH_BIN, EGRESS_DIR};
use super::{Podman, PodmanError};
use crate::cleanup::{Makers, StartDir};
use crate::egress::handoff::LISTEN_COMMAND;
use crate::egress::{Allowlist, EgressDecision, PROXY_PORT, Proxy};

/// How long the host waits for the socket once the helper has exited.
const RECEIVE_LIMIT: Duration = Duration::from_secs(2);

/// Proxy mode's host side for one container.
#[derive(Debug)]
pub(super) struct Egress {
    socket_dir: StartDir,
    /// The running `ah`, mounted into the container to run the helper.
    executable: PathBuf,
    proxy: Proxy,
}

impl Egress {
    /// Makes the socket folder and the proxy (which serves nothing until
    /// [`Egress::connect`]). The folder lives under the system's temporary
    /// folder: a unix socket path must stay under 108 bytes. `executable`
    /// is the `ah` to mount, by default the running one.
    pub(super) fn prepare(
        allow: Allowlist,
        log: &Path,
        executable: Option<&Path>,
        makers: &Makers,
    ) -> Result<Egress, PodmanError> {
        let io = |what| move |source| PodmanError::Io { what, source };
        let socket_dir =
            StartDir::new("ah-egress-", makers).map_err(io("create the proxy socket folder"))?;
        let executable = executable
            .map_or_else(std::env::current_exe, |path| Ok(path.to_path_buf()))
            .and_then(std::fs::canonicalize)
            .map_err(io("find the ah executable to mount into the sandbox"))?;
        let proxy = Proxy::new(allow, log).map_err(io("open network.log"))?;
        Ok(Egress {
            socket_dir,
            executable,
            proxy,
        })
    }

    pub(super) fn socket_dir(&self) -> &Path {
        self.socket_dir.path()
    }

    pub(super) fn executable(&self) -> &Path {
        &self.executable
    }

    /// Has the container hand over a fresh `127.0.0.1:PROXY_PORT` listener
    /// and serves it. Call with the container's turn held: no command of
    /// the model's may run meanwhile.
    pub(super) async fn connect(
        &self,
        podman: &Podman,
        container: &str,
    ) -> Result<(), PodmanError> {
        let name = format!("{}.sock", ulid::Ulid::generate());
        let host_path = self.socket_dir.path().join(&name);
        let listener = UnixListener::bind(&host_path).map_err(|source| PodmanError::Io {
            what: "create the proxy handoff socket",
            source,
        })?;
        // The helper's connection and the socket it sends wait in the
        // listener's queue, so it can run to its end first.
        let output = podman
            .command()
            .arg("exec")
            .arg(container)
            .arg(AH_BIN)
            .arg(LISTEN_COMMAND)
            .arg(format!("{EGRESS_DIR}/{name}"))
            .arg(PROXY_PORT.to_string())
            .stdin(std::process::Stdio::null())
            .output()
            .await
            .map_err(|source| PodmanError::Io {
                what: "run podman exec for the proxy",
                source,
            });
        let received = match output {
            Ok(output) if output.status.success() => {
                handoff_error(crate::egress::handoff::receive(&listener, RECEIVE_LIMIT))
            }
            Ok(output) => Err(helper_failed(&String::from_utf8_lossy(&output.stderr))),
            Err(err) => Err(err),
        };
        drop(listener);
        let _ = std::fs::remove_file(&host_path);
        let tcp = received?;
        self.proxy.serve(tcp).map_err(|source| PodmanError::Io {
            what: "serve the proxy port",
            source,
        })
    }

    pub(super) fn take_decisions(&self) -> Vec<EgressDecision> {
        self.proxy.take_decisions()
    }
}

fn handoff_error<T>(result: std::io::Result<T>) -> Result<T, PodmanError> {
    result.map_err(|source| PodmanError::Io {
        what: "receive the proxy port from the sandbox",
        source,
    })
}

/// The helper did not run: most often the ah executable cannot run in the
/// image (it needs a newer C library than the image has).
fn helper_failed(stderr: &str) -> PodmanError {
    let stderr = stderr.trim();
    let cause = if stderr.contains("GLIBC") || stderr.contains("not found") {
        "the ah executable cannot run inside the sandbox image (it needs a C library the image \
         lacks): build ah on a system no newer than the image (Debian bookworm, glibc 2.36), \
         or use --network none or full"
    } else {
        "run 'ah doctor' to see what is wrong, or use --network none or full"
    };
    PodmanError::StartFailed {
        stderr: format!("the egress proxy could not start inside the sandbox: {stderr}"),
        hint: format!("; {cause}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_c_library_is_named() {
        let err = helper_failed(
            "/run/ah-bin: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.39' not found\n",
        )
        .to_string();
        assert!(err.contains("GLIBC_2.39"), "{err}");
        assert!(err.contains("cannot run inside the sandbox image"), "{err}");
        assert!(helper_failed("boom").to_string().contains("ah doctor"));
    }
}
