//! Which of a run's limits really hold, and by what. Podman accepts
//! `--memory` and `--pids-limit` everywhere and silently ignores them where
//! it cannot make a cgroup for them: rootless on cgroup v1, and rootless on
//! cgroup v2 without the memory and pids controllers delegated to the user.
//! So a run plans its limits from the host's cgroups before the container
//! starts ([`plan`]): where a cgroup limit cannot apply, a per-process
//! resource limit stands in (RLIMIT_DATA sized from `--memory`, RLIMIT_NPROC
//! from `--pids-limit`) and the run says so in one start line. Once the
//! container runs, what its init really got (its cgroup's files and its
//! `/proc/PID/limits`, read from the host) is [`check`]ed against the plan.
//!
//! A stand-in is weaker than a cgroup, and the start line says how: the data
//! limit bounds each process alone (twenty processes may each take the whole
//! amount), and counts only writable private memory (not files in `/tmp`, a
//! tmpfs, nor shared memory); the process limit counts the sandbox user's
//! processes rather than the container's.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// One limit of a run, as asked and as it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Held {
    /// `memory`, `pids` or `disk`.
    pub limit: String,
    /// As asked: `512m`, `1024`, `10G` (in bytes for the disk budget).
    pub asked: String,
    pub by: By,
    /// How a stand-in differs from what was asked, or why nothing holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// What holds a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum By {
    /// The container's cgroup: the whole sandbox together.
    Cgroup,
    /// A per-process resource limit stands in for the cgroup.
    Rlimit,
    /// ah itself (the disk budget: the run stops when it passes it).
    Ah,
    /// Nothing: the limit is not enforced.
    None,
    /// No limit was asked (`--memory 0`, `--pids-limit 0`, no disk budget).
    NotAsked,
}

impl Held {
    /// Whether the limit holds as asked (by a cgroup, or by ah for what ah
    /// measures itself).
    pub fn as_asked(&self) -> bool {
        matches!(self.by, By::Cgroup | By::Ah | By::NotAsked)
    }

    /// The limit in a few words, for the start line: `memory 512m: …`.
    pub fn describe(&self) -> String {
        let how = match self.by {
            By::Cgroup => "enforced by the container's cgroup".to_string(),
            By::Ah => "enforced by ah".to_string(),
            By::NotAsked => "no limit asked".to_string(),
            By::Rlimit | By::None => self.note.clone().unwrap_or_default(),
        };
        format!("{} {}: {how}", self.limit, self.asked)
    }
}

/// What a run asks of its sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asked {
    /// A podman memory size (`4g`); `0` or unreadable: no limit.
    pub memory: String,
    /// 0: no limit.
    pub pids: u32,
    /// Bytes the run directory may take.
    pub disk_budget: Option<u64>,
}

/// Which cgroup limits the containers of this user get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cgroups {
    /// 1 (also a hybrid host) or 2.
    pub version: u8,
    pub memory: bool,
    pub pids: bool,
}

impl Cgroups {
    /// What this host gives the containers of this process's user: rootful
    /// podman gets every controller the kernel has; rootless podman gets
    /// none on cgroup v1 and, on v2, those systemd delegates to the user's
    /// service (`user@UID.service`).
    pub fn for_containers(rootless: bool) -> Cgroups {
        let root = Path::new("/sys/fs/cgroup");
        let unified = std::fs::read_to_string(root.join("cgroup.controllers")).ok();
        let Some(unified) = unified else {
            let enabled = std::fs::read_to_string("/proc/cgroups").unwrap_or_default();
            let has = |name: &str| !rootless && v1_enabled(&enabled, name);
            return Cgroups {
                version: 1,
                memory: has("memory"),
                pids: has("pids"),
            };
        };
        let controllers = if rootless {
            let uid = rustix::process::getuid().as_raw();
            let service = format!("user.slice/user-{uid}.slice/user@{uid}.service");
            std::fs::read_to_string(root.join(service).join("cgroup.controllers"))
                .unwrap_or_default()
        } else {
            unified
        };
        let has = |name: &str| controllers.split_whitespace().any(|c| c == name);
        Cgroups {
            version: 2,
            memory: has("memory"),
            pids: has("pids"),
        }
    }
}

/// Whether `/proc/cgroups` (`name hierarchy num_cgroups enabled`) has
/// `name` enabled.
fn v1_enabled(proc_cgroups: &str, name: &str) -> bool {
    proc_cgroups.lines().any(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        fields.first() == Some(&name) && fields.get(3) == Some(&"1")
    })
}

/// What a podman sandbox is started with besides its cgroup limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StandIns {
    /// `--ulimit data=N:N`, where the memory cgroup does not apply.
    pub data: Option<u64>,
    /// `--ulimit nproc=N:N`, where the pids cgroup does not apply.
    pub nproc: Option<u64>,
}

/// The limits a podman sandbox will have on a host with `cgroups`, and the
/// stand-ins to start it with.
pub fn plan(asked: &Asked, cgroups: Cgroups, rootless: bool) -> (Vec<Held>, StandIns) {
    let mut stand_ins = StandIns::default();
    let why = why_not(cgroups, rootless);
    let memory = match memory_bytes(&asked.memory) {
        None => unlimited("memory", &asked.memory),
        Some(_) if cgroups.memory => held("memory", &asked.memory, By::Cgroup, None),
        Some(bytes) => {
            stand_ins.data = Some(bytes);
            held(
                "memory",
                &asked.memory,
                By::Rlimit,
                Some(format!(
                    "not enforced by a cgroup ({why}); a per-process data limit of {} \
                     stands in: it bounds each process alone, so several processes may \
                     together use more",
                    asked.memory
                )),
            )
        }
    };
    let pids_asked = asked.pids.to_string();
    let pids = match asked.pids {
        0 => unlimited("pids", &pids_asked),
        _ if cgroups.pids => held("pids", &pids_asked, By::Cgroup, None),
        n => {
            stand_ins.nproc = Some(n.into());
            held(
                "pids",
                &pids_asked,
                By::Rlimit,
                Some(format!(
                    "not enforced by a cgroup ({why}); a process limit (nproc {n}) stands in, \
                     counted per user in the sandbox"
                )),
            )
        }
    };
    (vec![memory, pids, disk(asked)], stand_ins)
}

/// The limits of a run without a sandbox: only ah's own disk budget.
pub fn plan_on_host(asked: &Asked) -> Vec<Held> {
    let not = |limit: &str, value: String| {
        held(
            limit,
            &value,
            By::None,
            Some("not enforced: --backend none runs commands on the host".to_string()),
        )
    };
    let memory = match memory_bytes(&asked.memory) {
        Some(_) => not("memory", asked.memory.clone()),
        None => unlimited("memory", &asked.memory),
    };
    let pids = match asked.pids {
        0 => unlimited("pids", "0"),
        pids => not("pids", pids.to_string()),
    };
    vec![memory, pids, disk(asked)]
}

/// What holds each limit in a container on a remote engine, whose cgroups
/// this machine cannot look into: memory by a per-process data limit of
/// the same size (and the engine's cgroup, where it has one), processes by
/// the engine's pids cgroup as asked.
pub fn plan_remote(asked: &Asked, engine: &str) -> Vec<Held> {
    let note = || {
        Some(format!(
            "asked of the remote engine {engine}'s cgroups; not checked from here"
        ))
    };
    let memory = match memory_bytes(&asked.memory) {
        Some(_) => held(
            "memory",
            &asked.memory,
            By::Rlimit,
            Some(format!(
                "per process (data); also asked of the remote engine {engine}'s cgroup"
            )),
        ),
        None => unlimited("memory", &asked.memory),
    };
    let pids = match asked.pids {
        0 => unlimited("pids", "0"),
        pids => held("pids", &pids.to_string(), By::Cgroup, note()),
    };
    vec![memory, pids, disk(asked)]
}

fn disk(asked: &Asked) -> Held {
    match asked.disk_budget {
        Some(bytes) => held("disk", &bytes.to_string(), By::Ah, None),
        None => unlimited("disk", "none"),
    }
}

fn held(limit: &str, asked: &str, by: By, note: Option<String>) -> Held {
    Held {
        limit: limit.to_string(),
        asked: asked.to_string(),
        by,
        note,
    }
}

/// A limit that was not asked for: nothing to enforce, nothing to say.
fn unlimited(limit: &str, asked: &str) -> Held {
    held(limit, asked, By::NotAsked, None)
}

/// Why the cgroup limits cannot apply, in words.
fn why_not(cgroups: Cgroups, rootless: bool) -> String {
    match (rootless, cgroups.version) {
        (true, 1) => "rootless podman on cgroup v1".to_string(),
        (true, _) => "rootless podman on cgroup v2 without the controllers delegated to your user"
            .to_string(),
        (false, version) => format!("the host's cgroup v{version} lacks the controller"),
    }
}

/// What the container's init really got, read from the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Observed {
    /// Its memory cgroup's limit (`None`: unlimited or unreadable).
    pub cgroup_memory: Option<u64>,
    /// Its pids cgroup's limit.
    pub cgroup_pids: Option<u64>,
    /// Its RLIMIT_DATA (hard).
    pub rlimit_data: Option<u64>,
    /// Its RLIMIT_NPROC (hard).
    pub rlimit_nproc: Option<u64>,
}

impl Observed {
    /// Reads what the process `pid` got: its cgroups (the v1 hierarchies
    /// where a hybrid host has them, else the unified one) and its limits.
    pub fn of_process(pid: u32) -> Observed {
        let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
        let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap_or_default();
        let root = Path::new("/sys/fs/cgroup");
        let read = |file: Option<std::path::PathBuf>| {
            file.and_then(|file| std::fs::read_to_string(file).ok())
                .and_then(|text| text.trim().parse().ok())
        };
        Observed {
            cgroup_memory: read(cgroup_file(
                &cgroups,
                root,
                "memory",
                "memory.limit_in_bytes",
            ))
            .or_else(|| read(unified_file(&cgroups, root, "memory.max"))),
            cgroup_pids: read(cgroup_file(&cgroups, root, "pids", "pids.max"))
                .or_else(|| read(unified_file(&cgroups, root, "pids.max"))),
            rlimit_data: hard_rlimit(&limits, "Max data size"),
            rlimit_nproc: hard_rlimit(&limits, "Max processes"),
        }
    }
}

/// The file `name` of the v1 hierarchy of `controller` for a process whose
/// `/proc/PID/cgroup` is `cgroups`.
fn cgroup_file(
    cgroups: &str,
    root: &Path,
    controller: &str,
    name: &str,
) -> Option<std::path::PathBuf> {
    cgroups.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers.split(',').any(|c| c == controller).then(|| {
            root.join(controller)
                .join(path.trim_start_matches('/'))
                .join(name)
        })
    })
}

/// The file `name` of the unified (v2) hierarchy.
fn unified_file(cgroups: &str, root: &Path, name: &str) -> Option<std::path::PathBuf> {
    cgroups.lines().find_map(|line| {
        let path = line.strip_prefix("0::")?;
        Some(root.join(path.trim_start_matches('/')).join(name))
    })
}

/// The hard value of the `/proc/PID/limits` row `row` (`None`: unlimited).
fn hard_rlimit(limits: &str, row: &str) -> Option<u64> {
    let rest = limits.lines().find_map(|line| line.strip_prefix(row))?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// The plan, corrected by what the container really got: a cgroup limit
/// holds when the cgroup's value is at most the asked one, a stand-in when
/// the process limit is; anything else holds by nothing.
pub fn check(plan: &[Held], seen: &Observed) -> Vec<Held> {
    plan.iter()
        .map(|limit| {
            let (asked, cgroup, rlimit) = match limit.limit.as_str() {
                "memory" => (
                    memory_bytes(&limit.asked),
                    seen.cgroup_memory,
                    seen.rlimit_data,
                ),
                "pids" => (
                    limit.asked.parse().ok().filter(|n| *n > 0),
                    seen.cgroup_pids,
                    seen.rlimit_nproc,
                ),
                _ => return limit.clone(),
            };
            let Some(asked) = asked else {
                return limit.clone();
            };
            let within = |value: Option<u64>| value.is_some_and(|v| v <= asked);
            let mut checked = limit.clone();
            if within(cgroup) {
                checked.by = By::Cgroup;
                checked.note = None;
            } else if within(rlimit) {
                if checked.by != By::Rlimit {
                    checked.by = By::Rlimit;
                    checked.note = Some(format!(
                        "not enforced by the container's cgroup; a per-process limit of {} \
                         stands in",
                        limit.asked
                    ));
                }
            } else {
                checked.by = By::None;
                checked.note = Some(format!(
                    "not enforced: the container's cgroup and process limits allow more \
                     (cgroup {}, process limit {})",
                    shown(cgroup),
                    shown(rlimit)
                ));
            }
            checked
        })
        .collect()
}

fn shown(value: Option<u64>) -> String {
    value.map_or("unlimited".to_string(), |v| v.to_string())
}

/// A memory size as podman takes it (`512m`, `4g`, `1.5GiB`, `1073741824`),
/// in bytes; `None` for 0 (no limit) and what cannot be read.
pub fn memory_bytes(text: &str) -> Option<u64> {
    let lower = text.trim().to_ascii_lowercase();
    let number = lower.strip_suffix('b').unwrap_or(&lower);
    let number = number.strip_suffix('i').unwrap_or(number);
    let (digits, shift) = match number.chars().last() {
        Some('k') => (&number[..number.len() - 1], 10),
        Some('m') => (&number[..number.len() - 1], 20),
        Some('g') => (&number[..number.len() - 1], 30),
        Some('t') => (&number[..number.len() - 1], 40),
        Some('p') => (&number[..number.len() - 1], 50),
        _ => (number, 0),
    };
    let digits = digits.trim();
    let readable = !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit() || c == '.');
    match digits.parse::<f64>() {
        Ok(value) if readable && value > 0.0 => Some((value * (1u64 << shift) as f64) as u64),
        _ => None,
    }
}

/// Whether a command's error output says an allocation failed: what the
/// usual programs print when a data limit refuses them memory (the kernel
/// kills nothing then, so only their words tell).
pub fn says_out_of_memory(stderr: &[u8]) -> bool {
    let text = String::from_utf8_lossy(stderr).to_ascii_lowercase();
    [
        "memoryerror",
        "cannot allocate memory",
        "memory exhausted",
        "out of memory",
        "bad_alloc",
        "memory allocation of",
    ]
    .iter()
    .any(|phrase| text.contains(phrase))
}

#[cfg(test)]
mod tests;
