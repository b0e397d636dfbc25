//! The Kubernetes manifests (`linerate generate kubernetes`), the one source of
//! `deploy/kubernetes/base/`: a namespace, a DaemonSet running `linerate server` on every node,
//! a headless Service naming every agent, a claim for the history and a Job running a fleet
//! against every agent. `tests/kubernetes.rs` checks that the committed base is this output
//! byte for byte, and that each overlay, rendered by `kubectl kustomize`, is the same objects
//! as this output with the matching options; CI validates both against Kubernetes' schemas.
//!
//! Why the objects are as they are:
//! - Every pod runs as the image's user (65532), with a read-only root, no capabilities, no
//!   privilege escalation and the runtime's seccomp profile, so the namespace can enforce the
//!   `restricted` Pod Security level (host network needs `privileged`: the overlay says so).
//! - No pod gets a service-account token: agents discover each other through the headless
//!   Service's DNS name (`fleet --each-address`), not the API, and hold no cluster credentials.
//! - The server is told its node and zone (downward API -> `LINERATE_NODE_NAME`,
//!   `LINERATE_ZONE`) and sends them with every result; in a pod the host name is the pod's.
//!   The zone is the pod's copy of the node's `topology.kubernetes.io/zone` label, which the
//!   PodTopologyLabelsAdmission plugin (Kubernetes 1.33+) sets; elsewhere it is empty, and
//!   the server then names no zone.
//! - `--max-memory` stays under the container's memory limit: by default the server would
//!   admit tests by the node's memory, which a limited container does not have.
//! - The probes are TCP connects to the control port: the image has no shell and no probe
//!   command, and a connect is what a client does first. The startup probe looks every
//!   second, so an agent is ready within a second of listening (the kubelet runs the
//!   readiness probe as soon as the startup probe succeeds); then the readiness probe looks
//!   every 30 s, because each probe is a "closed before its first bytes" line in the log.
//! - The Service publishes agents that are not ready yet, and the Jobs wait for every agent
//!   to answer (`--wait-agents 5m`, `session::agents`), so a Job started beside the
//!   DaemonSet tests every node on its first attempt; one attempt (`backoffLimit: 0`) keeps
//!   failures honest and `kubectl logs job/…` on the one pod that ran.
//! - Fleet and mesh Jobs share the history claim, and its requester lock makes the second
//!   wait for the first (`cmd::keep::requester_lock`): they never load the agents at once.
//! - The claim asks the cluster's default StorageClass for 1 GiB (docs/KUBERNETES.md says what
//!   to do on a cluster without one).

use serde_json::{Value, json};

use crate::plan::kubernetes::KubernetesOptions;

/// The control (and UDP) port.
const PORT: u16 = 5201;
/// The image's user and group (packaging/Containerfile).
const USER: u32 = 65532;
/// Where the history volume is mounted: the image's XDG_DATA_HOME.
const HISTORY: &str = "/var/lib/linerate";
/// The Jobs wait for the agents (`session::agents`): a cluster that pulls the image for
/// minutes still gets every node tested, on the first attempt.
const WAIT: &str = "--wait-agents";
/// Where the key Secret is mounted.
const PSK_DIR: &str = "/etc/linerate/psk";

/// One object and the file it is committed as.
#[derive(Debug)]
pub struct Manifest {
    /// Its file in `deploy/kubernetes/base/`.
    pub file: &'static str,
    /// What it is for: the comment at the file's top.
    pub comment: &'static str,
    /// The object.
    pub object: Value,
}

/// The objects, in the order they are applied (namespace first).
pub fn manifests(o: &KubernetesOptions) -> Vec<Manifest> {
    let mut all = vec![
        Manifest {
            file: "namespace.yaml",
            comment: "The namespace; its Pod Security level is enforced: `restricted` unless the \
                      agents use the host's network.",
            object: namespace(o),
        },
        Manifest {
            file: "daemonset.yaml",
            comment: "A linerate server (an agent) on every node, told its node and zone.",
            object: daemonset(o, o.host_network),
        },
        Manifest {
            file: "service.yaml",
            comment: "Headless: its DNS name resolves to every agent's address, ready or not \
                      (`linerate fleet --each-address linerate --wait-agents 5m` waits for each \
                      to answer).",
            object: service(o, false),
        },
        Manifest {
            file: "history.yaml",
            comment: "The Jobs' history (SQLite), kept across runs, and their requester lock: \
                      bound by the cluster's default StorageClass (docs/KUBERNETES.md: a \
                      cluster without one).",
            object: history(o),
        },
        Manifest {
            file: "fleet-job.yaml",
            comment: "A fleet against every agent from inside the cluster: printed (kubectl logs \
                      job/linerate-fleet) and stored in the history claim.",
            object: job(
                o,
                "fleet",
                &["fleet", "--each-address", "linerate", WAIT, "5m", "-t", "10"],
            ),
        },
    ];
    if o.both_networks {
        all.insert(
            2,
            Manifest {
                file: "host-daemonset.yaml",
                comment: "A second agent on every node, on the node's own network (hostNetwork), \
                      listening on the node's address: the mesh tests each node pair on both \
                      networks and says what the pod network costs.",
                object: daemonset(o, true),
            },
        );
        all.insert(
            4,
            Manifest {
                file: "host-service.yaml",
                comment: "Headless, the host-network agents' name (`linerate-host`), as `linerate` \
                      is the pod-network agents'.",
                object: service(o, true),
            },
        );
    }
    let agents: &[&str] =
        if o.both_networks { &["linerate", "linerate-host"] } else { &["linerate"] };
    let mesh = [&["mesh", "--each-address"], agents, &[WAIT, "5m", "-t", "10"]].concat();
    match (o.mesh, &o.schedule) {
        (false, _) => {}
        (true, None) => all.push(Manifest {
            file: "mesh-job.yaml",
            comment: "A mesh of the agents from inside the cluster: every node pair tested, \
                      printed (kubectl logs job/linerate-mesh) and stored in the history claim.",
            object: job(o, "mesh", &mesh),
        }),
        (true, Some(schedule)) => all.push(Manifest {
            file: "mesh-cronjob.yaml",
            comment: "A mesh of the agents on a schedule, one at a time: every node pair tested \
                      each time, each mesh stored in the history claim and set against the \
                      meshes before it (kubectl logs job/NAME of the newest Job; \
                      kubectl create job --from=cronjob/linerate-mesh NAME runs one now).",
            object: cronjob(job(o, "mesh", &[&mesh[..], &["--slip", SLIP]].concat()), schedule),
        }),
    }
    all
}

/// A scheduled mesh starts a random 0 to this after its time (`--slip`): meshes of several
/// clusters on one schedule do not all load a shared fabric at the same second.
const SLIP: &str = "1m";

/// `job` run by a CronJob on `schedule`: one at a time (a mesh still running when the next
/// is due makes the next wait its turn, never overlap: `Forbid`), a start missed by more
/// than 10 minutes skipped (a late mesh would overlap the next), the last 3 Jobs of each
/// outcome kept for `kubectl logs`.
fn cronjob(job: Value, schedule: &str) -> Value {
    json!({
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": job["metadata"],
        "spec": {
            "schedule": schedule,
            "concurrencyPolicy": "Forbid",
            "startingDeadlineSeconds": 600,
            "successfulJobsHistoryLimit": 3,
            "failedJobsHistoryLimit": 3,
            "jobTemplate": {"metadata": {"labels": job["metadata"]["labels"]}, "spec": job["spec"]},
        },
    })
}

/// The manifests as one YAML stream (`kubectl apply -f -`).
pub fn stream(o: &KubernetesOptions) -> String {
    let mut out = String::new();
    for m in manifests(o) {
        out.push_str("---\n");
        out.push_str(&file_text(&m, ""));
    }
    out
}

/// Each file of `deploy/kubernetes/base/` for these options, kustomization.yaml last.
pub fn files(o: &KubernetesOptions) -> Vec<(String, String)> {
    let all = manifests(o);
    let resources: Vec<&str> = all.iter().map(|m| m.file).collect();
    let mut out: Vec<(String, String)> =
        all.iter().map(|m| (m.file.to_string(), file_text(m, HEADER))).collect();
    let kustomization = json!({
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": resources,
    });
    out.push((
        "kustomization.yaml".into(),
        format!("{HEADER}{}", crate::report::yaml::to_yaml(&kustomization)),
    ));
    out
}

/// Atop every file: where it comes from.
const HEADER: &str = "# Written by `linerate generate kubernetes --dir deploy/kubernetes/base`: \
                      change\n# crates/linerate/src/report/kubernetes.rs and run it again \
                      (tests/kubernetes.rs checks).\n";

/// The object as YAML under `header` and its comment.
fn file_text(m: &Manifest, header: &str) -> String {
    let mut comment = String::new();
    for line in wrap(m.comment, 95) {
        comment.push_str("# ");
        comment.push_str(&line);
        comment.push('\n');
    }
    format!("{header}{comment}{}", crate::report::yaml::to_yaml(&m.object))
}

/// Words into lines of at most `width` characters.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        match lines.last_mut() {
            Some(line) if line.len() + 1 + word.len() <= width => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    lines
}

fn labels(component: &str) -> Value {
    json!({"app.kubernetes.io/name": "linerate", "app.kubernetes.io/component": component})
}

fn metadata(o: &KubernetesOptions, name: &str, component: &str) -> Value {
    json!({"name": name, "namespace": o.namespace, "labels": labels(component)})
}

fn namespace(o: &KubernetesOptions) -> Value {
    let level = if o.host_network || o.both_networks { "privileged" } else { "restricted" };
    json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": o.namespace,
            "labels": {
                "app.kubernetes.io/name": "linerate",
                "pod-security.kubernetes.io/enforce": level,
            },
        },
    })
}

/// The pod's security settings: the image's user, its group owning mounted volumes (the
/// history claim, the key Secret), the runtime's seccomp profile.
fn pod_security() -> Value {
    json!({
        "runAsNonRoot": true,
        "runAsUser": USER,
        "runAsGroup": USER,
        "fsGroup": USER,
        "seccompProfile": {"type": "RuntimeDefault"},
    })
}

fn container_security() -> Value {
    json!({
        "allowPrivilegeEscalation": false,
        "readOnlyRootFilesystem": true,
        "capabilities": {"drop": ["ALL"]},
    })
}

fn field(name: &str, path: &str) -> Value {
    json!({"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}})
}

/// The key Secret's volume and mount, and the flag that reads it, if there is a key.
fn psk(o: &KubernetesOptions, pod: &mut Value, args: &mut Vec<String>) {
    let Some(secret) = &o.psk_secret else { return };
    let volume = json!({
        "name": "psk",
        // Readable by the pod's group (fsGroup): the image's user.
        "secret": {"secretName": secret, "defaultMode": 0o440},
    });
    first(&mut pod["volumes"], volume);
    let mount = json!({"name": "psk", "mountPath": PSK_DIR, "readOnly": true});
    first(&mut pod["containers"][0]["volumeMounts"], mount);
    args.push(format!("--psk-file={PSK_DIR}/psk"));
}

/// Puts `item` first in a list that may not be there yet: where the overlay's strategic
/// merge puts what it adds, so that both give the same objects.
fn first(list: &mut Value, item: Value) {
    match list {
        Value::Array(items) => items.insert(0, item),
        other => *other = Value::Array(vec![item]),
    }
}

/// The agents' DaemonSet: on the pod network (`linerate-server`), or on each node's own
/// (`host`: `linerate-server` with `--host-network`, `linerate-server-host` beside the pod
/// network's with `--both-networks`).
fn daemonset(o: &KubernetesOptions, host: bool) -> Value {
    let mut args: Vec<String> = ["server", "--max-memory", "384M"].map(String::from).to_vec();
    let mut pod = json!({
        "automountServiceAccountToken": false,
        "enableServiceLinks": false,
        "securityContext": pod_security(),
        "terminationGracePeriodSeconds": 15,
        "containers": [{
            "name": "server",
            "image": o.image,
            "imagePullPolicy": "IfNotPresent",
            // Filled in below, once the options have added theirs.
            "args": [],
            "env": [
                field("LINERATE_NODE_NAME", "spec.nodeName"),
                field("LINERATE_ZONE", "metadata.labels['topology.kubernetes.io/zone']"),
                // The pod's address: the host-network agents listen on it alone
                // (`--bind=$(POD_IP)`, which the kubelet expands).
                field("POD_IP", "status.podIP"),
            ],
            "ports": [
                {"name": "linerate", "containerPort": PORT, "protocol": "TCP"},
                {"name": "linerate-udp", "containerPort": PORT, "protocol": "UDP"},
            ],
            // Ready as soon as it listens: the startup probe looks every second, and the
            // kubelet runs the readiness probe at once when it succeeds (a readiness probe
            // alone waits its whole period after a first try that came too early).
            "startupProbe": {
                "tcpSocket": {"port": "linerate"},
                "periodSeconds": 1,
                "failureThreshold": 120,
            },
            "readinessProbe": {
                "tcpSocket": {"port": "linerate"},
                "periodSeconds": 30,
            },
            // A CPU limit caps the figures: raise it for fast NICs (a capped run's verdict
            // says `cpu` or `starved`).
            "resources": {
                "requests": {"cpu": "250m", "memory": "64Mi"},
                "limits": {"cpu": "2", "memory": "512Mi"},
            },
            "securityContext": container_security(),
        }],
    });
    psk(o, &mut pod, &mut args);
    if o.mesh {
        args.push("--agent".into());
    }
    if o.both_networks {
        args.push(format!("--network={}", if host { "host" } else { "pod" }));
    }
    if host {
        pod["hostNetwork"] = json!(true);
        // The cluster's DNS still, not the node's.
        pod["dnsPolicy"] = json!("ClusterFirstWithHostNet");
        // The node's address only, not every interface of the host.
        args.push("--bind=$(POD_IP)".into());
    }
    pod["containers"][0]["args"] = json!(args);
    let (_, component) = agents_of(o, host);
    json!({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": metadata(o, &format!("linerate-{component}"), component),
        "spec": {
            "selector": {"matchLabels": labels(component)},
            "template": {"metadata": {"labels": labels(component)}, "spec": pod},
        },
    })
}

/// The name of the agents' Service and their component label: `linerate`, `server`; with
/// `--both-networks` the host network's are `linerate-host`, `server-host`.
fn agents_of(o: &KubernetesOptions, host: bool) -> (&'static str, &'static str) {
    match o.both_networks && host {
        true => ("linerate-host", "server-host"),
        false => ("linerate", "server"),
    }
}

fn service(o: &KubernetesOptions, host: bool) -> Value {
    let (name, component) = agents_of(o, host);
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(o, name, component),
        "spec": {
            "clusterIP": "None",
            // Agents are named as soon as they have an address, ready or not: the Jobs wait
            // for each to answer (`--wait-agents`) rather than test whichever were ready.
            "publishNotReadyAddresses": true,
            "selector": labels(component),
            "ports": [
                {"name": "linerate", "port": PORT, "targetPort": PORT, "protocol": "TCP"},
                {"name": "linerate-udp", "port": PORT, "targetPort": PORT, "protocol": "UDP"},
            ],
        },
    })
}

fn history(o: &KubernetesOptions) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": metadata(o, "linerate-history", "fleet"),
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
        },
    })
}

/// The Job `linerate-WHAT` running `linerate ARGS` (a fleet, a mesh) against every agent.
fn job(o: &KubernetesOptions, what: &str, args: &[&str]) -> Value {
    // `linerate` resolves through the pod's DNS search path to the headless Service of its
    // own namespace, whatever the namespace and cluster domain are.
    let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let mut pod = json!({
        "restartPolicy": "Never",
        "automountServiceAccountToken": false,
        "enableServiceLinks": false,
        "securityContext": pod_security(),
        "containers": [{
            "name": what,
            "image": o.image,
            "imagePullPolicy": "IfNotPresent",
            "args": [],
            "env": [{"name": "XDG_DATA_HOME", "value": HISTORY}],
            "resources": {
                "requests": {"cpu": "500m", "memory": "128Mi"},
                "limits": {"cpu": "2", "memory": "512Mi"},
            },
            "securityContext": container_security(),
            "volumeMounts": [{"name": "history", "mountPath": HISTORY}],
        }],
        "volumes": [{"name": "history", "persistentVolumeClaim": {"claimName": "linerate-history"}}],
    });
    psk(o, &mut pod, &mut args);
    pod["containers"][0]["args"] = json!(args);
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata(o, &format!("linerate-{what}"), what),
        "spec": {
            // One attempt: the requester waits for the agents itself (`--wait-agents`), so a
            // failure is real, and `kubectl logs job/…` shows the one pod's result. A pod lost
            // to a disruption (a drained node, a preemption) is replaced without counting.
            "backoffLimit": 0,
            "podFailurePolicy": {
                "rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}],
            },
            "template": {"metadata": {"labels": labels(what)}, "spec": pod},
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_reach_every_object() {
        let o = KubernetesOptions {
            namespace: "bench".into(),
            image: "reg.example/linerate:9".into(),
            host_network: true,
            psk_secret: Some("key".into()),
            mesh: true,
            schedule: None,
            both_networks: false,
        };
        let all = manifests(&o);
        assert_eq!(all.len(), 6, "the mesh Job besides the fleet Job");
        for m in &all[1..] {
            assert_eq!(m.object["metadata"]["namespace"], "bench", "{}", m.file);
        }
        let ds = &all[1].object["spec"]["template"]["spec"];
        let job = &all[4].object["spec"]["template"]["spec"];
        let mesh = &all[5].object["spec"]["template"]["spec"];
        assert_eq!(mesh["containers"][0]["args"][0], "mesh");
        assert!(ds["containers"][0]["args"].as_array().expect("args").contains(&json!("--agent")));
        for pod in [ds, job, mesh] {
            assert_eq!(pod["containers"][0]["image"], "reg.example/linerate:9");
            assert_eq!(pod["volumes"][0]["secret"]["secretName"], "key");
            let args = pod["containers"][0]["args"].as_array().expect("args");
            assert!(args.contains(&json!("--psk-file=/etc/linerate/psk/psk")), "{args:?}");
        }
        assert_eq!(ds["hostNetwork"], true);
        assert_eq!(
            all[0].object["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
            "privileged"
        );
        let base = stream(&KubernetesOptions::default());
        assert!(!base.contains("hostNetwork") && !base.contains("psk"), "{base}");
        assert!(!base.contains("--agent") && !base.contains("linerate-mesh"), "{base}");
        assert!(base.contains("pod-security.kubernetes.io/enforce: restricted"));
        let scheduled = KubernetesOptions { schedule: Some("0 * * * *".into()), ..o };
        let all = manifests(&scheduled);
        let cron = &all[5].object;
        assert_eq!((cron["kind"].as_str(), all[5].file), (Some("CronJob"), "mesh-cronjob.yaml"));
        assert_eq!(cron["spec"]["concurrencyPolicy"], "Forbid");
        let pod = &cron["spec"]["jobTemplate"]["spec"]["template"]["spec"];
        let args = pod["containers"][0]["args"].as_array().expect("args");
        assert!(
            args.contains(&json!("--slip")) && args.contains(&json!("--wait-agents")),
            "{args:?}"
        );
    }

    #[test]
    fn both_networks_put_an_agent_of_each_on_every_node_and_mesh_them_together() {
        let o = KubernetesOptions {
            psk_secret: Some("key".into()),
            mesh: true,
            both_networks: true,
            ..KubernetesOptions::default()
        };
        let all = manifests(&o);
        let files: Vec<&str> = all.iter().map(|m| m.file).collect();
        assert_eq!(
            files,
            [
                "namespace.yaml",
                "daemonset.yaml",
                "host-daemonset.yaml",
                "service.yaml",
                "host-service.yaml",
                "history.yaml",
                "fleet-job.yaml",
                "mesh-job.yaml"
            ]
        );
        let args =
            |m: &Manifest| m.object["spec"]["template"]["spec"]["containers"][0]["args"].clone();
        let (pod, host) = (&all[1].object, &all[2].object);
        assert_eq!(pod["spec"]["template"]["spec"]["hostNetwork"], Value::Null);
        assert_eq!(host["spec"]["template"]["spec"]["hostNetwork"], true);
        assert!(args(&all[1]).as_array().expect("args").contains(&json!("--network=pod")));
        let host_args = args(&all[2]);
        for want in ["--network=host", "--bind=$(POD_IP)", "--agent"] {
            assert!(host_args.as_array().expect("args").contains(&json!(want)), "{host_args}");
        }
        // Each Service selects its own DaemonSet's pods.
        let selects =
            |s: &Value, d: &Value| s["spec"]["selector"] == d["spec"]["selector"]["matchLabels"];
        assert!(selects(&all[3].object, pod) && selects(&all[4].object, host));
        assert!(!selects(&all[3].object, host));
        assert_eq!(all[4].object["metadata"]["name"], "linerate-host");
        let mesh = args(&all[7]);
        assert_eq!((&mesh[2], &mesh[3]), (&json!("linerate"), &json!("linerate-host")), "{mesh}");
        assert_eq!(
            all[0].object["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
            "privileged"
        );
    }
}
