//! The two objects of a run, as JSON values: a Pod that is ah's sandbox
//! (no service account token, no host namespace, a non-root user without
//! capabilities on a read-only root, the run's limits, `/work` and `/tmp`
//! on `emptyDir`s, the init as PID 1 and the agent beside it in a
//! read-only `/run/ah` an init container fills from the runtime image),
//! and a NetworkPolicy that denies it all traffic. Every value is set
//! here or checked by `names`; `serde_json` writes it, so no text of the
//! run's can become structure.

use serde_json::{Value, json};

use super::facts::RunFacts;
use super::names::{label_value, quantity};
use ah_sandbox::egress::NetworkMode;
use ah_sandbox::podman::{SANDBOX_UID, SHARED_INIT_PATH, container_env};

/// The folder holding the init and the agent in the Pod, a read-only
/// `emptyDir` ([`SHARED_INIT_PATH`] and [`SHARED_AGENT_PATH`] are in it).
pub(super) const RUNTIME_DIR: &str = "/run/ah";
/// Where the runtime image keeps `init` (catatonit) and `agent` (ah).
pub(super) const RUNTIME_SOURCE: &str = "/usr/lib/ah";
/// The Pod's volumes, by the suffix each adds to the Pod's name (podman
/// makes a named volume of an `emptyDir` under the volume's name, so the
/// names are the run's alone).
pub(super) const VOLUMES: [(&str, &str); 3] =
    [("-ah", RUNTIME_DIR), ("-work", "/work"), ("-tmp", "/tmp")];
/// The longest of the volume suffixes.
pub(super) const LONGEST_SUFFIX: usize = 5;
/// ah sets no CPU limit on podman; a cluster schedules by a request.
const CPU_REQUEST: &str = "500m";
const CPU_LIMIT: &str = "2";
/// The runtime folder holds two programs, ah the larger.
const RUNTIME_SIZE: &str = "512Mi";

/// The objects' labels: the run, and what made it. A policy of ah's
/// selects its Pod by `ah.run`.
pub(super) fn labels(facts: &RunFacts) -> anyhow::Result<Value> {
    Ok(json!({
        "ah.run": label_value(&facts.id)?,
        "app.kubernetes.io/name": "ah-sandbox",
        "app.kubernetes.io/managed-by": "ah",
    }))
}

/// The security context of both containers: what the podman backend's
/// flags give a container, in the Pod's words.
fn security_context() -> Value {
    json!({
        "allowPrivilegeEscalation": false,
        "capabilities": {"drop": ["ALL"]},
        "privileged": false,
        "readOnlyRootFilesystem": true,
        "runAsNonRoot": true,
        "runAsUser": SANDBOX_UID,
        "runAsGroup": SANDBOX_UID,
        "seccompProfile": {"type": "RuntimeDefault"},
    })
}

/// The run's Pod, named `name`, its init container from `runtime_image`.
pub(super) fn pod(facts: &RunFacts, name: &str, runtime_image: &str) -> anyhow::Result<Value> {
    let volume = |suffix: &str| format!("{name}{suffix}");
    let runtime = volume(VOLUMES[0].0);
    let (env, _) = container_env(NetworkMode::None, &[], &|_| None);
    let env: Vec<Value> = env
        .into_iter()
        .map(|(name, value)| json!({"name": name, "value": value}))
        .collect();
    let mounts: Vec<Value> = VOLUMES
        .iter()
        .map(|(suffix, path)| {
            json!({"name": volume(suffix), "mountPath": path, "readOnly": *path == RUNTIME_DIR})
        })
        .collect();
    let memory = quantity(facts.memory);
    let disk = quantity(facts.disk);
    let resources = json!({"memory": memory, "cpu": CPU_LIMIT, "ephemeral-storage": disk});
    let install = json!([
        "install",
        "-m",
        "0111",
        format!("{RUNTIME_SOURCE}/init"),
        format!("{RUNTIME_SOURCE}/agent"),
        format!("{RUNTIME_DIR}/"),
    ]);
    Ok(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": labels(facts)?,
            "annotations": {
                "ah.pids-limit": facts.pids.to_string(),
                "ah.network": facts.network.as_deref().unwrap_or("none"),
            },
        },
        "spec": {
            "automountServiceAccountToken": false,
            "enableServiceLinks": false,
            "hostNetwork": false,
            "hostPID": false,
            "hostIPC": false,
            "shareProcessNamespace": false,
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 10,
            "securityContext": {
                "runAsNonRoot": true,
                "runAsUser": SANDBOX_UID,
                "runAsGroup": SANDBOX_UID,
                "fsGroup": SANDBOX_UID,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "initContainers": [{
                "name": "ah-runtime",
                "image": runtime_image,
                "imagePullPolicy": "IfNotPresent",
                "command": install,
                "securityContext": security_context(),
                "resources": {
                    "requests": {"memory": "64Mi", "cpu": "100m"},
                    "limits": {"memory": "128Mi", "cpu": "1"},
                },
                "volumeMounts": [{"name": runtime, "mountPath": RUNTIME_DIR}],
            }],
            "containers": [{
                "name": "sandbox",
                "image": facts.image,
                "imagePullPolicy": "IfNotPresent",
                "command": [SHARED_INIT_PATH, "-P"],
                "workingDir": "/work",
                "env": env,
                "securityContext": security_context(),
                "resources": {
                    "requests": {"memory": memory, "cpu": CPU_REQUEST, "ephemeral-storage": disk},
                    "limits": resources,
                },
                "volumeMounts": mounts,
            }],
            "volumes": [
                {"name": runtime, "emptyDir": {"sizeLimit": RUNTIME_SIZE}},
                {"name": volume(VOLUMES[1].0), "emptyDir": {"sizeLimit": disk}},
                {"name": volume(VOLUMES[2].0), "emptyDir": {"sizeLimit": disk}},
            ],
        },
    }))
}

/// The policy of the run's Pod: both directions named, no rule in either,
/// so nothing goes in or out.
pub(super) fn network_policy(facts: &RunFacts, name: &str) -> anyhow::Result<Value> {
    Ok(json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "labels": labels(facts)?},
        "spec": {
            "podSelector": {"matchLabels": {"ah.run": label_value(&facts.id)?}},
            "policyTypes": ["Ingress", "Egress"],
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ah_sandbox::podman::SHARED_AGENT_PATH;

    fn facts() -> RunFacts {
        RunFacts {
            id: "01HZY8J5Q8W3V4N1T2C6B7D9EF".to_string(),
            image: "localhost/ah-sandbox:latest".to_string(),
            network: Some("none".to_string()),
            memory: 512 << 20,
            pids: 256,
            disk: 1 << 30,
            notes: Vec::new(),
        }
    }

    fn pod_of(facts: &RunFacts) -> Value {
        pod(
            facts,
            "ah-01hzy8j5q8w3v4n1t2c6b7d9ef",
            "localhost/ah-runtime:latest",
        )
        .unwrap_or_else(|e| panic!("{e:#}"))
    }

    #[test]
    fn the_shared_paths_lie_in_the_runtime_folder() {
        assert_eq!(SHARED_INIT_PATH, format!("{RUNTIME_DIR}/init"));
        assert_eq!(SHARED_AGENT_PATH, format!("{RUNTIME_DIR}/agent"));
        let longest = VOLUMES.iter().map(|(s, _)| s.len()).max();
        assert_eq!(longest, Some(LONGEST_SUFFIX));
    }

    #[test]
    fn the_pod_is_closed_like_the_podman_sandbox() {
        let pod = pod_of(&facts());
        let spec = &pod["spec"];
        assert_eq!(spec["automountServiceAccountToken"], json!(false));
        assert_eq!(spec["enableServiceLinks"], json!(false));
        for host in ["hostNetwork", "hostPID", "hostIPC", "shareProcessNamespace"] {
            assert_eq!(spec[host], json!(false), "{host}");
        }
        assert_eq!(spec["restartPolicy"], json!("Never"));
        let sandbox = &spec["containers"][0];
        for container in [sandbox, &spec["initContainers"][0]] {
            let context = &container["securityContext"];
            assert_eq!(context["runAsNonRoot"], json!(true));
            assert_eq!(context["runAsUser"], json!(SANDBOX_UID));
            assert_eq!(context["allowPrivilegeEscalation"], json!(false));
            assert_eq!(context["capabilities"]["drop"], json!(["ALL"]));
            assert_eq!(context["readOnlyRootFilesystem"], json!(true));
            assert_eq!(context["seccompProfile"]["type"], json!("RuntimeDefault"));
        }
        assert_eq!(sandbox["command"], json!(["/run/ah/init", "-P"]));
        assert_eq!(sandbox["resources"]["limits"]["memory"], json!("512Mi"));
        assert_eq!(
            sandbox["resources"]["limits"]["ephemeral-storage"],
            json!("1Gi")
        );
        assert_eq!(
            pod["metadata"]["annotations"]["ah.pids-limit"],
            json!("256")
        );
        let mounts = sandbox["volumeMounts"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let runtime = mounts.iter().find(|m| m["mountPath"] == json!("/run/ah"));
        assert_eq!(runtime.map(|m| &m["readOnly"]), Some(&json!(true)));
        let env = sandbox["env"].to_string();
        assert!(env.contains("HOME") && !env.contains("PROXY"), "{env}");
    }

    #[test]
    fn the_policy_selects_the_run_and_allows_nothing() {
        let policy = network_policy(&facts(), "ah-01hzy8j5q8w3v4n1t2c6b7d9ef")
            .unwrap_or_else(|e| panic!("{e:#}"));
        let spec = &policy["spec"];
        assert_eq!(
            spec["podSelector"]["matchLabels"]["ah.run"],
            json!("01HZY8J5Q8W3V4N1T2C6B7D9EF")
        );
        assert_eq!(spec["policyTypes"], json!(["Ingress", "Egress"]));
        assert!(spec.get("ingress").is_none() && spec.get("egress").is_none());
    }
}
