//! Plans without a cluster: the testbed plugin as the host's mock-API tests see it (its manifest,
//! a parent, children as it returns them) and [`Planning`], which owns everything a
//! [`ReconcileContext`] borrows, so a test plans a response in one line.
//!
//! ```
//! use serde_json::json;
//! use wasmop::contract::Response;
//! use wasmop_e2e::plans::{Planning, returned_config_map};
//!
//! let planning = Planning::testbed();
//! let plan = planning.plan(Response { children: vec![returned_config_map("tb-out")], ..Default::default() });
//! assert_eq!(plan.apply[0]["metadata"]["namespace"], json!("ns"), "children land in the parent's namespace");
//! ```

use kube::api::GroupVersionKind;
use kube::discovery::ApiResource;
use serde_json::{Value, json};
use wasmop::actions::{HostConditions, Plan, ReconcileContext, plan};
use wasmop::contract::{Kind, KnownKinds, Manifest, Response, Scope};
use wasmop::objects::MemoryCache;
use wasmop::policy::Grants;

/// The time the host's conditions are stamped with in these plans.
pub const NOW: &str = "2026-01-01T00:00:00Z";

/// `v1/ConfigMap`: the testbed's child kind here.
pub fn config_map_kind() -> Kind {
    Kind::new("", "v1", "ConfigMap")
}

/// The testbed plugin's manifest: `Testbed` parents, ConfigMap children, pruned.
pub fn testbed_manifest() -> Manifest {
    Manifest {
        name: "testbed".into(),
        version: "0.1.0".into(),
        description: "mock API tests".into(),
        parent: Kind::new("test.wasmop.dev", "v1", "Testbed"),
        scope: Scope::Namespaced,
        children: vec![config_map_kind()],
        related: vec![],
        finalizer: false,
        prune: true,
        adopt_unowned: false,
        config_schema: None,
        webhooks: vec![],
    }
}

/// Parent `ns/tb`, uid `u-tb`, generation 3, resourceVersion 7.
pub fn testbed_parent() -> Value {
    json!({"apiVersion": "test.wasmop.dev/v1", "kind": "Testbed",
        "metadata": {"name": "tb", "namespace": "ns", "uid": "u-tb", "generation": 3, "resourceVersion": "7"},
        "spec": {"mode": "ok"}})
}

/// The `testbeds` resource.
pub fn testbed_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("test.wasmop.dev", "v1", "Testbed"), "testbeds")
}

/// A ConfigMap child as the plugin returns it: no namespace, no owner, label `app: tb`.
pub fn returned_config_map(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"app": "tb"}}, "data": {"k": "v"}})
}

/// ConfigMap `ns/<name>` as the API server holds it, uid `uid-<name>`, controlled by the owner
/// whose uid is `controller` (if any).
pub fn stored_config_map(name: &str, controller: Option<&str>) -> Value {
    let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}")}, "data": {"k": "v"}});
    if let Some(uid) = controller {
        cm["metadata"]["ownerReferences"] = json!([{"apiVersion": "test.wasmop.dev/v1", "kind": "Testbed", "name": "x",
            "uid": uid, "controller": true}]);
    }
    cm
}

/// What one reconcile is planned against: the plugin's manifest and grants, the kinds known,
/// the objects the host's cache holds, the parent.
#[derive(Debug)]
pub struct Planning {
    /// The plugin's manifest.
    pub manifest: Manifest,
    /// What the policy grants it.
    pub grants: Grants,
    /// Kubernetes' own kinds.
    pub kinds: KnownKinds,
    /// The objects observed.
    pub cache: MemoryCache,
    /// The parent.
    pub parent: Value,
}

impl Planning {
    /// The testbed's manifest and [`testbed_parent`], nothing granted, nothing observed.
    #[must_use]
    pub fn testbed() -> Self {
        Self {
            manifest: testbed_manifest(),
            grants: Grants::default(),
            kinds: KnownKinds::builtin(),
            cache: MemoryCache::default(),
            parent: testbed_parent(),
        }
    }

    /// Plan for the plugin of `manifest` instead.
    #[must_use]
    pub fn manifest(self, manifest: Manifest) -> Self {
        Self { manifest, ..self }
    }

    /// Grant it `grants`.
    #[must_use]
    pub fn grants(self, grants: Grants) -> Self {
        Self { grants, ..self }
    }

    /// With `objects` in the cache.
    ///
    /// # Panics
    /// When one is not an object the cache can hold (no kind or name).
    #[must_use]
    pub fn observed(mut self, objects: &[Value]) -> Self {
        for object in objects {
            self.cache.insert(object.clone()).expect("an object the cache can hold");
        }
        self
    }

    /// The reconcile context over all of it, as the controller builds it.
    pub fn context(&self) -> ReconcileContext<'_> {
        ReconcileContext::new(&self.manifest, &self.kinds, &self.cache, &self.parent).grants(&self.grants)
    }

    /// The plan of `response`, the host's conditions stamped at [`NOW`].
    ///
    /// # Panics
    /// When the host refuses the response: a test of a refusal calls `plan` itself.
    pub fn plan(&self, response: Response) -> Plan {
        plan(&self.context(), response, HostConditions::always(NOW)).expect("an accepted response")
    }
}
