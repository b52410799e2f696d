//! `ah doctor`: checks that the podman backend can run on this host and, for
//! each thing that cannot, says how to fix it. Each check is one line of the
//! CLI's output; the backend is ready when every check of
//! [`Severity::Error`] passes. A [`Severity::Warning`] check that fails
//! (resource limits not enforced, see `limits`) weakens the sandbox without
//! stopping it; one on podman's storage (`storage`) makes runs slower.

mod limits;
mod network;
mod probe;
mod remote;
mod storage;

use std::path::Path;

use tokio::process::Command;

use self::probe::ProbeRoot;
use super::podman::{
    self, DEFAULT_IMAGE, HostLimits, Podman, Runtime, Ulimits, find_init, find_tool, rootless,
};

/// What a failed check means for the backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The podman backend cannot run until it is fixed.
    Error,
    /// The backend runs, with less protection than it should have.
    Warning,
}

/// The result of one check.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Check {
    pub name: String,
    pub ok: bool,
    /// What it means when `ok` is false.
    pub severity: Severity,
    /// What was found.
    pub detail: String,
    /// What to do when `ok` is false.
    pub fix: Option<String>,
}

impl Check {
    fn pass(name: &str, detail: impl Into<String>) -> Check {
        Check {
            name: name.to_string(),
            ok: true,
            severity: Severity::Error,
            detail: detail.into(),
            fix: None,
        }
    }

    fn fail(name: &str, detail: impl Into<String>, fix: impl Into<String>) -> Check {
        Check {
            name: name.to_string(),
            ok: false,
            severity: Severity::Error,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }

    /// The same check, made a warning.
    fn warning(self) -> Check {
        Check {
            severity: Severity::Warning,
            ..self
        }
    }
}

#[derive(Debug, Clone)]
pub struct DoctorOptions {
    pub image: String,
    pub runtime: Runtime,
    /// Check this remote engine instead of the local podman.
    pub engine: Option<podman::Connection>,
}

impl Default for DoctorOptions {
    fn default() -> DoctorOptions {
        DoctorOptions {
            image: DEFAULT_IMAGE.to_string(),
            runtime: Runtime::Auto,
            engine: None,
        }
    }
}

/// The cgroup layout of the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupMode {
    V1,
    V2,
    Hybrid,
}

/// Reads the cgroup layout from `/sys/fs/cgroup`.
pub fn cgroup_mode(root: &Path) -> CgroupMode {
    if root.join("cgroup.controllers").exists() {
        CgroupMode::V2
    } else if root.join("unified").join("cgroup.controllers").exists() {
        CgroupMode::Hybrid
    } else {
        CgroupMode::V1
    }
}

/// Runs every check, in the order the CLI prints them.
pub async fn run_checks(opts: &DoctorOptions) -> Vec<Check> {
    let mut checks = Vec::new();
    let Some(found) = find_tool("podman") else {
        checks.push(Check::fail(
            "podman",
            "not found",
            "install podman (apt-get install podman runc uidmap) or use --backend none",
        ));
        checks.push(git_check());
        return checks;
    };
    let podman = match Podman::at(found) {
        Ok(podman) => podman,
        Err(e) => {
            checks.push(Check::fail(
                "podman",
                e.to_string(),
                "check that TMPDIR is writable",
            ));
            checks.push(git_check());
            return checks;
        }
    };
    checks.push(podman_check(&podman).await);
    if let Some(engine) = &opts.engine {
        checks.extend(remote::checks(podman, engine, &opts.image).await);
        return checks;
    }
    checks.push(match find_init() {
        Some(path) => Check::pass("init", format!("{} present", path.display())),
        None => Check::fail(
            "init",
            "catatonit not found; the sandbox runs it as its init",
            "apt-get install catatonit",
        ),
    });
    let cgroups = cgroup_mode(Path::new("/sys/fs/cgroup"));
    checks.push(Check::pass(
        "cgroups",
        format!("{cgroups:?}").to_lowercase(),
    ));
    if rootless() {
        checks.extend(rootless_checks());
    } else {
        checks.push(Check::pass(
            "rootless",
            "running as root: podman runs rootful",
        ));
    }
    let limits = HostLimits::read();
    let ulimits = Ulimits::for_host();
    checks.push(rlimit_check(&limits, ulimits));
    let image = match podman::image_exists(&podman, &opts.image).await {
        Ok(true) => Check::pass("image", format!("{} present", opts.image)),
        Ok(false) => Check::fail(
            "image",
            format!("{} missing", opts.image),
            "run 'ah image build' (as the user who runs ah: podman keeps images per user)",
        ),
        Err(e) => Check::fail("image", e.to_string(), "check 'podman images'"),
    };
    let probe_root = match image.ok {
        true => Some(ProbeRoot::new(&podman, &opts.image, rootless()).await),
        false => None,
    };
    let probe_root = probe_root.as_ref();
    checks.push(runtime_check(&podman, opts, cgroups, ulimits, probe_root).await);
    let run = confined_run(&podman, opts.runtime.resolve(), ulimits);
    checks.push(limits::check(&podman, run, probe_root, rootless()).await);
    let run = confined_run(&podman, opts.runtime.resolve(), ulimits);
    checks.push(network::proxy_check(run, probe_root).await);
    checks.push(network::full_check());
    checks.push(offline_build_check(rootless()));
    let missed = probe_root.and_then(|root| root.missed.as_deref());
    checks.push(storage::check(&podman, &opts.image, rootless(), missed).await);
    checks.push(image);
    checks.push(git_check());
    checks
}

/// True when the podman backend can run (every check of
/// [`Severity::Error`] passed; warnings do not count).
pub fn backend_ready(checks: &[Check]) -> bool {
    !checks.is_empty()
        && checks
            .iter()
            .all(|c| c.ok || c.severity == Severity::Warning)
}

async fn podman_check(podman: &Podman) -> Check {
    let output = podman
        .command()
        .args(["version", "--format", "{{.Client.Version}}"])
        .output()
        .await;
    match output {
        Ok(out) if out.status.success() => Check::pass(
            "podman",
            format!(
                "{} {}",
                podman.path().display(),
                String::from_utf8_lossy(&out.stdout).trim()
            ),
        ),
        Ok(out) => Check::fail(
            "podman",
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
            "run 'podman info' and fix what it reports",
        ),
        Err(e) => Check::fail("podman", e.to_string(), "reinstall podman"),
    }
}

/// Tries the runtime for real when the image exists (`root` is what the
/// probe starts from): the same confinement flags a run uses, running
/// `true`.
async fn runtime_check(
    podman: &Podman,
    opts: &DoctorOptions,
    cgroups: CgroupMode,
    ulimits: Ulimits,
    root: Option<&ProbeRoot>,
) -> Check {
    let runtime = opts.runtime.resolve();
    let name = runtime
        .clone()
        .unwrap_or_else(|| "podman's default".to_string());
    let crun_on_v1 = runtime.is_none() && cgroups != CgroupMode::V2;
    let runc_fix = "install runc (apt-get install runc); ah prefers it when present";
    let Some(root) = root else {
        return if crun_on_v1 {
            Check::fail(
                "runtime",
                format!("runc not found; crun usually fails on {cgroups:?} cgroups"),
                runc_fix,
            )
        } else {
            Check::pass("runtime", format!("{name} (not tried: image missing)"))
        };
    };
    let mut cmd = confined_run(podman, runtime.clone(), ulimits);
    root.start_from(&mut cmd);
    cmd.arg("true");
    match cmd.output().await {
        Ok(out) if out.status.success() => {
            Check::pass("runtime", format!("{name} runs containers"))
        }
        Ok(out) => {
            let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
            let fix = if stderr.contains("hybrid") || runtime.is_none() {
                runc_fix
            } else {
                "run the command 'podman run --rm IMAGE true' and fix what it reports"
            };
            Check::fail("runtime", format!("{name} failed: {stderr}"), fix)
        }
        Err(e) => Check::fail("runtime", e.to_string(), "reinstall podman"),
    }
}

/// `podman run` with a run's runtime and confinement flags, up to the
/// image.
fn confined_run(podman: &Podman, runtime: Option<String>, ulimits: Ulimits) -> Command {
    let mut cmd = podman.command();
    cmd.args([
        "run",
        "--rm",
        "--pull=never",
        "--network=none",
        "--cap-drop=all",
    ])
    .arg(format!("--ulimit=nofile={0}:{0}", ulimits.nofile))
    .arg(format!("--ulimit=nproc={0}:{0}", ulimits.nproc));
    if let Some(runtime) = runtime {
        cmd.arg(format!("--runtime={runtime}"));
    }
    cmd
}

fn rlimit_check(limits: &HostLimits, ulimits: Ulimits) -> Check {
    let show = |v: u64| {
        if v == u64::MAX {
            "unlimited".to_string()
        } else {
            v.to_string()
        }
    };
    let detail = format!(
        "hard nofile {}, nproc {}; the container gets nofile {}, nproc {}",
        show(limits.nofile_hard),
        show(limits.nproc_hard),
        ulimits.nofile,
        ulimits.nproc
    );
    if ulimits.nofile < 1024 || ulimits.nproc < 256 {
        Check::fail(
            "rlimits",
            detail,
            "raise the hard limits (ulimit -Hn / -Hu, or /etc/security/limits.conf)",
        )
    } else {
        Check::pass("rlimits", detail)
    }
}

/// Whether this user can build the image without a registry: as root with
/// debootstrap, without root with mmdebstrap (unshare mode, on the user's
/// subordinate ids). Only a warning: a registry, or an image already
/// there, does without.
fn offline_build_check(rootless: bool) -> Check {
    const NAME: &str = "offline build";
    let (tool, how) = match rootless {
        true => ("mmdebstrap", "without root, in a user namespace"),
        false => ("debootstrap", "as root"),
    };
    match find_tool(tool) {
        Some(path) => Check::pass(
            NAME,
            format!(
                "{} present: 'ah image build --offline' builds the image {how}",
                path.display()
            ),
        ),
        None => Check::fail(
            NAME,
            format!(
                "{tool} not found: without a registry this user cannot build the image ({tool} \
                 builds it {how})"
            ),
            format!("apt-get install {tool}"),
        )
        .warning(),
    }
}

fn rootless_checks() -> Vec<Check> {
    let uid = rustix::process::geteuid().as_raw();
    let user = std::env::var("USER").unwrap_or_default();
    let mut checks = Vec::new();
    for file in ["/etc/subuid", "/etc/subgid"] {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        checks.push(if has_sub_ids(&text, &user, uid) {
            Check::pass("rootless", format!("{file} has a range for {user}"))
        } else {
            Check::fail(
                "rootless",
                format!("{file} has no range for {user} (uid {uid})"),
                format!("run as root: usermod --add-subuids 100000-165535 --add-subgids 100000-165535 {user}"),
            )
        });
    }
    for tool in ["newuidmap", "newgidmap"] {
        checks.push(match find_tool(tool) {
            Some(path) => Check::pass("rootless", format!("{} present", path.display())),
            None => Check::fail(
                "rootless",
                format!("{tool} not found"),
                "apt-get install uidmap",
            ),
        });
    }
    checks
}

/// Whether a subuid/subgid file has a range for `user` (by name or uid).
fn has_sub_ids(text: &str, user: &str, uid: u32) -> bool {
    let uid = uid.to_string();
    text.lines().any(|line| {
        let mut fields = line.split(':');
        let owner = fields.next().unwrap_or("");
        let count = fields.nth(1).and_then(|c| c.trim().parse::<u64>().ok());
        (owner == uid || (!user.is_empty() && owner == user)) && count.is_some_and(|c| c > 0)
    })
}

fn git_check() -> Check {
    match which::which("git") {
        Ok(path) => Check::pass("git", format!("{} present", path.display())),
        Err(_) => Check::fail(
            "git",
            "not found",
            "install git (apt-get install git): ah applies patches with it",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup_mode_tells_the_layouts_apart() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        assert_eq!(cgroup_mode(dir.path()), CgroupMode::V1);
        std::fs::create_dir(dir.path().join("unified")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("unified/cgroup.controllers"), "")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cgroup_mode(dir.path()), CgroupMode::Hybrid);
        std::fs::write(dir.path().join("cgroup.controllers"), "").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cgroup_mode(dir.path()), CgroupMode::V2);
    }

    #[test]
    fn the_offline_build_check_names_the_tool_of_the_user_and_only_warns() {
        for (rootless, tool) in [(true, "mmdebstrap"), (false, "debootstrap")] {
            let check = offline_build_check(rootless);
            assert!(check.detail.contains(tool), "{check:?}");
            assert!(check.ok || check.severity == Severity::Warning, "{check:?}");
        }
    }

    #[test]
    fn sub_ids_match_by_name_or_uid_with_a_nonempty_range() {
        assert!(has_sub_ids("alice:100000:65536\n", "alice", 1000));
        assert!(has_sub_ids("1000:100000:65536\n", "", 1000));
        assert!(!has_sub_ids("bob:100000:65536\n", "alice", 1000));
        assert!(!has_sub_ids("alice:100000:0\n", "alice", 1000));
    }

    #[test]
    fn ready_when_every_error_check_passes_whatever_the_warnings() {
        assert!(!backend_ready(&[]));
        let ok = Check::pass("a", "fine");
        let bad = Check::fail("b", "broken", "fix it");
        let weak = Check::fail("c", "weaker", "fix it").warning();
        assert!(backend_ready(std::slice::from_ref(&ok)));
        assert!(backend_ready(&[ok.clone(), weak.clone()]));
        assert!(!backend_ready(&[ok, weak, bad]));
    }

    #[test]
    fn low_limits_fail_with_a_fix() {
        let limits = HostLimits {
            nofile_hard: 256,
            nproc_hard: 100,
            pid_max: 32768,
        };
        let check = rlimit_check(&limits, Ulimits::WANTED.clamped(&limits));
        assert!(!check.ok);
        assert!(check.fix.is_some_and(|f| f.contains("ulimit")));
    }

    #[tokio::test]
    async fn checks_on_this_host_name_every_item() {
        let checks = run_checks(&DoctorOptions::default()).await;
        let names: Vec<&str> = checks.iter().map(|c| c.name.as_str()).collect();
        assert!(names.contains(&"podman"));
        assert!(names.contains(&"git"));
        if find_tool("podman").is_some() {
            assert!(names.contains(&"init"));
            let limits = checks.iter().find(|c| c.name == limits::NAME);
            assert!(limits.is_some_and(|c| c.severity == Severity::Warning));
        }
        for check in &checks {
            assert_eq!(check.ok, check.fix.is_none(), "{check:?}");
        }
    }
}
