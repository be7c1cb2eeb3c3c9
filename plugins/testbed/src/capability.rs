//! The testbed's capability attacks: builds and modes that try to act with the host's rights
//! (the host's gate must refuse each). Not for users.
//!
//! | build (feature) | manifest |
//! |---|---|
//! | `cluster-parent` | parent `ClusterTestbed` (cluster-scoped); children ConfigMap, Deployment, ClusterRoleBinding, Lease; `adoptUnowned` |
//! | `twin` | named `testbed-twin`, on the same `Testbed` kind as `testbed`; its mode is `spec.twinMode` (default `idle`) |
//! | `hostile-webhooks` | declares Pods and Leases as related (reads), and registers a mutating webhook `inject` on every Pod and a `Fail` validating webhook `veto-leases` on every Lease update |
//! | `forges-reports` | parent `WasmPlugin`, the host's own kind |
//!
//! | mode | behaviour |
//! |---|---|
//! | `idle` | return nothing (with prune on: every observed child is pruned) |
//! | `kube-system-deployment` | Deployment `<name>-root` in namespace `spec.namespace` (default `kube-system`) with hostPID, hostNetwork and a `hostPath: /` volume |
//! | `bind-authenticated` | ClusterRoleBinding `<name>-everyone` binding ClusterRole `spec.target` (default `wasmop`, the host's) to `system:authenticated` |
//! | `take-lease` | Lease `spec.target` (default `wasmop`) in `spec.namespace` (default `default`) held by `attacker` for 3600 s |
//! | `adopt` | ConfigMap `spec.target` in `spec.namespace` (default `default`) with `data: {takenBy: <name>}` |
//! | `forge` | status `Ready=True` with reason `Forged` |
//!
//! Modes that name no namespace use the parent's namespace, if any.

use serde_json::{Value, json};
use wasmop_sdk::prelude::*;

use crate::Mode;

/// The cluster-scoped `ClusterTestbed` kind (`crds/cluster-testbed.yaml`).
pub fn cluster_testbed_kind() -> Kind {
    Kind::new("test.wasmop.dev", "v1", "ClusterTestbed")
}

fn deployment_kind() -> Kind {
    Kind::new("apps", "v1", "Deployment")
}

fn binding_kind() -> Kind {
    Kind::new("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding")
}

fn lease_kind() -> Kind {
    Kind::new("coordination.k8s.io", "v1", "Lease")
}

/// The manifest of the build, over the testbed's own.
pub fn extend(mut manifest: Manifest) -> Manifest {
    if cfg!(feature = "cluster-parent") {
        manifest = manifest
            .parent(cluster_testbed_kind(), Scope::Cluster)
            .child(deployment_kind())
            .child(binding_kind())
            .child(lease_kind())
            .adopt_unowned(true);
    }
    if cfg!(feature = "twin") {
        manifest.name = "testbed-twin".into();
    }
    if cfg!(feature = "hostile-webhooks") {
        let inject = Webhook::mutating("inject")
            .with_rule(Rule::new([Operation::Create], "", "v1", "pods").scope(RuleScope::Namespaced))
            .timeout_seconds(5);
        let veto = Webhook::validating("veto-leases")
            .with_rule(Rule::new([Operation::Update], "coordination.k8s.io", "v1", "leases").scope(RuleScope::Namespaced))
            .timeout_seconds(5);
        manifest = manifest.related(Kind::new("", "v1", "Pod"), "").related(lease_kind(), "").webhook(inject).webhook(veto);
    }
    if cfg!(feature = "forges-reports") {
        manifest = manifest.parent(Kind::new("wasmop.dev", "v1alpha1", "WasmPlugin"), Scope::Cluster);
    }
    manifest
}

/// The mode a build reads: `spec.twinMode` in the `twin` build, else `spec.mode`.
pub fn mode(spec: &Value) -> &str {
    if cfg!(feature = "twin") { spec["twinMode"].as_str().unwrap_or("idle") } else { spec["mode"].as_str().unwrap_or("ok") }
}

/// The answer of a capability mode; nothing for a mode that is not one.
pub fn reconcile(mode: Mode, req: &Request) -> Response {
    let spec = &req.parent["spec"];
    let name = req.name();
    let field = |key: &str, default: &str| spec[key].as_str().unwrap_or(default).to_owned();
    let namespace = |default: &str| spec["namespace"].as_str().or(req.namespace()).unwrap_or(default).to_owned();
    match mode {
        Mode::Idle => Response::new(),
        Mode::KubeSystemDeployment => Response::new().apply(root_deployment(name, &namespace("kube-system"))),
        Mode::BindAuthenticated => Response::new().apply(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": format!("{name}-everyone")},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": field("target", "wasmop")},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated"}],
        })),
        Mode::TakeLease => Response::new().apply(json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": field("target", "wasmop"), "namespace": namespace("default")},
            "spec": {"holderIdentity": "attacker", "leaseDurationSeconds": 3600},
        })),
        Mode::Adopt => Response::new().apply(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": field("target", "users"), "namespace": namespace("default")},
            "data": {"takenBy": name},
        })),
        Mode::Forge => Response::new().condition(Condition::true_("Ready", "Forged", "forged by testbed")),
        _ => Response::new(),
    }
}

/// A Deployment with every host access at once.
fn root_deployment(name: &str, namespace: &str) -> Value {
    let app = format!("{name}-root");
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": app, "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": {"app": app}},
            "template": {
                "metadata": {"labels": {"app": app}},
                "spec": {
                    "hostPID": true, "hostNetwork": true,
                    "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
                    "containers": [{"name": "root", "image": "registry.invalid/root:1",
                        "volumeMounts": [{"name": "root", "mountPath": "/host"}]}],
                },
            },
        },
    })
}

/// The answer of the `hostile-webhooks` build's webhooks: `inject` mounts the node's root into
/// every Pod, `veto-leases` denies every Lease update.
pub fn admit(webhook: &str, req: &AdmissionRequest) -> Option<Verdict> {
    match webhook {
        "inject" => {
            let mut pod = req.object.clone()?;
            let volumes = &mut pod["spec"]["volumes"];
            if !volumes.is_array() {
                *volumes = json!([]);
            }
            volumes.as_array_mut()?.push(json!({"name": "root", "hostPath": {"path": "/"}}));
            Some(Verdict::mutate(pod))
        }
        "veto-leases" => Some(Verdict::deny("testbed vetoes every Lease update")),
        _ => None,
    }
}
