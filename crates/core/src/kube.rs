//! `ah kube manifest RUN`: a saved run written as the Kubernetes objects
//! that would be its sandbox in a cluster, a Pod and a NetworkPolicy,
//! from what its manifest recorded (`facts`). No cluster is talked to:
//! the text is for `kubectl apply -f -` or `podman kube play -`. The
//! objects are built in `objects`, what reaches a name or a label is
//! checked in `names`, and the design behind them is "Kubernetes (design)"
//! in ARCHITECTURE.md.
//!
//! The documents are JSON, each under `#` comment lines and separated by
//! `---`: YAML 1.2 is a superset of JSON and every Kubernetes tool reads
//! it, while the tree has no YAML writer. `serde_json` quotes every string
//! it writes, so nothing from a run (its id, its image) can become YAML
//! structure, whatever it holds.

mod facts;
mod names;
mod objects;

use std::path::Path;

use anyhow::{Context, Result};
use serde_json::Value;

use ah_sandbox::channel::agent::COMMAND;
use ah_sandbox::podman::SHARED_AGENT_PATH;

/// The image the Pod's init container copies the init and the agent
/// from, unless told otherwise: one holding catatonit at
/// `/usr/lib/ah/init` and ah at `/usr/lib/ah/agent` (README, "ah kube
/// manifest", says how to build it).
pub const RUNTIME_IMAGE: &str = "localhost/ah-runtime:latest";

/// What `ah kube manifest` may be told.
#[derive(Debug, Clone, Default)]
pub struct KubeOptions {
    /// The init container's image ([`RUNTIME_IMAGE`] when `None`).
    pub runtime_image: Option<String>,
}

/// The objects of a run, and what the user should know about them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeManifest {
    /// The documents, ready to print.
    pub yaml: String,
    /// Where the Pod differs from the run or from what its manifest said
    /// (a default taken, a network not carried over), one line each.
    pub notes: Vec<String>,
}

/// The Pod and the NetworkPolicy of `project`'s run whose id starts with
/// `run` (`ah runs` lists them).
pub fn manifest(project: &Path, run: &str, options: &KubeOptions) -> Result<KubeManifest> {
    let facts = facts::read(project, run)?;
    let runtime_image = names::image(
        options.runtime_image.as_deref().unwrap_or(RUNTIME_IMAGE),
        "the runtime image",
    )?;
    let name = names::object_name(&facts.id, objects::LONGEST_SUFFIX)
        .with_context(|| format!("cannot write the objects of run {}", facts.id))?;
    let pod = objects::pod(&facts, &name, &runtime_image)?;
    let policy = objects::network_policy(&facts, &name)?;
    // The policy first: applied in order, the Pod never runs without it.
    let yaml = [
        document(&policy_comment(&facts), &policy)?,
        document(&pod_comment(&facts, &runtime_image), &pod)?,
    ]
    .join("---\n");
    Ok(KubeManifest {
        yaml,
        notes: facts.notes,
    })
}

/// One document: `comment`'s lines as `#` lines, then `value`.
fn document(comment: &[String], value: &Value) -> Result<String> {
    let mut text: String = comment.iter().map(|line| format!("# {line}\n")).collect();
    text.push_str(&serde_json::to_string_pretty(value).context("cannot write the objects")?);
    text.push('\n');
    Ok(text)
}

fn policy_comment(facts: &facts::RunFacts) -> Vec<String> {
    vec![
        format!(
            "ah run {}: its sandbox as Kubernetes objects (ah kube manifest), the policy",
            facts.id
        ),
        "first so that the Pod never runs without it. Deny all: both directions named, no"
            .to_string(),
        "rule in either. Policies add up (a Pod may send what any policy selecting it".to_string(),
        "allows), so no other policy may select this Pod: see \"Kubernetes (design)\" in"
            .to_string(),
        format!(
            "ARCHITECTURE.md. The run's network: {}. Its proxy mode would need an egress proxy",
            facts.network.as_deref().unwrap_or("not recorded")
        ),
        "Pod holding the run's allowlist, and one egress rule to that Pod alone.".to_string(),
    ]
}

fn pod_comment(facts: &facts::RunFacts, runtime_image: &str) -> Vec<String> {
    vec![
        format!(
            "The init container copies init and agent from {runtime_image} into {}",
            objects::RUNTIME_DIR
        ),
        "(read-only in the sandbox); PID 1 is the init; the command channel is `exec -i` of"
            .to_string(),
        format!("{SHARED_AGENT_PATH} {COMMAND}."),
        format!(
            "Process limit {}: no Pod field holds it; the node's kubelet podPidsLimit must.",
            facts.pids
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_document_is_comments_then_json() {
        let value = serde_json::json!({"kind": "Pod", "text": "a\n---\nkind: Secret # x"});
        let text = document(&["one".to_string()], &value).unwrap_or_else(|e| panic!("{e:#}"));
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some("# one"));
        let json: String = lines.collect::<Vec<_>>().join("\n");
        let back: Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"));
        assert_eq!(back, value);
        // The hostile text stays one quoted scalar on one line.
        assert!(!text.lines().any(|l| l == "---" || l.starts_with("kind")));
    }
}
