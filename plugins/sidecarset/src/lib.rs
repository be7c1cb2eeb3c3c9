//! SidecarSet as a wasmop plugin: sidecar containers injected into the Pods a selector matches,
//! after OpenKruise's SidecarSet (in a group of our own, `apps.wasmop.dev`, so it never collides
//! with an OpenKruise install). CRD: `crds/sidecarset.yaml`; sample: `crds/samples/sidecarset.yaml`.
//!
//! ```yaml
//! apiVersion: apps.wasmop.dev/v1alpha1
//! kind: SidecarSet
//! metadata: {name: log-shipper}
//! spec:
//!   selector: {matchLabels: {app: web}}
//!   containers: [{name: log-shipper, image: "busybox:1.36", command: [sh, -c, "tail -F /var/log/app.log"]}]
//! ```
//!
//! - Reconcile ([`status`]): counts the Pods the selector matches, in every namespace (or only
//!   `spec.namespace`), into `status.matchedPods`; those carrying the current sidecar hash
//!   (annotation `sidecarset.wasmop.dev/<name>-hash`) into `updatedPods`; those of them Ready
//!   into `readyPods`.
//! - Admission ([`admission`]): a mutating webhook on Pod CREATE injects the sidecars of every
//!   SidecarSet that matches ([`inject()`], reading the SidecarSets from the host's cache); on
//!   SidecarSet CREATE and UPDATE a validating webhook refuses an invalid one ([`validate()`])
//!   and a mutating one fills its defaults ([`default()`]). Each is a plain function, unit-tested
//!   without the host.

#![warn(missing_docs)]

pub mod admission;
pub mod default;
pub mod inject;
pub mod selector;
pub mod sidecarset;
pub mod status;
pub mod validate;

pub use default::default;
pub use inject::{Injection, inject};
pub use sidecarset::{SidecarSet, pod_kind, sidecarset_kind};
pub use validate::validate;

use wasmop_sdk::prelude::*;

/// The plugin version.
pub const VERSION: &str = "0.1.0";

/// The plugin.
#[derive(Debug)]
pub struct SidecarSetOperator;

impl Plugin for SidecarSetOperator {
    fn manifest() -> Manifest {
        let manifest = Manifest::new("sidecarset", VERSION)
            .description("Injects the sidecar containers of each SidecarSet into matching Pods and counts them")
            .parent(sidecarset_kind(), Scope::Cluster)
            // Every Pod: each SidecarSet's own spec.selector picks among them.
            .related(pod_kind(), "")
            .finalizer(false)
            .prune(false);
        admission::webhooks().into_iter().fold(manifest, Manifest::webhook)
    }

    fn reconcile(req: Request, _ctx: &Context) -> Result<Response, Error> {
        validate(&req.parent).map_err(|e| Error::terminal(e.to_string()))?;
        let set = SidecarSet::from_object(&req.parent).map_err(|e| Error::terminal(e.to_string()))?;
        let status = status::count(&set, req.related_of(&pod_kind()));
        log::debug!("sidecarset {}: {status:?}", set.name);
        let condition = status::updated_condition(&status);
        Ok(Response::new().status(status).condition(condition))
    }

    fn admit(webhook: &str, req: AdmissionRequest, ctx: &Context) -> Result<Verdict, Error> {
        admission::admit(webhook, req, ctx)
    }
}

wasmop_sdk::export_plugin!(SidecarSetOperator);

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn sidecarset(spec: Value) -> Request {
        Request::new(json!({"apiVersion": "apps.wasmop.dev/v1alpha1", "kind": "SidecarSet",
            "metadata": {"name": "log", "generation": 4}, "spec": spec}))
    }

    fn pod(ns: &str, name: &str, labels: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": labels}})
    }

    #[test]
    fn the_manifest_declares_a_cluster_scoped_parent_reading_every_pod() {
        let m = SidecarSetOperator::manifest();
        assert_eq!(m.parent, Some((sidecarset_kind(), Scope::Cluster)));
        assert_eq!(m.related.len(), 1);
        assert_eq!((m.related[0].kind.clone(), m.related[0].label_selector.as_str()), (pod_kind(), ""));
        assert!(m.children.is_empty());
    }

    #[test]
    fn reconcile_counts_matching_pods_of_every_namespace_into_the_status() {
        let req =
            sidecarset(json!({"selector": {"matchLabels": {"app": "web"}}, "containers": [{"name": "log", "image": "busybox"}]}))
                .with_related(pod("a", "web-1", json!({"app": "web"})))
                .with_related(pod("b", "web-2", json!({"app": "web"})))
                .with_related(pod("a", "db-1", json!({"app": "db"})));
        let resp = SidecarSetOperator::reconcile(req, &Context::fixture(vec![])).unwrap();
        assert_eq!(
            resp.status_patch(),
            Some(&json!({"matchedPods": 2, "updatedPods": 0, "readyPods": 0, "observedGeneration": 4}))
        );
        assert_eq!(resp.condition_of("Updated").unwrap().reason, "PodsNotUpdated");
    }

    #[test]
    fn an_invalid_sidecarset_is_a_terminal_error_with_the_reason() {
        let req = sidecarset(json!({"selector": {"matchLabels": {"app": "web"}}, "containers": [{"name": "log"}]}));
        let err = SidecarSetOperator::reconcile(req, &Context::fixture(vec![])).unwrap_err();
        assert!(err.to_string().contains("spec.containers[0].image is required"), "{err}");
    }
}
