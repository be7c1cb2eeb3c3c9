//! The Pod webhook's logic: inject the sidecars of every SidecarSet that applies to a new Pod.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::sidecarset::{SidecarSet, annotation};

/// What [`inject`] did to a Pod.
#[derive(Debug, Clone, PartialEq)]
pub struct Injection {
    /// The Pod, with the injected containers appended to `spec.containers` and one hash
    /// annotation per injected SidecarSet.
    pub pod: Value,
    /// The SidecarSets whose containers were injected, in order.
    pub injected: Vec<String>,
    /// Why a SidecarSet that applies was not injected (for the admission response's warnings).
    pub warnings: Vec<String>,
}

/// The annotation by which a Pod opts out of injection: a Pod annotated
/// `sidecarset.wasmop.dev/inject: "false"` gets no SidecarSet's containers, whatever selects it.
/// The inject webhook's match condition ([`NOT_OPTED_OUT`]) keeps the API server from calling
/// the plugin for such a Pod at all.
pub const INJECT_ANNOTATION: &str = "sidecarset.wasmop.dev/inject";

/// The CEL match condition of the inject webhook: true unless the Pod opted out
/// ([`INJECT_ANNOTATION`] is `"false"`). Any other Pod may match some SidecarSet — an empty
/// selector matches every Pod, labelled or not — so only opted-out Pods are left out.
pub const NOT_OPTED_OUT: &str = "!has(object.metadata.annotations) || \
     !('sidecarset.wasmop.dev/inject' in object.metadata.annotations) || \
     object.metadata.annotations['sidecarset.wasmop.dev/inject'] != 'false'";

/// Inject into `pod` (created in `namespace`) the containers of every SidecarSet in `sets` that
/// applies to it, in name order. A SidecarSet is injected whole or not at all:
///
/// - never into a Pod that opted out ([`INJECT_ANNOTATION`] `"false"`);
/// - not when the Pod already carries its hash annotation (never twice, whatever the hash);
/// - not when one of its container names is already used by the Pod (a container, an init or
///   ephemeral container, or a sidecar injected by an earlier SidecarSet) — with a warning;
/// - not when it has no container (nothing to inject, and no annotation claiming otherwise).
///
/// The Pod's other fields are kept exactly as they came.
pub fn inject(mut pod: Value, namespace: &str, sets: &[SidecarSet]) -> Injection {
    if annotation(&pod, INJECT_ANNOTATION) == Some("false") {
        return Injection { pod, injected: Vec::new(), warnings: Vec::new() };
    }
    let mut sets: Vec<&SidecarSet> = sets.iter().filter(|s| s.applies_to(&pod, namespace)).collect();
    sets.sort_by(|a, b| a.name.cmp(&b.name));
    let mut taken = container_names(&pod);
    let (mut injected, mut warnings) = (Vec::new(), Vec::new());
    for set in sets {
        let key = set.hash_annotation();
        if annotation(&pod, &key).is_some() || set.spec.containers.is_empty() {
            continue;
        }
        let names: Vec<&str> = set.spec.containers.iter().filter_map(|c| c.get("name")?.as_str()).collect();
        if let Some(clash) = names.iter().find(|n| taken.contains(**n)) {
            warnings.push(format!("SidecarSet {}: not injected, the Pod already has a container named {clash:?}", set.name));
            continue;
        }
        taken.extend(names.iter().map(|n| (*n).to_owned()));
        let Some(spec) = object_at(&mut pod, "spec") else { break };
        match spec.entry("containers").or_insert_with(|| Value::Array(Vec::new())) {
            Value::Array(containers) => containers.extend(set.spec.containers.iter().cloned()),
            _ => break,
        }
        let Some(annotations) = object_at(&mut pod, "metadata").and_then(|m| object_entry(m, "annotations")) else { break };
        annotations.insert(key, Value::from(set.hash()));
        injected.push(set.name.clone());
    }
    Injection { pod, injected, warnings }
}

/// The names of every container of a Pod (containers, init and ephemeral containers).
fn container_names(pod: &Value) -> BTreeSet<String> {
    ["containers", "initContainers", "ephemeralContainers"]
        .iter()
        .filter_map(|list| pod.get("spec")?.get(list)?.as_array())
        .flatten()
        .filter_map(|c| c.get("name")?.as_str().map(str::to_owned))
        .collect()
}

/// `object[key]` as an object, created when absent; `None` when `object` is not an object or
/// `key` holds something else.
fn object_at<'a>(object: &'a mut Value, key: &str) -> Option<&'a mut Map<String, Value>> {
    object_entry(object.as_object_mut()?, key)
}

fn object_entry<'a>(map: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    let value = map.entry(key).or_insert_with(|| Value::Object(Map::new()));
    if value.is_null() {
        *value = Value::Object(Map::new());
    }
    value.as_object_mut()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(name: &str, selector: Value, containers: Value) -> SidecarSet {
        SidecarSet::from_object(&json!({"metadata": {"name": name}, "spec": {"selector": selector, "containers": containers}}))
            .unwrap()
    }

    fn logger() -> SidecarSet {
        set("log", json!({"matchLabels": {"app": "web"}}), json!([{"name": "log", "image": "busybox:1"}]))
    }

    fn pod(labels: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": labels, "uid": "keep-me"},
               "spec": {"containers": [{"name": "app", "image": "nginx", "x-unknown-field": 1}], "nodeName": "n"}})
    }

    fn names(pod: &Value) -> Vec<&str> {
        pod["spec"]["containers"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect()
    }

    #[test]
    fn a_matching_pod_gets_the_sidecar_and_the_hash_annotation() {
        let s = logger();
        let out = inject(pod(json!({"app": "web"})), "default", std::slice::from_ref(&s));
        assert_eq!(names(&out.pod), ["app", "log"]);
        assert_eq!(out.pod["spec"]["containers"][1], json!({"name": "log", "image": "busybox:1"}));
        assert_eq!(out.pod["metadata"]["annotations"]["sidecarset.wasmop.dev/log-hash"], json!(s.hash()));
        assert_eq!(out.injected, ["log"]);
        assert!(out.warnings.is_empty());
        // Everything else is kept as it came, fields this plugin does not know included.
        assert_eq!(out.pod["spec"]["containers"][0]["x-unknown-field"], 1);
        assert_eq!(out.pod["spec"]["nodeName"], "n");
        assert_eq!(out.pod["metadata"]["uid"], "keep-me");
    }

    #[test]
    fn a_pod_the_selector_or_namespace_does_not_match_is_untouched() {
        let original = pod(json!({"app": "db"}));
        let out = inject(original.clone(), "default", &[logger()]);
        assert_eq!(out.pod, original);
        assert!(out.injected.is_empty());
        let mut scoped = logger();
        scoped.spec.namespace = Some("team-a".into());
        let web = pod(json!({"app": "web"}));
        assert_eq!(inject(web.clone(), "team-b", &[scoped.clone()]).pod, web);
        assert_eq!(inject(web, "team-a", &[scoped]).injected, ["log"]);
    }

    #[test]
    fn a_pod_that_opted_out_is_untouched_whatever_selects_it() {
        let mut opted_out = pod(json!({"app": "web"}));
        opted_out["metadata"]["annotations"] = json!({INJECT_ANNOTATION: "false"});
        let everything = set("all", json!({}), json!([{"name": "all", "image": "busybox:1"}]));
        let out = inject(opted_out.clone(), "default", &[logger(), everything.clone()]);
        assert_eq!(out.pod, opted_out);
        assert!(out.injected.is_empty() && out.warnings.is_empty());
        opted_out["metadata"]["annotations"][INJECT_ANNOTATION] = json!("true");
        assert_eq!(inject(opted_out, "default", &[logger(), everything]).injected, ["all", "log"], "only \"false\" opts out");
    }

    #[test]
    fn injecting_twice_changes_nothing() {
        let once = inject(pod(json!({"app": "web"})), "default", &[logger()]).pod;
        let twice = inject(once.clone(), "default", &[logger()]);
        assert_eq!(twice.pod, once);
        assert!(twice.injected.is_empty() && twice.warnings.is_empty());
    }

    #[test]
    fn a_sidecarset_whose_container_name_is_taken_is_skipped_whole_with_a_warning() {
        let clashing = set("app-sidecars", json!({}), json!([{"name": "extra", "image": "x"}, {"name": "app", "image": "y"}]));
        let out = inject(pod(json!({"app": "web"})), "default", &[logger(), clashing]);
        assert_eq!(names(&out.pod), ["app", "log"]);
        assert_eq!(out.injected, ["log"]);
        assert_eq!(out.warnings, ["SidecarSet app-sidecars: not injected, the Pod already has a container named \"app\""]);
        assert!(out.pod["metadata"]["annotations"].get("sidecarset.wasmop.dev/app-sidecars-hash").is_none());
    }

    #[test]
    fn two_sidecarsets_with_the_same_container_name_inject_only_the_first_by_name() {
        let a = set("a", json!({}), json!([{"name": "log", "image": "a"}]));
        let b = set("b", json!({}), json!([{"name": "log", "image": "b"}]));
        let out = inject(pod(json!({})), "default", &[b, a]);
        assert_eq!(out.pod["spec"]["containers"][1]["image"], "a");
        assert_eq!(out.injected, ["a"]);
        assert_eq!(out.warnings.len(), 1);
    }

    #[test]
    fn init_container_names_are_taken_too_and_a_pod_without_containers_gets_a_list() {
        let mut p = pod(json!({"app": "web"}));
        p["spec"]["initContainers"] = json!([{"name": "log", "image": "init"}]);
        assert_eq!(inject(p, "default", &[logger()]).injected, Vec::<String>::new());
        let bare = json!({"metadata": {"labels": {"app": "web"}}});
        let out = inject(bare, "default", &[logger()]);
        assert_eq!(names(&out.pod), ["log"]);
    }
}
