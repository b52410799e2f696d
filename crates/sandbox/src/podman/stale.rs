//! Finding and removing containers left behind by runs that are no longer
//! alive (ah killed, machine crashed). Each container carries labels naming
//! its run and the host process that owns it (pid and start time, so a
//! recycled pid does not keep a dead run's container alive).

use super::{Podman, PodmanError};

pub const RUN_LABEL: &str = "ah.run";
pub(super) const PID_LABEL: &str = "ah.pid";
pub(super) const START_LABEL: &str = "ah.pidstart";
/// On a remote engine's container: the machine of the ah that made it, so
/// that a sweep judges only its own machine's processes.
pub(super) const CLIENT_LABEL: &str = "ah.client";

/// This machine, as [`CLIENT_LABEL`] names it: its machine id (else its
/// host name).
pub(super) fn client_id() -> String {
    let id = std::fs::read_to_string("/etc/machine-id")
        .or_else(|_| std::fs::read_to_string("/proc/sys/kernel/hostname"))
        .unwrap_or_default();
    let id: String = id
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .take(64)
        .collect();
    match id.is_empty() {
        true => "unknown".to_string(),
        false => id,
    }
}

/// A process, told apart from a later one with the same id: the process
/// that owns a container, or one still making it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub pid: u32,
    /// Start time of the process in clock ticks since boot (`/proc/PID/stat`).
    pub start: u64,
}

impl Owner {
    /// This process.
    pub(super) fn current() -> Owner {
        let pid = std::process::id();
        Owner {
            pid,
            start: start_time(pid).unwrap_or(0),
        }
    }

    /// The running process `pid`; `None` when there is none.
    pub fn of(pid: u32) -> Option<Owner> {
        Some(Owner {
            pid,
            start: start_time(pid)?,
        })
    }

    /// Whether the process still runs (a zombie, ended but not yet reaped,
    /// does not).
    pub fn is_alive(&self) -> bool {
        running_since(self.pid) == Some(self.start)
    }

    pub(super) fn labels(&self) -> Vec<(&'static str, String)> {
        vec![
            (PID_LABEL, self.pid.to_string()),
            (START_LABEL, self.start.to_string()),
        ]
    }
}

/// Field 22 of `/proc/PID/stat`, read after the command name (which may hold
/// spaces and parentheses).
fn start_time(pid: u32) -> Option<u64> {
    stat_fields(pid)?.1
}

/// [`start_time`] of a process that has not ended (a zombie has: it waits
/// only for its parent to read its exit status).
fn running_since(pid: u32) -> Option<u64> {
    match stat_fields(pid)? {
        ('Z' | 'X', _) => None,
        (_, start) => start,
    }
}

/// The state (field 3) and the start time (field 22) of process `pid`.
fn stat_fields(pid: u32) -> Option<(char, Option<u64>)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace();
    // After the name come state (field 3) .. starttime (field 22).
    let state = fields.next()?.chars().next()?;
    Some((state, fields.nth(18).and_then(|start| start.parse().ok())))
}

/// One container of ah's, as `podman ps` lists it.
#[derive(Debug, serde::Deserialize)]
struct Listed {
    #[serde(rename = "Names", default)]
    names: Vec<String>,
    #[serde(rename = "Labels", default)]
    labels: Option<std::collections::HashMap<String, String>>,
    /// The pod it belongs to, if any. ah never makes a pod: one carrying
    /// `ah.run` was made from `ah kube manifest` (`podman kube play`),
    /// and is its player's to remove.
    #[serde(rename = "Pod", default)]
    pod: String,
}

impl Listed {
    /// Whether this machine's processes say if the container is live: one
    /// made here (on a remote engine: made from here).
    fn judged_here(&self, remote: bool, client: &str) -> bool {
        let made_by = self.labels.as_ref().and_then(|l| l.get(CLIENT_LABEL));
        match made_by {
            Some(made_by) => made_by == client,
            None => !remote,
        }
    }

    /// A container of ah's whose run is over: not in a pod, and its
    /// owner gone.
    fn is_stale(&self) -> bool {
        self.pod.is_empty() && !self.owner_alive()
    }

    /// A container is live when its labels name a process that still runs.
    fn owner_alive(&self) -> bool {
        let Some(labels) = &self.labels else {
            return false;
        };
        let pid = labels.get(PID_LABEL).and_then(|v| v.parse().ok());
        let start = labels.get(START_LABEL).and_then(|v| v.parse().ok());
        match (pid, start) {
            (Some(pid), Some(start)) => Owner { pid, start }.is_alive(),
            _ => false,
        }
    }
}

/// Removes every container labelled `ah.run` whose owning process is gone
/// (never one in a pod). Returns the names removed.
pub(super) async fn cleanup_stale(podman: &Podman) -> Result<Vec<String>, PodmanError> {
    let output = podman
        .command()
        .args(["ps", "-a", "--format=json", "--filter"])
        .arg(format!("label={RUN_LABEL}"))
        .output()
        .await
        .map_err(|source| PodmanError::Io {
            what: "list containers (podman ps)",
            source,
        })?;
    if !output.status.success() {
        return Err(PodmanError::Command {
            what: "ps",
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        });
    }
    let listed: Vec<Listed> = if output.stdout.iter().all(u8::is_ascii_whitespace) {
        Vec::new()
    } else {
        serde_json::from_slice(&output.stdout).map_err(|e| PodmanError::Command {
            what: "ps",
            stderr: format!("unexpected output ({e})"),
        })?
    };
    let (remote, client) = (podman.connection().is_some(), client_id());
    let stale: Vec<String> = listed
        .iter()
        .filter(|c| c.judged_here(remote, &client) && c.is_stale())
        .filter_map(|c| c.names.first().cloned())
        .collect();
    // Another ah may be cleaning up at the same time: a container that is
    // gone after a failed removal was removed by it, which is fine. One that
    // will not go is a dead run's, not this one's: it stays for the next
    // sweep rather than stop the run that found it.
    let mut removed = Vec::new();
    for name in stale {
        if super::remove_container(podman, &name).await.is_ok()
            || !container_exists(podman, &name).await
        {
            removed.push(name);
        }
    }
    Ok(removed)
}

/// Whether a container named `name` exists (`podman container exists`;
/// true too when podman cannot say).
pub(crate) async fn container_exists(podman: &Podman, name: &str) -> bool {
    podman
        .command()
        .args(["container", "exists", name])
        .stdin(std::process::Stdio::null())
        .status()
        .await
        .map_or(true, |status| status.success())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_container_in_a_pod_is_never_stale() {
        let listed: Vec<Listed> = serde_json::from_str(
            r#"[{"Names": ["ah-01A"], "Labels": {"ah.run": "01A"}, "Pod": ""},
                {"Names": ["ah-01b-sandbox"], "Labels": {"ah.run": "01B"}, "Pod": "9d22745b"},
                {"Names": ["ah-01C"], "Labels": {"ah.run": "01C"}}]"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let stale: Vec<bool> = listed.iter().map(Listed::is_stale).collect();
        assert_eq!(stale, [true, false, true]);
    }

    #[test]
    fn this_process_is_alive_and_a_changed_start_time_is_not() {
        let me = Owner::current();
        assert!(me.start > 0);
        assert!(me.is_alive());
        let recycled = Owner {
            pid: me.pid,
            start: me.start + 1,
        };
        assert!(!recycled.is_alive());
    }

    #[test]
    fn a_child_that_ended_is_dead_before_it_is_reaped() {
        let child = std::process::Command::new("true").spawn();
        let Ok(mut child) = child else { return };
        let pid = child.id();
        let Some(start) = start_time(pid) else { return };
        let owner = Owner { pid, start };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while owner.is_alive() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(!owner.is_alive(), "a zombie counts as ended");
        let _ = child.wait();
    }

    #[test]
    fn a_reaped_child_is_dead() {
        let child = std::process::Command::new("true").spawn();
        let Ok(mut child) = child else { return };
        let pid = child.id();
        let start = start_time(pid);
        let _ = child.wait();
        if let Some(start) = start {
            assert!(!Owner { pid, start }.is_alive());
        }
    }

    #[test]
    fn a_remote_engines_containers_are_judged_by_the_machine_that_made_them() {
        let listed: Vec<Listed> = serde_json::from_str(
            r#"[{"Names":["ah-mine"],"Labels":{"ah.run":"a","ah.client":"me"}},
                {"Names":["ah-theirs"],"Labels":{"ah.run":"b","ah.client":"them"}},
                {"Names":["ah-local"],"Labels":{"ah.run":"c"}}]"#,
        )
        .unwrap_or_default();
        let judged = |remote| -> Vec<&str> {
            listed
                .iter()
                .filter(|c| c.judged_here(remote, "me"))
                .map(|c| c.names[0].as_str())
                .collect()
        };
        assert_eq!(judged(true), ["ah-mine"]);
        assert_eq!(judged(false), ["ah-mine", "ah-local"]);
        assert!(!client_id().is_empty());
    }

    #[test]
    fn containers_without_owner_labels_are_stale() {
        let listed: Vec<Listed> =
            serde_json::from_str(r#"[{"Names":["ah-x"],"Labels":{"ah.run":"x"}}]"#)
                .unwrap_or_default();
        assert_eq!(listed.len(), 1);
        assert!(!listed[0].owner_alive());
    }
}
