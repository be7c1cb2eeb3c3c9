//! Host access in Pod specs: exactly what the Pod Security Standards' **baseline** profile
//! forbids — what lets a Pod reach the node it runs on or escape its container's confinement —
//! plus a Pod bound to a node by name.
//!
//! The baseline controls, each with the fields it restricts and what it allows
//! (<https://kubernetes.io/docs/concepts/security/pod-security-standards/>):
//!
//! | control | fields (Pod level and every container) | allowed |
//! |---|---|---|
//! | HostProcess | `securityContext.windowsOptions.hostProcess` | unset, `false` |
//! | host namespaces | `hostNetwork`, `hostPID`, `hostIPC` | unset, `false` |
//! | privileged | `securityContext.privileged` | unset, `false` |
//! | capabilities | `securityContext.capabilities.add` | [`BASELINE_CAPABILITIES`] |
//! | hostPath volumes | `volumes[*].hostPath` | unset |
//! | host ports | `ports[*].hostPort` | unset, `0` |
//! | AppArmor | `securityContext.appArmorProfile.type`; the annotations `container.apparmor.security.beta.kubernetes.io/*` | `RuntimeDefault`, `Localhost`; `runtime/default`, `localhost/*` |
//! | SELinux | `securityContext.seLinuxOptions.type`; `.user`, `.role` | [`BASELINE_SELINUX_TYPES`]; unset |
//! | `/proc` mount | `securityContext.procMount` | unset, `Default` |
//! | seccomp | `securityContext.seccompProfile.type`; the legacy annotations `seccomp.security.alpha.kubernetes.io/pod`, `container.seccomp.security.alpha.kubernetes.io/*` | anything but `Unconfined` / `unconfined` |
//! | sysctls | `securityContext.sysctls[*].name` (Pod level) | [`BASELINE_SYSCTLS`] |
//!
//! Beyond the profile: `spec.nodeName`. A Pod that names its node skips the scheduler, so the
//! node's `NoSchedule` taints (the control plane's), node selectors and scheduling policies no
//! longer apply: the writer chooses the node. The host counts it as host access. The
//! restricted profile's rules (`allowPrivilegeEscalation`, `runAsNonRoot`, dropping
//! capabilities) are not host access: an unset `allowPrivilegeEscalation` is `true`.
//!
//! [`violations`] finds every Pod spec an object carries, whatever its kind: a Pod's `spec`,
//! a PodTemplate's `template.spec`, `spec.template.spec` (Deployment, StatefulSet, DaemonSet,
//! ReplicaSet, Job, ReplicationController, and any custom workload of that shape) and
//! `spec.jobTemplate.spec.template.spec` (CronJob), with the annotations of the metadata beside
//! it. A plugin writes such an object (applies it, or returns it from a mutating webhook) only
//! when the host's policy grants it `allowHostAccess: true`; a mutation is refused only for the
//! host access it adds (see [`added_violations`]).

use serde_json::Value;

use crate::contract::Kind;

/// Where Pod templates live in objects of any kind (JSON pointers), with the paths of their
/// `spec` and `metadata` shown in messages.
const TEMPLATES: &[(&str, &str, &str)] = &[
    ("/template", "template.spec", "template.metadata"),
    ("/spec/template", "spec.template.spec", "spec.template.metadata"),
    ("/spec/jobTemplate/spec/template", "spec.jobTemplate.spec.template.spec", "spec.jobTemplate.spec.template.metadata"),
];

/// The container lists of a Pod spec.
const CONTAINER_LISTS: &[&str] = &["initContainers", "containers", "ephemeralContainers"];

/// The capabilities the baseline profile lets a container add (the container runtimes'
/// default set).
pub const BASELINE_CAPABILITIES: &[&str] = &[
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

/// The SELinux types the baseline profile allows (besides none).
pub const BASELINE_SELINUX_TYPES: &[&str] = &["container_t", "container_init_t", "container_kvm_t", "container_engine_t"];

/// The sysctls the baseline profile allows: namespaced in the Pod, isolated from the node and
/// other Pods.
pub const BASELINE_SYSCTLS: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
];

const APPARMOR_ANNOTATION: &str = "container.apparmor.security.beta.kubernetes.io/";
const SECCOMP_POD_ANNOTATION: &str = "seccomp.security.alpha.kubernetes.io/pod";
const SECCOMP_CONTAINER_ANNOTATION: &str = "container.seccomp.security.alpha.kubernetes.io/";

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
    for template in templates(kind, object) {
        pod_spec(template.spec, template.path, &mut found);
        if let Some(annotations) = template.metadata.and_then(|m| m.get("annotations")).and_then(Value::as_object) {
            legacy_annotations(annotations, template.metadata_path, &mut found);
        }
    }
    found
}

/// The host access `after` asks for that `before` did not (both of `kind`): what a mutation
/// adds or changes. An object admitted on UPDATE already carries what it had (an already
/// scheduled Pod its `nodeName`); only the mutation's own additions are its writer's.
///
/// ```
/// use serde_json::json;
/// use wasmop::contract::Kind;
/// use wasmop::policy::host_access;
/// let pod = Kind::new("", "v1", "Pod");
/// let scheduled = json!({"spec": {"nodeName": "node-1", "containers": [{"name": "c"}]}});
/// let relabelled = json!({"metadata": {"labels": {"a": "b"}}, "spec": {"nodeName": "node-1", "containers": [{"name": "c"}]}});
/// assert!(host_access::added_violations(&pod, Some(&scheduled), &relabelled).is_empty());
/// let moved = json!({"spec": {"nodeName": "control-plane", "containers": [{"name": "c"}]}});
/// assert_eq!(host_access::added_violations(&pod, Some(&scheduled), &moved).len(), 1);
/// ```
///
/// Entries are compared without their list positions (containers, volumes and sysctls are
/// named in each line): a mutation inserting a sidecar before a container does not make that
/// container's settings new.
pub fn added_violations(kind: &Kind, before: Option<&Value>, after: &Value) -> Vec<String> {
    let had: Vec<String> = before.map(|b| violations(kind, b)).unwrap_or_default().iter().map(|v| unindexed(v)).collect();
    violations(kind, after).into_iter().filter(|v| !had.contains(&unindexed(v))).collect()
}

/// `line` without its list positions (`[0]`, `[12]`).
fn unindexed(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(open) = rest.find('[') {
        let (head, tail) = rest.split_at(open);
        out.push_str(head);
        match tail[1..].find(']') {
            Some(close) if close > 0 && tail[1..=close].bytes().all(|b| b.is_ascii_digit()) => rest = &tail[close + 2..],
            _ => {
                out.push('[');
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Every Pod spec `object` (of `kind`) carries, with its path for messages.
pub fn pod_specs<'a>(kind: &Kind, object: &'a Value) -> Vec<(&'a Value, &'static str)> {
    templates(kind, object).into_iter().map(|t| (t.spec, t.path)).collect()
}

/// A Pod spec in an object, and the metadata beside it.
struct Template<'a> {
    spec: &'a Value,
    path: &'static str,
    metadata: Option<&'a Value>,
    metadata_path: &'static str,
}

fn templates<'a>(kind: &Kind, object: &'a Value) -> Vec<Template<'a>> {
    let pod = (kind.group.is_empty() && kind.kind == "Pod")
        .then(|| {
            object.get("spec").map(|spec| Template {
                spec,
                path: "spec",
                metadata: object.get("metadata"),
                metadata_path: "metadata",
            })
        })
        .flatten();
    let nested = TEMPLATES.iter().filter_map(|(pointer, path, metadata_path)| {
        let template = object.pointer(pointer)?;
        Some(Template { spec: template.get("spec")?, path, metadata: template.get("metadata"), metadata_path })
    });
    pod.into_iter().chain(nested).filter(|t| t.spec.is_object()).collect()
}

/// The host access of one Pod spec at `path`.
fn pod_spec(spec: &Value, path: &str, found: &mut Vec<String>) {
    for field in ["hostNetwork", "hostPID", "hostIPC"] {
        if spec.get(field).and_then(Value::as_bool) == Some(true) {
            found.push(format!("{path}.{field} is true"));
        }
    }
    if let Some(node) = spec.get("nodeName").and_then(Value::as_str).filter(|n| !n.is_empty()) {
        found.push(format!("{path}.nodeName {node:?} binds it to a node, past the scheduler and the node's taints"));
    }
    if let Some(security) = spec.get("securityContext") {
        let at = format!("{path}.securityContext");
        if security.pointer("/windowsOptions/hostProcess").and_then(Value::as_bool) == Some(true) {
            found.push(format!("{at}.windowsOptions.hostProcess is true"));
        }
        confinement(security, &at, found);
        for (i, sysctl) in list(security, "sysctls").enumerate() {
            let name = sysctl.get("name").and_then(Value::as_str).unwrap_or_default();
            if !name.is_empty() && !BASELINE_SYSCTLS.contains(&name) {
                found.push(format!("{at}.sysctls[{i}] sets {name:?}, which is not a safe sysctl"));
            }
        }
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

/// Seccomp, AppArmor and SELinux in a Pod's or a container's `securityContext` (described as
/// `at`): unconfined, or an SELinux label outside the container types.
fn confinement(security: &Value, at: &str, found: &mut Vec<String>) {
    let text = |pointer: &str| security.pointer(pointer).and_then(Value::as_str).filter(|t| !t.is_empty());
    if let Some(profile) = text("/seccompProfile/type").filter(|t| *t == "Unconfined") {
        found.push(format!("{at}.seccompProfile.type is {profile}"));
    }
    if let Some(profile) = text("/appArmorProfile/type").filter(|t| !["RuntimeDefault", "Localhost"].contains(t)) {
        found.push(format!("{at}.appArmorProfile.type is {profile}"));
    }
    if let Some(label) = text("/seLinuxOptions/type").filter(|t| !BASELINE_SELINUX_TYPES.contains(t)) {
        found.push(format!("{at}.seLinuxOptions.type is {label}"));
    }
    for field in ["user", "role"] {
        if let Some(value) = text(&format!("/seLinuxOptions/{field}")) {
            found.push(format!("{at}.seLinuxOptions.{field} is {value}"));
        }
    }
}

/// The AppArmor and seccomp annotations of a Pod or template's metadata at `path`.
fn legacy_annotations(annotations: &serde_json::Map<String, Value>, path: &str, found: &mut Vec<String>) {
    for (key, value) in annotations {
        let value = value.as_str().unwrap_or_default();
        let apparmor = key.starts_with(APPARMOR_ANNOTATION) && value != "runtime/default" && !value.starts_with("localhost/");
        let seccomp = (key == SECCOMP_POD_ANNOTATION || key.starts_with(SECCOMP_CONTAINER_ANNOTATION)) && value == "unconfined";
        if apparmor || seccomp {
            found.push(format!("{path}.annotations[{key:?}] is {value:?}"));
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
    if let Some(mount) = security.and_then(|s| s.get("procMount")).and_then(Value::as_str).filter(|m| *m != "Default") {
        found.push(format!("{at} has procMount {mount}"));
    }
    if security.and_then(|s| s.pointer("/windowsOptions/hostProcess")).and_then(Value::as_bool) == Some(true) {
        found.push(format!("{at} is a Windows host process"));
    }
    if let Some(security) = security {
        confinement(security, &format!("{at}.securityContext"), found);
    }
    let added: Vec<&str> = security
        .and_then(|s| s.pointer("/capabilities/add"))
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|c| c.as_str().unwrap_or("?")).filter(|c| !BASELINE_CAPABILITIES.contains(c)).collect())
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
        pod_in(kind, json!({}), spec)
    }

    /// An object of `kind` whose Pod (template) has `metadata` and `spec`.
    fn pod_in(kind: &Kind, metadata: Value, spec: Value) -> Value {
        let template = json!({"metadata": metadata, "spec": spec});
        match (kind.group.as_str(), kind.kind.as_str()) {
            ("", "Pod") => template,
            ("", "PodTemplate") => json!({ "template": template }),
            ("batch", "CronJob") => json!({"spec": {"jobTemplate": {"spec": {"template": template}}}}),
            _ => json!({"spec": {"template": template}}),
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

    /// The path of a Pod (template) spec in an object of `kind`.
    fn spec_path(kind: &Kind) -> &'static str {
        match (kind.group.as_str(), kind.kind.as_str()) {
            ("", "Pod") => "spec",
            ("", "PodTemplate") => "template.spec",
            ("batch", "CronJob") => "spec.jobTemplate.spec.template.spec",
            _ => "spec.template.spec",
        }
    }

    #[test]
    fn every_kind_of_host_access_is_found_in_every_workload_kind() {
        let hostile = json!({
            "hostNetwork": true, "hostPID": true, "hostIPC": true,
            "volumes": [{"name": "root", "hostPath": {"path": "/"}}, {"name": "tmp", "emptyDir": {}}],
            "initContainers": [{"name": "init", "securityContext": {"privileged": true}}],
            "containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 80}],
                "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}, "procMount": "Unmasked"}}],
            "ephemeralContainers": [{"name": "debug", "securityContext": {"windowsOptions": {"hostProcess": true}}}],
        });
        for kind in workloads() {
            let found = violations(&kind, &pod_spec_in(&kind, hostile.clone()));
            assert_eq!(found.len(), 9, "{kind}: {found:#?}");
        }
        let found =
            violations(&Kind::new("apps", "v1", "Deployment"), &pod_spec_in(&Kind::new("apps", "v1", "Deployment"), hostile));
        assert!(found.contains(&"spec.template.spec.containers[0] (c) adds capabilities SYS_ADMIN".to_owned()), "{found:#?}");
        assert!(found.contains(&"spec.template.spec.containers[0] (c) binds host port 80".to_owned()), "{found:#?}");
        assert!(found.contains(&"spec.template.spec.initContainers[0] (init) is privileged".to_owned()), "{found:#?}");
    }

    #[test]
    fn every_baseline_control_beyond_host_namespaces_and_paths_is_found_in_every_workload_kind() {
        let unconfined = json!({"seccompProfile": {"type": "Unconfined"}, "appArmorProfile": {"type": "Unconfined"},
            "seLinuxOptions": {"type": "spc_t", "user": "system_u", "role": "system_r"}});
        let mut pod_security = unconfined.clone();
        pod_security["sysctls"] =
            json!([{"name": "net.ipv4.tcp_syncookies", "value": "1"}, {"name": "kernel.msgmax", "value": "1"}]);
        pod_security["windowsOptions"] = json!({"hostProcess": true});
        let spec = json!({
            "nodeName": "control-plane",
            "securityContext": pod_security,
            "containers": [{"name": "c", "securityContext": unconfined}],
        });
        let metadata = json!({"annotations": {
            "container.apparmor.security.beta.kubernetes.io/c": "unconfined",
            "seccomp.security.alpha.kubernetes.io/pod": "unconfined",
            "container.seccomp.security.alpha.kubernetes.io/c": "unconfined",
            "example.com/unrelated": "unconfined",
        }});
        for kind in workloads() {
            let found = violations(&kind, &pod_in(&kind, metadata.clone(), spec.clone()));
            let at = spec_path(&kind);
            let meta = at.strip_suffix("spec").map(|p| format!("{p}metadata")).unwrap_or_default();
            let mut expected =
                vec![format!("{at}.nodeName \"control-plane\" binds it to a node, past the scheduler and the node's taints")];
            expected.push(format!("{at}.securityContext.windowsOptions.hostProcess is true"));
            for ctx in [format!("{at}.securityContext"), format!("{at}.containers[0] (c).securityContext")] {
                expected.extend([
                    format!("{ctx}.seccompProfile.type is Unconfined"),
                    format!("{ctx}.appArmorProfile.type is Unconfined"),
                    format!("{ctx}.seLinuxOptions.type is spc_t"),
                    format!("{ctx}.seLinuxOptions.user is system_u"),
                    format!("{ctx}.seLinuxOptions.role is system_r"),
                ]);
                if ctx.ends_with("spec.securityContext") {
                    expected.push(format!("{ctx}.sysctls[1] sets \"kernel.msgmax\", which is not a safe sysctl"));
                }
            }
            expected.extend([
                format!("{meta}.annotations[\"container.apparmor.security.beta.kubernetes.io/c\"] is \"unconfined\""),
                format!("{meta}.annotations[\"container.seccomp.security.alpha.kubernetes.io/c\"] is \"unconfined\""),
                format!("{meta}.annotations[\"seccomp.security.alpha.kubernetes.io/pod\"] is \"unconfined\""),
            ]);
            assert_eq!(found, expected, "{kind}");
        }
    }

    #[test]
    fn what_the_baseline_profile_allows_is_not_host_access() {
        let confined = json!({"seccompProfile": {"type": "RuntimeDefault"}, "appArmorProfile": {"type": "Localhost",
            "localhostProfile": "k8s-nginx"}, "seLinuxOptions": {"type": "container_t", "level": "s0:c123,c456"}});
        let mut pod_security = confined.clone();
        pod_security["sysctls"] = BASELINE_SYSCTLS.iter().map(|n| json!({"name": n, "value": "1"})).collect();
        let safe = json!({
            "hostNetwork": false, "hostPID": false, "nodeName": "",
            "securityContext": pod_security,
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "d"}}],
            "containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 0}],
                "securityContext": {"privileged": false, "allowPrivilegeEscalation": true, "procMount": "Default",
                    "capabilities": {"drop": ["ALL"], "add": BASELINE_CAPABILITIES},
                    "seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"},
                    "appArmorProfile": {"type": "RuntimeDefault"},
                    "seLinuxOptions": {"type": "container_init_t"}}}],
        });
        let metadata = json!({"annotations": {
            "container.apparmor.security.beta.kubernetes.io/c": "runtime/default",
            "container.apparmor.security.beta.kubernetes.io/d": "localhost/k8s-nginx",
            "seccomp.security.alpha.kubernetes.io/pod": "runtime/default",
        }});
        for kind in workloads() {
            assert_eq!(violations(&kind, &pod_in(&kind, metadata.clone(), safe.clone())), Vec::<String>::new(), "{kind}");
        }
    }

    #[test]
    fn a_mutation_is_judged_by_the_host_access_it_adds_or_changes() {
        let pod = Kind::new("", "v1", "Pod");
        let scheduled = json!({"spec": {"nodeName": "node-1", "containers": [{"name": "c"}]}});
        let sidecar = json!({"spec": {"nodeName": "node-1", "containers": [{"name": "c"}, {"name": "log"}]}});
        assert!(added_violations(&pod, Some(&scheduled), &sidecar).is_empty(), "the nodeName it already had");
        let unconfined = json!({"spec": {"nodeName": "node-1", "containers": [{"name": "c",
            "securityContext": {"seccompProfile": {"type": "Unconfined"}}}]}});
        assert_eq!(
            added_violations(&pod, Some(&scheduled), &unconfined),
            ["spec.containers[0] (c).securityContext.seccompProfile.type is Unconfined"]
        );
        let moved = json!({"spec": {"nodeName": "control-plane", "containers": [{"name": "c"}]}});
        assert_eq!(added_violations(&pod, Some(&scheduled), &moved).len(), 1, "a changed nodeName is the mutation's");
        assert_eq!(added_violations(&pod, None, &scheduled).len(), 1, "nothing before: everything is added");
        let privileged = json!({"spec": {"containers": [{"name": "c", "securityContext": {"privileged": true}}]}});
        let sidecar_first = json!({"spec": {"containers": [{"name": "log"},
            {"name": "c", "securityContext": {"privileged": true}}]}});
        assert!(added_violations(&pod, Some(&privileged), &sidecar_first).is_empty(), "a position is not a change");
        let privileged_sidecar = json!({"spec": {"containers": [{"name": "log", "securityContext": {"privileged": true}},
            {"name": "c", "securityContext": {"privileged": true}}]}});
        assert_eq!(added_violations(&pod, Some(&privileged), &privileged_sidecar), ["spec.containers[0] (log) is privileged"]);
        assert_eq!(unindexed("a.sysctls[10] sets \"x[1]\" b[k]"), "a.sysctls sets \"x\" b[k]");
    }

    #[test]
    fn a_spec_field_of_a_kind_other_than_pod_is_not_a_pod_spec() {
        let config_map_like = json!({"spec": {"hostNetwork": true}});
        assert!(violations(&Kind::new("example.com", "v1", "Thing"), &config_map_like).is_empty());
        assert_eq!(violations(&Kind::new("", "v1", "Pod"), &config_map_like), ["spec.hostNetwork is true"]);
    }
}
