//! What a saved run recorded that a Pod is made from: its id, its image,
//! its network mode and its limits (memory, processes, disk), read from
//! `manifest.json`. What a run did not record (a `--backend none` run has
//! no image; an older manifest no limits) is taken from ah's defaults, and
//! each such choice is said in a note for the user.

use std::path::Path;

use anyhow::{Context, Result};

use super::names;
use crate::config::settings::SandboxSettings;
use crate::runs::find_run;
use ah_record::rundir::Manifest;
use ah_sandbox::limits::{Held, memory_bytes};
use ah_sandbox::podman::DEFAULT_IMAGE;

/// One run, as far as a Pod needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct RunFacts {
    /// The run's id: the name of its folder, a ULID.
    pub id: String,
    pub image: String,
    /// As recorded (`none`, `proxy`, `full`); `None` for a run without a
    /// sandbox.
    pub network: Option<String>,
    pub memory: u64,
    pub pids: u32,
    pub disk: u64,
    /// What was not recorded and was chosen here, in words.
    pub notes: Vec<String>,
}

/// The facts of the project's run whose id starts with `prefix`.
pub(super) fn read(project: &Path, prefix: &str) -> Result<RunFacts> {
    let run = find_run(&project.join(".ah"), prefix)?;
    let manifest = run.read_manifest().with_context(|| {
        format!(
            "run {} has no readable manifest, so there is nothing to make a Pod from",
            run.id()
        )
    })?;
    from_manifest(&run.id().to_string(), &manifest)
}

/// The facts of run `id` (its folder's name) from its `manifest`.
pub(super) fn from_manifest(id: &str, manifest: &Manifest) -> Result<RunFacts> {
    let defaults = SandboxSettings::default();
    let mut notes = Vec::new();
    let image = match manifest.image.as_deref() {
        Some(image) => names::image(image, "the run's image")?,
        None => {
            notes.push(format!(
                "run {id} recorded no image (it ran without a sandbox): the Pod runs {DEFAULT_IMAGE}"
            ));
            DEFAULT_IMAGE.to_string()
        }
    };
    let asked = |name: &str| {
        manifest
            .limits
            .iter()
            .find(|held: &&Held| held.limit == name)
            .map(|held| held.asked.as_str())
    };
    let mut or_default = |name: &str, found: Option<u64>, default: u64, shown: &str| match found {
        Some(value) => value,
        None => {
            notes.push(format!(
                "run {id} had no {name} limit: the Pod gets ah's default, {shown}"
            ));
            default
        }
    };
    let memory = or_default(
        "memory",
        asked("memory").and_then(memory_bytes),
        memory_bytes(&defaults.memory).unwrap_or(4 << 30),
        &defaults.memory,
    );
    let pids = or_default(
        "process",
        asked("pids")
            .and_then(|text| text.parse::<u32>().ok())
            .filter(|&n| n > 0)
            .map(u64::from),
        defaults.pids_limit.into(),
        &defaults.pids_limit.to_string(),
    );
    let disk = or_default(
        "disk",
        asked("disk").and_then(|text| text.parse::<u64>().ok()),
        ah_sandbox::disk::parse_size(&defaults.disk_budget).unwrap_or(10 << 30),
        &defaults.disk_budget,
    );
    match manifest.network.as_deref() {
        Some("none") => {}
        Some(mode) => notes.push(format!(
            "run {id} had network {mode:?}: the Pod gets no network at all (its policy denies \
             all traffic); see \"Kubernetes (design)\" in ARCHITECTURE.md for what the proxy \
             mode needs"
        )),
        None => notes.push(format!(
            "run {id} recorded no network mode: the Pod gets no network at all"
        )),
    }
    Ok(RunFacts {
        id: id.to_string(),
        image,
        network: manifest.network.clone(),
        memory,
        pids: u32::try_from(pids).unwrap_or(u32::MAX),
        disk,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ah_sandbox::limits::By;

    fn held(limit: &str, asked: &str) -> Held {
        Held {
            limit: limit.to_string(),
            asked: asked.to_string(),
            by: By::Cgroup,
            note: None,
        }
    }

    #[test]
    fn a_podman_run_gives_its_own_image_network_and_limits() {
        let manifest = Manifest {
            image: Some("localhost/ah-sandbox:latest".to_string()),
            network: Some("none".to_string()),
            limits: vec![
                held("memory", "512m"),
                held("pids", "256"),
                held("disk", "1073741824"),
            ],
            ..Manifest::default()
        };
        let facts = from_manifest("01HZY8J5Q8W3V4N1T2C6B7D9EF", &manifest)
            .unwrap_or_else(|e| panic!("{e:#}"));
        assert_eq!(facts.image, "localhost/ah-sandbox:latest");
        assert_eq!(
            (facts.memory, facts.pids, facts.disk),
            (512 << 20, 256, 1 << 30)
        );
        assert_eq!(facts.notes, Vec::<String>::new());
    }

    #[test]
    fn what_a_run_did_not_record_is_a_default_and_said() {
        let facts = from_manifest("01HZY8J5Q8W3V4N1T2C6B7D9EF", &Manifest::default())
            .unwrap_or_else(|e| panic!("{e:#}"));
        assert_eq!(facts.image, DEFAULT_IMAGE);
        assert_eq!(
            (facts.memory, facts.pids, facts.disk),
            (4 << 30, 1024, 10 << 30)
        );
        let said = facts.notes.join("\n");
        for word in [
            "no image",
            "no memory",
            "no process",
            "no disk",
            "no network",
        ] {
            assert!(said.contains(word), "{said}");
        }
    }

    #[test]
    fn a_network_other_than_none_is_not_carried_over() {
        let manifest = Manifest {
            network: Some("full".to_string()),
            ..Manifest::default()
        };
        let facts = from_manifest("01HZY8J5Q8W3V4N1T2C6B7D9EF", &manifest)
            .unwrap_or_else(|e| panic!("{e:#}"));
        assert!(
            facts
                .notes
                .iter()
                .any(|n| n.contains("\"full\"") && n.contains("no network")),
            "{:?}",
            facts.notes
        );
    }

    #[test]
    fn a_hostile_image_is_refused() {
        let manifest = Manifest {
            image: Some("x\n---\nkind: Secret".to_string()),
            ..Manifest::default()
        };
        assert!(from_manifest("01HZY8J5Q8W3V4N1T2C6B7D9EF", &manifest).is_err());
    }
}
