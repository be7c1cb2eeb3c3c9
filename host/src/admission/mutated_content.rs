//! What a mutated object may say: the host's content checks judge the object a mutating webhook
//! answered as they judge an object a reconcile applies.
//!
//! [`content_refusal`] is called by the handler on every mutated object that passed
//! [`mutation_patch`](super::patch::mutation_patch), before the patch is answered; a refusal
//! denies the request (fail closed) with its message. The check is the reconcile path's
//! [`Grants::may_change_object`] (the one behind [`Grants::may_write_object`]): never one of the
//! host's own objects, no binding to the host's roles, no escalation in the object's content (a
//! service-account-token Secret, a Service's `externalIPs`) unless granted, and no host access
//! (the Pod Security Standards' baseline, and `nodeName`) in a Pod spec unless the plugin is
//! granted `allowHostAccess`.
//!
//! Only what the mutation adds or changes is judged: the object as admitted (`original`, the
//! request's object) already carries what its writer gave it — on UPDATE an already scheduled
//! Pod has its `nodeName` —, and keeping it is not the plugin's doing.

use serde_json::Value;

use crate::contract::Kind;
use crate::policy::Grants;

/// Why `mutated`, answered by a plugin granted `grants` for the admitted object `original`, may
/// not be admitted; `None` when nothing refuses it. An object without `apiVersion` and `kind`
/// is judged by nothing here (the patch check refuses identity changes).
pub fn content_refusal(grants: &Grants, original: Option<&Value>, mutated: &Value) -> Option<String> {
    let kind = Kind::of_object(mutated)?;
    let name = mutated.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    grants.may_change_object(&kind, name, original, Some(mutated)).err().map(|refusal| refusal.to_string())
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
        let refusal = content_refusal(&Grants::default(), None, &implant).expect("hostPath is refused");
        assert!(refusal.contains("mounts the host path \"/\""), "{refusal}");
        let granted = Grants { allow_host_access: true, ..Grants::default() };
        assert_eq!(content_refusal(&granted, None, &implant), None);
    }

    #[test]
    fn a_mutation_adding_an_unconfined_seccomp_profile_is_refused() {
        let original = pod(json!({"containers": [{"name": "web", "image": "nginx"}]}));
        let unconfined = pod(json!({"containers": [{"name": "web", "image": "nginx",
            "securityContext": {"seccompProfile": {"type": "Unconfined"}}}]}));
        let refusal = content_refusal(&Grants::default(), Some(&original), &unconfined).expect("refused");
        assert!(refusal.contains("spec.containers[0] (web).securityContext.seccompProfile.type is Unconfined"), "{refusal}");
    }

    #[test]
    fn a_mutation_keeping_the_nodename_a_scheduled_pod_has_is_admitted_and_one_changing_it_is_not() {
        let scheduled = pod(json!({"nodeName": "node-1", "containers": [{"name": "web", "image": "nginx"}]}));
        let labelled = {
            let mut p = scheduled.clone();
            p["metadata"]["labels"] = json!({"seen": "yes"});
            p
        };
        assert_eq!(content_refusal(&Grants::default(), Some(&scheduled), &labelled), None);
        let moved = pod(json!({"nodeName": "control-plane", "containers": [{"name": "web", "image": "nginx"}]}));
        let refusal = content_refusal(&Grants::default(), Some(&scheduled), &moved).expect("refused");
        assert!(refusal.contains("spec.nodeName \"control-plane\" binds it to a node"), "{refusal}");
    }

    #[test]
    fn a_mutation_adding_external_ips_to_a_service_is_refused_unless_granted() {
        let service = |spec: Value| json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "api"}, "spec": spec});
        let original = service(json!({"ports": [{"port": 443}]}));
        let intercept = service(json!({"ports": [{"port": 443}], "externalIPs": ["10.96.0.1"]}));
        let refusal = content_refusal(&Grants::default(), Some(&original), &intercept).expect("refused");
        assert!(refusal.contains("is a Service with spec.externalIPs 10.96.0.1"), "{refusal}");
        let granted = Grants { escalation_kinds: [Kind::new("", "v1", "Service")].into(), ..Grants::default() };
        assert_eq!(content_refusal(&granted, Some(&original), &intercept), None);
    }

    #[test]
    fn a_plain_sidecar_passes() {
        let sidecar = pod(json!({"containers": [{"name": "web", "image": "nginx"}, {"name": "log", "image": "busybox"}]}));
        assert_eq!(content_refusal(&Grants::default(), None, &sidecar), None);
    }
}
