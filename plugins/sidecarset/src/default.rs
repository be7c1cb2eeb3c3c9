//! The defaulting webhook's logic: fill what a `SidecarSet` leaves unset, so that the sidecar
//! hash is computed over what will actually run.

use serde_json::Value;

/// The SidecarSet with its defaults: every container without `imagePullPolicy` gets Kubernetes' own
/// default — `Always` for an image tagged `:latest` or not tagged (and not pinned by digest),
/// `IfNotPresent` otherwise — and a missing `spec.selector` stays missing (validation refuses
/// it with a reason rather than guessing one). Anything that is not a SidecarSet-shaped object
/// is returned unchanged (validation says what is wrong).
pub fn default(mut sidecarset: Value) -> Value {
    let Some(containers) = sidecarset.pointer_mut("/spec/containers").and_then(Value::as_array_mut) else {
        return sidecarset;
    };
    for container in containers.iter_mut().filter_map(Value::as_object_mut) {
        if container.get("imagePullPolicy").is_some() {
            continue;
        }
        let Some(image) = container.get("image").and_then(Value::as_str) else { continue };
        let policy = if pulls_always(image) { "Always" } else { "IfNotPresent" };
        container.insert("imagePullPolicy".into(), Value::from(policy));
    }
    sidecarset
}

/// Whether Kubernetes pulls `image` on every start by default: no digest, and the tag is
/// `latest` or absent.
fn pulls_always(image: &str) -> bool {
    if image.contains('@') {
        return false;
    }
    // The tag follows the last ':' after the last '/' (a registry port comes before a '/').
    let last = image.rsplit('/').next().unwrap_or(image);
    last.rsplit_once(':').is_none_or(|(_, tag)| tag == "latest")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn defaulted_policies(containers: Value) -> Vec<Value> {
        let set = default(json!({"spec": {"containers": containers}}));
        set["spec"]["containers"].as_array().unwrap().iter().map(|c| c["imagePullPolicy"].clone()).collect()
    }

    #[test]
    fn image_pull_policy_defaults_like_kubernetes() {
        let policies = defaulted_policies(json!([
            {"name": "a", "image": "busybox:1.36"},
            {"name": "b", "image": "busybox"},
            {"name": "c", "image": "busybox:latest"},
            {"name": "d", "image": "registry:5000/busybox"},
            {"name": "e", "image": "registry:5000/busybox:1"},
            {"name": "f", "image": "busybox@sha256:0123"},
        ]));
        assert_eq!(
            policies,
            [
                json!("IfNotPresent"),
                json!("Always"),
                json!("Always"),
                json!("Always"),
                json!("IfNotPresent"),
                json!("IfNotPresent")
            ]
        );
    }

    #[test]
    fn a_policy_the_user_set_is_kept() {
        assert_eq!(
            defaulted_policies(json!([{"name": "a", "image": "busybox:1", "imagePullPolicy": "Never"}])),
            [json!("Never")]
        );
    }

    #[test]
    fn what_is_not_a_sidecarset_is_left_alone() {
        let odd = json!({"spec": {"containers": "log"}});
        assert_eq!(default(odd.clone()), odd);
        assert_eq!(defaulted_policies(json!([{"name": "no-image"}])), [Value::Null]);
    }
}
