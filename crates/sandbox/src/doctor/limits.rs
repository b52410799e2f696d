//! The "resource limits" check: does `--memory` and `--pids-limit` take
//! effect here? Rootless podman on cgroup v1 (or on v2 without the memory
//! and pids controllers delegated to the user) accepts both flags and
//! ignores them, so a command could use all of the host's memory and
//! processes. The sandbox still works, and a run puts per-process limits in
//! their place (see `limits`), so this is a warning, not a failure. Where
//! podman has the controllers, a container is started with the limits and
//! asked what it got.

use tokio::process::Command;

use super::Check;
use super::probe::ProbeRoot;
use crate::podman::Podman;

pub(super) const NAME: &str = "resource limits";

/// The limits the probe container asks for: unlike any default, so a match
/// cannot be a coincidence.
const PROBE_MEMORY: &str = "320m";
const PROBE_MEMORY_BYTES: u64 = 320 * 1024 * 1024;
const PROBE_PIDS: u64 = 321;

/// Prints the container's own memory and pids limits, from the cgroup v2
/// file or the v1 one, whichever exists.
const PROBE_SCRIPT: &str = "for f in /sys/fs/cgroup/memory.max /sys/fs/cgroup/memory/memory.limit_in_bytes; do \
     [ -r \"$f\" ] && { echo \"memory $(cat \"$f\")\"; break; }; done; \
     for f in /sys/fs/cgroup/pids.max /sys/fs/cgroup/pids/pids.max; do \
     [ -r \"$f\" ] && { echo \"pids $(cat \"$f\")\"; break; }; done";

/// What podman reports about cgroups for this user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct CgroupInfo {
    /// `v1` or `v2`.
    pub version: String,
    /// The controllers podman can use (none for rootless on cgroup v1).
    pub controllers: Vec<String>,
}

/// The limits a container reported; `None` when unlimited or unreadable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Probe {
    pub memory: Option<u64>,
    pub pids: Option<u64>,
}

/// Parses `podman info --format '{{.Host.CgroupsVersion}} {{json
/// .Host.CgroupControllers}}'`.
pub(super) fn parse_info(text: &str) -> Result<CgroupInfo, String> {
    let text = text.trim();
    let (version, list) = text.split_once(' ').unwrap_or((text, "null"));
    let controllers: Option<Vec<String>> = serde_json::from_str(list)
        .map_err(|e| format!("unexpected podman info output {text:?}: {e}"))?;
    Ok(CgroupInfo {
        version: version.to_string(),
        controllers: controllers.unwrap_or_default(),
    })
}

/// Parses the probe script's `memory N` and `pids N` lines.
pub(super) fn parse_probe(text: &str) -> Probe {
    let mut probe = Probe::default();
    for line in text.lines() {
        let (key, value) = line.split_once(' ').unwrap_or((line, ""));
        let value = value.trim().parse().ok();
        match key {
            "memory" => probe.memory = value,
            "pids" => probe.pids = value,
            _ => {}
        }
    }
    probe
}

/// The controllers `--memory` and `--pids-limit` need that `info` lacks.
pub(super) fn missing_controllers(info: &CgroupInfo) -> Vec<&'static str> {
    ["memory", "pids"]
        .into_iter()
        .filter(|want| !info.controllers.iter().any(|c| c == want))
        .collect()
}

/// How to get limits enforced.
fn fix(rootless: bool) -> &'static str {
    if rootless {
        "use cgroup v2 with the memory and pids controllers delegated to your user \
         (boot with systemd.unified_cgroup_hierarchy=1; systemd's user@.service delegates them), \
         or run ah as root (rootful podman enforces limits on cgroup v1 too); until then runs \
         say so at their start, and --strict-limits refuses them"
    } else {
        "enable the memory and pids cgroup controllers (e.g. cgroup_enable=memory on the \
         kernel command line); until then runs say so at their start, and --strict-limits \
         refuses them"
    }
}

/// The check's verdict from what podman reports and, when a container could
/// be asked, what it got.
pub(super) fn verdict(info: &CgroupInfo, probe: Option<Probe>, rootless: bool) -> Check {
    let mode = if rootless { "rootless" } else { "rootful" };
    let missing = missing_controllers(info);
    if !missing.is_empty() {
        return Check::fail(
            NAME,
            format!(
                "not enforced: {mode} podman on cgroup {} has no {} controller, so \
                 podman ignores --memory and --pids-limit; a run puts a per-process data \
                 limit and a process limit in their place, which bound each process \
                 alone, not the sandbox as a whole",
                info.version,
                missing.join(" or ")
            ),
            fix(rootless),
        )
        .warning();
    }
    let Some(probe) = probe else {
        return Check::pass(
            NAME,
            format!(
                "{mode} podman on cgroup {} has the memory and pids controllers \
                 (not tried: image missing)",
                info.version
            ),
        )
        .warning();
    };
    let show = |v: Option<u64>| v.map_or("unlimited".to_string(), |v| v.to_string());
    let got = format!(
        "a container given --memory={PROBE_MEMORY} --pids-limit={PROBE_PIDS} reports memory {} \
         bytes, pids {}",
        show(probe.memory),
        show(probe.pids)
    );
    if probe.memory == Some(PROBE_MEMORY_BYTES) && probe.pids == Some(PROBE_PIDS) {
        Check::pass(
            NAME,
            format!("enforced ({mode}, cgroup {}): {got}", info.version),
        )
        .warning()
    } else {
        Check::fail(
            NAME,
            format!("not enforced ({mode}, cgroup {}): {got}", info.version),
            fix(rootless),
        )
        .warning()
    }
}

/// Asks podman, then (when the image is present: `root`, what the probe
/// starts from) a container, whether limits hold. `run` is the `podman run`
/// command with the run's confinement flags, ending before the image.
pub(super) async fn check(
    podman: &Podman,
    mut run: Command,
    root: Option<&ProbeRoot>,
    rootless: bool,
) -> Check {
    let output = podman
        .command()
        .args([
            "info",
            "--format",
            "{{.Host.CgroupsVersion}} {{json .Host.CgroupControllers}}",
        ])
        .output()
        .await;
    let info = match output {
        Ok(out) if out.status.success() => parse_info(&String::from_utf8_lossy(&out.stdout)),
        Ok(out) => Err(String::from_utf8_lossy(&out.stderr).trim().to_string()),
        Err(e) => Err(e.to_string()),
    };
    let info = match info {
        Ok(info) => info,
        Err(e) => {
            return Check::fail(
                NAME,
                format!("podman info failed: {e}"),
                "run 'podman info'",
            )
            .warning();
        }
    };
    let Some(root) = root.filter(|_| missing_controllers(&info).is_empty()) else {
        return verdict(&info, None, rootless);
    };
    run.arg(format!("--memory={PROBE_MEMORY}"))
        .arg(format!("--pids-limit={PROBE_PIDS}"));
    root.start_from(&mut run);
    run.args(["sh", "-c", PROBE_SCRIPT]);
    match run.output().await {
        Ok(out) if out.status.success() => verdict(
            &info,
            Some(parse_probe(&String::from_utf8_lossy(&out.stdout))),
            rootless,
        ),
        Ok(out) => Check::fail(
            NAME,
            format!(
                "a container with limits failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
            fix(rootless),
        )
        .warning(),
        Err(e) => Check::fail(NAME, e.to_string(), "reinstall podman").warning(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(version: &str, controllers: &[&str]) -> CgroupInfo {
        CgroupInfo {
            version: version.to_string(),
            controllers: controllers.iter().map(|c| c.to_string()).collect(),
        }
    }

    #[test]
    fn podman_info_parses_with_and_without_controllers() {
        assert_eq!(
            parse_info("v1 [\"cpuset\",\"memory\",\"pids\"]\n"),
            Ok(info("v1", &["cpuset", "memory", "pids"]))
        );
        // Rootless on cgroup v1: podman lists none.
        assert_eq!(parse_info("v1 []"), Ok(info("v1", &[])));
        assert_eq!(parse_info("v2 null"), Ok(info("v2", &[])));
        assert!(parse_info("v2 {oops").is_err());
    }

    #[test]
    fn probes_read_v1_and_v2_files_and_unlimited() {
        assert_eq!(
            parse_probe("memory 335544320\npids 321\n"),
            Probe {
                memory: Some(335_544_320),
                pids: Some(321)
            }
        );
        assert_eq!(parse_probe("memory max\npids max\n"), Probe::default());
        assert_eq!(parse_probe(""), Probe::default());
    }

    #[test]
    fn rootless_cgroup_v1_is_a_warning_with_the_fix() {
        let check = verdict(&info("v1", &[]), None, true);
        assert!(!check.ok);
        assert_eq!(check.severity, super::super::Severity::Warning);
        assert!(check.detail.contains("memory or pids"), "{}", check.detail);
        let fix = check.fix.unwrap_or_default();
        assert!(
            fix.contains("cgroup v2") && fix.contains("as root"),
            "{fix}"
        );
    }

    #[test]
    fn a_container_must_report_the_limits_it_was_given() {
        let all = info("v1", &["memory", "pids"]);
        let enforced = Probe {
            memory: Some(PROBE_MEMORY_BYTES),
            pids: Some(PROBE_PIDS),
        };
        assert!(verdict(&all, Some(enforced), false).ok);
        let ignored = Probe {
            memory: Some(9_223_372_036_854_771_712),
            pids: None,
        };
        let check = verdict(&all, Some(ignored), false);
        assert!(!check.ok);
        assert!(check.detail.contains("pids unlimited"), "{}", check.detail);
        // Without an image nothing was tried, and it says so.
        let untried = verdict(&all, None, false);
        assert!(untried.ok && untried.detail.contains("not tried"));
    }
}
