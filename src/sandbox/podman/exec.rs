//! Running one command in the run's container with `podman exec`, and
//! killing it for real: killing the host-side `podman exec` client leaves the
//! command running in the container, so each command starts in its own
//! session (`setsid`), records its process group id in a file under the
//! container's `/tmp`, and a timeout or a dropped future sends TERM, then
//! KILL, to that group from inside the container.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

use crate::sandbox::capture::{Capture, HEAD_BYTES, TAIL_BYTES, pump};
use crate::tools::ExecOutput;

/// Output kept in memory per stream (head and tail); the middle is counted
/// and dropped.
pub const OUTPUT_CAP: usize = HEAD_BYTES + TAIL_BYTES;

/// How long a group gets between TERM and KILL.
const TERM_GRACE_TENTHS: u32 = 20;

/// Where commands record their process group ids inside the container.
const PGID_DIR: &str = "/tmp/.ah-exec";

/// The wrapper that runs `$2` in a new session and records its group id in
/// `$1`. `$$` of the bash that `setsid` starts is the new group's id.
const WRAPPER: &str = "mkdir -p /tmp/.ah-exec && echo $$ > \"$1\"; \
bash -c \"$2\"; status=$?; rm -f \"$1\"; exit $status";

/// Where the group id of exec number `n` is written.
pub fn pgid_file(n: u64) -> String {
    format!("{PGID_DIR}/{n}.pgid")
}

/// A bash script, run in the container, that waits briefly for the group id
/// file, sends TERM to the group, waits up to 2 s, then sends KILL.
pub fn kill_script(pgid_file: &str) -> String {
    format!(
        "f={pgid_file}; i=0; \
         while [ ! -s \"$f\" ] && [ $i -lt 20 ]; do sleep 0.1; i=$((i+1)); done; \
         p=$(cat \"$f\" 2>/dev/null) || exit 0; [ -n \"$p\" ] || exit 0; \
         kill -TERM -- -$p 2>/dev/null; i=0; \
         while kill -0 -- -$p 2>/dev/null && [ $i -lt {TERM_GRACE_TENTHS} ]; do sleep 0.1; i=$((i+1)); done; \
         kill -KILL -- -$p 2>/dev/null; rm -f \"$f\"; exit 0"
    )
}

/// Kills the in-container group when dropped while armed: this is what makes
/// cancelling an exec future stop the command, not just the host client.
struct GroupKiller {
    podman: PathBuf,
    container: String,
    pgid_file: String,
    armed: bool,
}

impl Drop for GroupKiller {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let spawned = std::process::Command::new(&self.podman)
            .args(["exec", &self.container, "bash", "-c"])
            .arg(kill_script(&self.pgid_file))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        if let Ok(mut child) = spawned {
            // Reap it without blocking the dropping task.
            std::thread::spawn(move || child.wait());
        }
    }
}

/// Runs `command` with `bash -c` in `/work` of `container`.
pub async fn run(
    podman: &Path,
    container: &str,
    exec_number: u64,
    command: &str,
    timeout: Duration,
) -> std::io::Result<ExecOutput> {
    let pgid_file = pgid_file(exec_number);
    let mut child = Command::new(podman)
        .args(["exec", "--workdir=/work", container])
        .args(["setsid", "-w", "bash", "-c", WRAPPER, "ah-exec"])
        .arg(&pgid_file)
        .arg(command)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| std::io::Error::new(e.kind(), format!("could not run podman exec: {e}")))?;
    let mut killer = GroupKiller {
        podman: podman.to_path_buf(),
        container: container.to_string(),
        pgid_file: pgid_file.clone(),
        armed: true,
    };
    let (Some(mut stdout), Some(mut stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(std::io::Error::other(
            "podman exec started without output pipes",
        ));
    };
    let mut out = Capture::new();
    let mut err = Capture::new();

    let finished = tokio::time::timeout(timeout, async {
        let (r1, r2, status) = tokio::join!(
            pump(&mut stdout, &mut out),
            pump(&mut stderr, &mut err),
            child.wait()
        );
        r1?;
        r2?;
        status
    })
    .await;

    match finished {
        Ok(status) => {
            killer.armed = false;
            let status = status?;
            let (stdout, out_dropped) = out.finish();
            let (stderr, err_dropped) = err.finish();
            if status.code() == Some(125) && stderr.starts_with(b"Error: ") {
                return Err(std::io::Error::other(format!(
                    "podman exec failed: {}; the sandbox container is gone or broken: run 'ah doctor'",
                    String::from_utf8_lossy(&stderr).trim()
                )));
            }
            Ok(ExecOutput {
                stdout,
                stderr,
                exit_code: status.code(),
                timed_out: false,
                dropped_bytes: out_dropped + err_dropped,
            })
        }
        Err(_elapsed) => {
            killer.armed = false;
            kill_group(podman, container, &pgid_file).await;
            // The group is dead: collect what is still buffered in the pipes,
            // but never wait long for a descendant that escaped the group.
            let _ = tokio::time::timeout(Duration::from_secs(2), async {
                let _ = tokio::join!(
                    pump(&mut stdout, &mut out),
                    pump(&mut stderr, &mut err),
                    child.wait()
                );
            })
            .await;
            let _ = child.start_kill();
            let (stdout, out_dropped) = out.finish();
            let (stderr, err_dropped) = err.finish();
            Ok(ExecOutput {
                stdout,
                stderr,
                exit_code: None,
                timed_out: true,
                dropped_bytes: out_dropped + err_dropped,
            })
        }
    }
}

/// Sends TERM then KILL to the command's group inside the container.
async fn kill_group(podman: &Path, container: &str, pgid_file: &str) {
    let killed = Command::new(podman)
        .args(["exec", container, "bash", "-c"])
        .arg(kill_script(pgid_file))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .status();
    let _ = tokio::time::timeout(Duration::from_secs(10), killed).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn wrapper_and_kill_script_stop_a_group_on_the_host() {
        // The same scripts the container runs, run by the host's bash: the
        // wrapper records the group id, the kill script ends the group.
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let file = dir.path().join("1.pgid");
        let file = file.to_string_lossy().into_owned();
        let wrapper = WRAPPER.replace("mkdir -p /tmp/.ah-exec && ", "");
        let mut child = Command::new("setsid")
            .args([
                "-w",
                "bash",
                "-c",
                &wrapper,
                "ah-exec",
                &file,
                "sleep 1000 & sleep 1000",
            ])
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn: {e}"));
        let killed = Command::new("bash")
            .args(["-c", &kill_script(&file)])
            .status()
            .await
            .unwrap_or_else(|e| panic!("kill script: {e}"));
        assert!(killed.success());
        let waited = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
        assert!(waited.is_ok(), "the group survived the kill script");
        assert!(!Path::new(&file).exists());
    }
}
