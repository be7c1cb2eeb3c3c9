//! Host access in Pod specs: what lets a Pod reach the node it runs on — the node's network,
//! process or IPC namespaces, its filesystem (`hostPath` volumes), its ports, or the kernel
//! (privileged containers, added capabilities, an unmasked `/proc`, privilege escalation,
//! Windows host processes).
//!
//! [`violations`] finds every Pod spec an object carries, whatever its kind: a Pod's `spec`,
//! a PodTemplate's `template.spec`, `spec.template.spec` (Deployment, StatefulSet, DaemonSet,
//! ReplicaSet, Job, ReplicationController, and any custom workload of that shape) and
//! `spec.jobTemplate.spec.template.spec` (CronJob). A plugin writes such an object (applies
//! it, or returns it from a mutating webhook) only when the host's policy grants it
//! `allowHostAccess: true`.

use serde_json::Value;

use crate::contract::Kind;

/// Where Pod specs live in objects of any kind (JSON pointers), with the path shown in
/// messages.
const TEMPLATE_SPECS: &[(&str, &str)] = &[
    ("/template/spec", "template.spec"),
    ("/spec/template/spec", "spec.template.spec"),
    ("/spec/jobTemplate/spec/template/spec", "spec.jobTemplate.spec.template.spec"),
];

/// The container lists of a Pod spec.
const CONTAINER_LISTS: &[&str] = &["initContainers", "containers", "ephemeralContainers"];

/// Every host access `object` (of `kind`) asks for, one line each naming the field; empty when
/// it asks for none.
///
/// ```
/// use serde_json::json;
/// use wasmop::contract::Kind;
/// use wasmop::policy::host_access;
/// let deployment = json!({"spec": {"template": {"spec": {
///     "hostPID": true,
///     "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
///     "containers": [{"name": "c", "image": "busybox"}]}}}});
/// assert_eq!(
///     host_access::violations(&Kind::new("apps", "v1", "Deployment"), &deployment),
///     ["spec.template.spec.hostPID is true", "spec.template.spec.volumes[0] (root) mounts the host path \"/\""]
/// );
/// let plain = json!({"spec": {"containers": [{"name": "c", "image": "busybox"}]}});
/// assert!(host_access::violations(&Kind::new("", "v1", "Pod"), &plain).is_empty());
/// ```
pub fn violations(kind: &Kind, object: &Value) -> Vec<String> {
    let mut found = Vec::new();
    for (spec, path) in pod_specs(kind, object) {
        pod_spec(spec, path, &mut found);
    }
    found
}

/// Every Pod spec `object` (of `kind`) carries, with its path for messages.
pub fn pod_specs<'a>(kind: &Kind, object: &'a Value) -> Vec<(&'a Value, &'static str)> {
    let pod = (kind.group.is_empty() && kind.kind == "Pod").then(|| object.get("spec").map(|s| (s, "spec"))).flatten();
    let templates = TEMPLATE_SPECS.iter().filter_map(|(pointer, path)| object.pointer(pointer).map(|s| (s, *path)));
    pod.into_iter().chain(templates).filter(|(spec, _)| spec.is_object()).collect()
}

/// The host access of one Pod spec at `path`.
fn pod_spec(spec: &Value, path: &str, found: &mut Vec<String>) {
    for field in ["hostNetwork", "hostPID", "hostIPC"] {
        if spec.get(field).and_then(Value::as_bool) == Some(true) {
            found.push(format!("{path}.{field} is true"));
        }
    }
    if spec.pointer("/securityContext/windowsOptions/hostProcess").and_then(Value::as_bool) == Some(true) {
        found.push(format!("{path}.securityContext.windowsOptions.hostProcess is true"));
    }
    for (i, volume) in list(spec, "volumes").enumerate() {
        if let Some(host_path) = volume.get("hostPath") {
            let at = host_path.get("path").and_then(Value::as_str).unwrap_or_default();
            found.push(format!("{path}.volumes[{i}] ({}) mounts the host path {at:?}", name(volume)));
        }
    }
    for containers in CONTAINER_LISTS {
        for (i, container) in list(spec, containers).enumerate() {
            let at = format!("{path}.{containers}[{i}] ({})", name(container));
            container_access(container, &at, found);
        }
    }
}

/// The host access of one container, described as `at`.
fn container_access(container: &Value, at: &str, found: &mut Vec<String>) {
    let security = container.get("securityContext");
    let flag = |field: &str| security.and_then(|s| s.get(field)).and_then(Value::as_bool) == Some(true);
    if flag("privileged") {
        found.push(format!("{at} is privileged"));
    }
    if flag("allowPrivilegeEscalation") {
        found.push(format!("{at} allows privilege escalation"));
    }
    if let Some(mount) = security.and_then(|s| s.get("procMount")).and_then(Value::as_str).filter(|m| *m != "Default") {
        found.push(format!("{at} has procMount {mount}"));
    }
    if security.and_then(|s| s.pointer("/windowsOptions/hostProcess")).and_then(Value::as_bool) == Some(true) {
        found.push(format!("{at} is a Windows host process"));
    }
    let added: Vec<&str> = security
        .and_then(|s| s.pointer("/capabilities/add"))
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|c| c.as_str().unwrap_or("?")).collect())
        .unwrap_or_default();
    if !added.is_empty() {
        found.push(format!("{at} adds capabilities {}", added.join(", ")));
    }
    for port in list(container, "ports") {
        if let Some(host_port) = port.get("hostPort").and_then(Value::as_i64).filter(|p| *p != 0) {
            found.push(format!("{at} binds host port {host_port}"));
        }
    }
}

fn list<'a>(object: &'a Value, field: &str) -> impl Iterator<Item = &'a Value> {
    object.get(field).and_then(Value::as_array).into_iter().flatten()
}

fn name(object: &Value) -> &str {
    object.get("name").and_then(Value::as_str).unwrap_or("unnamed")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod_spec_in(kind: &Kind, spec: Value) -> Value {
        match (kind.group.as_str(), kind.kind.as_str()) {
            ("", "Pod") => json!({ "spec": spec }),
            ("", "PodTemplate") => json!({"template": {"spec": spec}}),
            ("batch", "CronJob") => json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": spec}}}}}),
            _ => json!({"spec": {"template": {"spec": spec}}}),
        }
    }

    fn workloads() -> Vec<Kind> {
        let apps = |k: &str| Kind::new("apps", "v1", k);
        vec![
            Kind::new("", "v1", "Pod"),
            Kind::new("", "v1", "PodTemplate"),
            Kind::new("", "v1", "ReplicationController"),
            apps("Deployment"),
            apps("StatefulSet"),
            apps("DaemonSet"),
            apps("ReplicaSet"),
            Kind::new("batch", "v1", "Job"),
            Kind::new("batch", "v1", "CronJob"),
            Kind::new("argoproj.io", "v1alpha1", "Rollout"),
        ]
    }

    #[test]
    fn every_kind_of_host_access_is_found_in_every_workload_kind() {
        let hostile = json!({
            "hostNetwork": true, "hostPID": true, "hostIPC": true,
            "volumes": [{"name": "root", "hostPath": {"path": "/"}}, {"name": "tmp", "emptyDir": {}}],
            "initContainers": [{"name": "init", "securityContext": {"privileged": true}}],
            "containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 80}],
                "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}, "procMount": "Unmasked",
                    "allowPrivilegeEscalation": true}}],
            "ephemeralContainers": [{"name": "debug", "securityContext": {"windowsOptions": {"hostProcess": true}}}],
        });
        for kind in workloads() {
            let found = violations(&kind, &pod_spec_in(&kind, hostile.clone()));
            assert_eq!(found.len(), 10, "{kind}: {found:#?}");
        }
        let found =
            violations(&Kind::new("apps", "v1", "Deployment"), &pod_spec_in(&Kind::new("apps", "v1", "Deployment"), hostile));
        assert!(found.contains(&"spec.template.spec.containers[0] (c) adds capabilities SYS_ADMIN".to_owned()), "{found:#?}");
        assert!(found.contains(&"spec.template.spec.containers[0] (c) binds host port 80".to_owned()), "{found:#?}");
        assert!(found.contains(&"spec.template.spec.initContainers[0] (init) is privileged".to_owned()), "{found:#?}");
    }

    #[test]
    fn safe_settings_are_not_host_access() {
        let safe = json!({
            "hostNetwork": false, "hostPID": false,
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "d"}}],
            "containers": [{"name": "c", "ports": [{"containerPort": 80}],
                "securityContext": {"privileged": false, "allowPrivilegeEscalation": false, "procMount": "Default",
                    "capabilities": {"drop": ["ALL"], "add": []}}}],
        });
        for kind in workloads() {
            assert!(violations(&kind, &pod_spec_in(&kind, safe.clone())).is_empty(), "{kind}");
        }
    }

    #[test]
    fn a_spec_field_of_a_kind_other_than_pod_is_not_a_pod_spec() {
        let config_map_like = json!({"spec": {"hostNetwork": true}});
        assert!(violations(&Kind::new("example.com", "v1", "Thing"), &config_map_like).is_empty());
        assert_eq!(violations(&Kind::new("", "v1", "Pod"), &config_map_like), ["spec.hostNetwork is true"]);
    }
}
