//! What a mutated object may say: the host's content checks judge the object a mutating webhook
//! answered as they judge an object a reconcile applies.
//!
//! [`content_refusal`] is called by the handler on every mutated object that passed
//! [`mutation_patch`](super::patch::mutation_patch), before the patch is answered; a refusal
//! denies the request (fail closed) with its message. The check is the reconcile path's
//! [`Grants::may_write_object`]: never one of the host's own objects, no binding to the host's
//! roles, and no host access (host namespaces, `hostPath`, privileged containers, added
//! capabilities) in a Pod spec unless the plugin is granted `allowHostAccess`.

use serde_json::Value;

use crate::contract::Kind;
use crate::policy::Grants;

/// Why `mutated`, answered by a plugin granted `grants`, may not be admitted; `None` when
/// nothing refuses it. An object without `apiVersion` and `kind` is judged by nothing here
/// (the patch check refuses identity changes).
pub fn content_refusal(grants: &Grants, mutated: &Value) -> Option<String> {
    let kind = Kind::of_object(mutated)?;
    let name = mutated.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    grants.may_write_object(&kind, name, Some(mutated)).err().map(|refusal| refusal.to_string())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(spec: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "team-a"}, "spec": spec})
    }

    #[test]
    fn a_mutation_adding_host_access_is_refused_unless_granted() {
        let implant = pod(json!({"containers": [{"name": "web", "image": "nginx"}, {"name": "x", "image": "evil",
            "volumeMounts": [{"name": "root", "mountPath": "/host"}]}],
            "volumes": [{"name": "root", "hostPath": {"path": "/"}}]}));
        let refusal = content_refusal(&Grants::default(), &implant).expect("hostPath is refused");
        assert!(refusal.contains("mounts the host path \"/\""), "{refusal}");
        let granted = Grants { allow_host_access: true, ..Grants::default() };
        assert_eq!(content_refusal(&granted, &implant), None);
    }

    #[test]
    fn a_plain_sidecar_passes() {
        let sidecar = pod(json!({"containers": [{"name": "web", "image": "nginx"}, {"name": "log", "image": "busybox"}]}));
        assert_eq!(content_refusal(&Grants::default(), &sidecar), None);
    }
}
