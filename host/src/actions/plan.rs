//! The host's plan for one response: every write a reconcile makes, decided before any is made.
//!
//! [`plan`] is a pure function of the reconcile's context (the manifest, the grants, the
//! parent, the observed objects), the plugin's validated response and the time. The controller executes the plan with
//! [`Writer`](super::Writer); `wasmop reconcile` prints it. Both therefore make the same scope
//! and ownership checks, and a response either passes all of them or nothing of it is written.

use std::collections::HashSet;
use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};

use super::context::ReconcileContext;
use super::labels;
use super::ownership::Control;
use super::scope::{self, ScopeError};
use super::status::{HostConditions, RECONCILED, status_patch};
use crate::contract::{Condition, ConditionStatus, Event, Manifest, ObjectRef, Response, Scope};
use crate::objects::{ObjectCache, is_of_plugin, name_of, namespace_of};
use crate::policy::{Grants, ReconciledCondition};

/// Why a response was refused. Nothing of a refused response is written; the controller
/// records the reason on the parent (a Warning event and `Reconciled=False`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// A child or delete is outside what the manifest declares, the policy grants, or the
    /// parent's namespace.
    #[error(transparent)]
    Scope(#[from] ScopeError),
    /// The parent has no `metadata.uid`, so no owner reference can name it (objects read from
    /// the API server always have one; `wasmop reconcile` supplies a placeholder).
    #[error("the parent {parent} has no metadata.uid")]
    ParentWithoutUid {
        /// The parent's name.
        parent: String,
    },
    /// A child exists and is not controlled by this parent: another owner's child, or an
    /// object nobody controls (a user's own) that the manifest does not adopt.
    #[error(
        "{object} already exists and is {control}; a plugin applies only objects that do not exist yet or that its parent controls"
    )]
    AlreadyOwned {
        /// The child.
        object: String,
        /// Who controls it.
        control: Control,
    },
    /// An explicit delete names an existing object this parent does not control.
    #[error("cannot delete {object}: it is {control}, and a plugin deletes only its parent's children")]
    NotControlled {
        /// The object.
        object: String,
        /// Who controls it.
        control: Control,
    },
}

impl PlanError {
    /// The object the refusal names (the parent, when it has no uid).
    pub fn object(&self) -> &str {
        match self {
            Self::Scope(e) => e.object(),
            Self::ParentWithoutUid { parent } => parent,
            Self::AlreadyOwned { object, .. } | Self::NotControlled { object, .. } => object,
        }
    }

    /// CamelCase reason for events and conditions.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Scope(e) => e.reason(),
            Self::ParentWithoutUid { .. } => "ParentWithoutUid",
            Self::AlreadyOwned { .. } => "AlreadyOwned",
            Self::NotControlled { .. } => "NotControlled",
        }
    }
}

/// An object to delete, and the uid it had when checked: the delete is conditional on it, so a
/// same-named object created since is left alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Deletion {
    /// The object.
    #[serde(flatten)]
    pub object: ObjectRef,
    /// Its uid as observed (absent only for offline fixtures without one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}

/// Every write of one reconcile, in the order the controller makes them: apply, prune,
/// delete, patch status; then events are recorded and, when `finalized`, the finalizer removed.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// Children to server-side apply: namespace defaulted to the parent's,
    /// `ownerReferences` replaced by the host's single controller reference to the parent, and
    /// the host's labels stamped ([`labels::host_conditions`](super::labels::host_conditions)).
    pub apply: Vec<Value>,
    /// Observed children this parent controls that the response no longer lists (only when the
    /// manifest prunes).
    pub prune: Vec<Deletion>,
    /// The response's explicit deletes of existing children (those already gone are dropped).
    pub delete: Vec<Deletion>,
    /// The merge patch of the parent's status (plugin fields, conditions and `Reconciled=True`,
    /// or `Reconciled` removed under [`ReconciledCondition::OnFailure`]), or `None` when the
    /// parent already has it all.
    pub status_patch: Option<Value>,
    /// Events to record about the parent.
    pub events: Vec<Event>,
    /// Reconcile again after this delay.
    #[serde(rename = "requeueAfterMs", serialize_with = "crate::contract::serialize_millis")]
    pub requeue_after: Option<Duration>,
    /// Cleanup done: the finalizer may go.
    pub finalized: bool,
}

impl Plan {
    /// Take the status of `again`, the plan of the same reconcile's second answer: the plugin
    /// asked once more after this plan's children were written, shown the children it had not
    /// seen (see the controller's reconcile). Taken only when `again` makes the same writes to
    /// the children (the same applies, prunes and deletes): then its status patch, its requeue
    /// and its `finalized` replace this plan's, and its events not already in this plan are
    /// added. Otherwise nothing is taken and `false` returned: this plan's status is written,
    /// and the watch's event of the new children reconciles the parent again.
    ///
    /// ```
    /// use serde_json::json;
    /// use wasmop::actions::Plan;
    /// let first = Plan { apply: vec![json!({"kind": "ConfigMap"})], prune: vec![], delete: vec![],
    ///     status_patch: Some(json!({"status": {"phase": "Creating"}})), events: vec![], requeue_after: None, finalized: false };
    /// let mut plan = first.clone();
    /// let again = Plan { status_patch: Some(json!({"status": {"phase": "Ready"}})), ..first.clone() };
    /// assert!(plan.settle(again));
    /// assert_eq!(plan.status_patch, Some(json!({"status": {"phase": "Ready"}})));
    /// let other = Plan { apply: vec![], ..first.clone() };
    /// assert!(!plan.settle(other));
    /// ```
    #[must_use = "when false, the second answer was not taken"]
    pub fn settle(&mut self, again: Plan) -> bool {
        if again.apply != self.apply || again.prune != self.prune || again.delete != self.delete {
            return false;
        }
        self.status_patch = again.status_patch;
        self.requeue_after = again.requeue_after;
        self.finalized = again.finalized;
        for event in again.events {
            if !self.events.contains(&event) {
                self.events.push(event);
            }
        }
        true
    }
}

/// The controller ownerReference the host puts on every child of `parent`.
pub fn owner_reference(manifest: &Manifest, parent: &Value, uid: &str) -> Value {
    json!({
        "apiVersion": manifest.parent.api_version(),
        "kind": manifest.parent.kind,
        "name": name_of(parent).unwrap_or_default(),
        "uid": uid,
        "controller": true,
        "blockOwnerDeletion": true,
    })
}

/// Plan the writes of `response` for the context's parent, checking it against the plugin's
/// manifest and grants and the observed objects of the context; `host_conditions` dates changed
/// conditions and says whether the host's `Reconciled=True` is added (or a failure's
/// `Reconciled` removed).
///
/// Checks, in order: every child and delete through the host's gate ([`scope::check`]); each
/// child either does not exist in `cache` or is this plugin's child of the parent (or
/// controlled by nobody, with [`Manifest::adopt_unowned`] and [`Grants::adopt_unowned`]); each
/// explicit delete names this plugin's child of the parent ([`Control::of`]). Prunes are this
/// plugin's children of the parent, of the declared kinds, that the response does not list;
/// nothing else is ever pruned.
///
/// # Errors
/// The first [`PlanError`]; the response must then be dropped whole.
pub fn plan(
    context: &ReconcileContext<'_>,
    mut response: Response,
    host_conditions: HostConditions<'_>,
) -> Result<Plan, PlanError> {
    let ReconcileContext { manifest, grants, scopes, cache, parent } = *context;
    scope::check(manifest, grants, scopes, parent, &mut response)?;
    let uid = parent
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .filter(|u| !u.is_empty())
        .ok_or_else(|| PlanError::ParentWithoutUid { parent: name_of(parent).unwrap_or_default().to_owned() })?;
    let owner = owner_reference(manifest, parent, uid);
    let mut apply = response.children;
    for child in &mut apply {
        let r = ObjectRef::of_object(child).expect("validated children have identity");
        if let Some(observed) = cache.get(&r.kind(), r.namespace.as_deref(), &r.name) {
            let control = Control::of(observed.head(), uid, &manifest.name);
            if !control.may_apply(manifest, grants) {
                return Err(PlanError::AlreadyOwned { object: r.to_string(), control });
            }
        }
        // A cluster-scoped child of a namespaced parent cannot name it as owner (Kubernetes
        // forbids it): [`scope::check`] labelled it with the parent's uid instead.
        let owned_by_reference = r.namespace.is_some() || namespace_of(parent).is_none();
        child["metadata"]["ownerReferences"] = if owned_by_reference { json!([owner]) } else { json!([]) };
        labels::add_host_labels(child, &manifest.name);
    }
    let mut delete = Vec::new();
    for r in response.delete {
        let Some(observed) = cache.get(&r.kind(), r.namespace.as_deref(), &r.name) else { continue };
        match Control::of(observed.head(), uid, &manifest.name) {
            Control::ThisParent => delete.push(Deletion { object: r, uid: uid_of(observed.head()) }),
            control => return Err(PlanError::NotControlled { object: r.to_string(), control }),
        }
    }
    let prune = if manifest.prune { absent_children(manifest, grants, parent, uid, &apply, &delete, cache) } else { Vec::new() };
    let mut conditions = response.conditions;
    let removed = match host_conditions.reconciled {
        ReconciledCondition::Always => {
            conditions.push(Condition {
                type_: RECONCILED.into(),
                status: ConditionStatus::True,
                reason: "ReconcileSucceeded".into(),
                message: format!("reconciled by {} {}", manifest.name, manifest.version),
            });
            None
        }
        ReconciledCondition::OnFailure => Some(RECONCILED),
    };
    Ok(Plan {
        status_patch: status_patch(parent, response.status.as_ref(), &conditions, removed, host_conditions.now),
        apply,
        prune,
        delete,
        events: response.events,
        requeue_after: response.requeue_after,
        finalized: response.finalized,
    })
}

/// The parent's controlled children of this plugin (declared kinds, the parent's namespace)
/// that are neither applied nor explicitly deleted; never another plugin's child of the same
/// parent, nor one of the host's own objects (the gate's [`Grants::may_write_object`]).
fn absent_children(
    manifest: &Manifest,
    grants: &Grants,
    parent: &Value,
    uid: &str,
    apply: &[Value],
    delete: &[Deletion],
    cache: &dyn ObjectCache,
) -> Vec<Deletion> {
    let namespace = match manifest.scope {
        Scope::Namespaced => namespace_of(parent),
        Scope::Cluster => None,
    };
    let kept: HashSet<ObjectRef> =
        apply.iter().filter_map(ObjectRef::of_object).chain(delete.iter().map(|d| d.object.clone())).collect();
    manifest
        .children
        .iter()
        .flat_map(|kind| cache.controlled_by(kind, namespace, uid))
        .filter(|observed| is_of_plugin(observed.head(), &manifest.name))
        .filter_map(|observed| {
            let object = ObjectRef::of_object(observed.head())?;
            let reserved = grants.may_write_object(&object.kind(), &object.name, None).is_err();
            (!kept.contains(&object) && !reserved).then(|| Deletion { object, uid: uid_of(observed.head()) })
        })
        .collect()
}

fn uid_of(object: &Value) -> Option<String> {
    object.pointer("/metadata/uid").and_then(Value::as_str).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::{EventType, Kind, KnownKinds};
    use crate::objects::MemoryCache;

    const NOW: &str = "2026-01-01T00:00:00Z";

    fn manifest() -> Manifest {
        Manifest {
            children: vec![Kind::new("", "v1", "ConfigMap")],
            related: vec![],
            ..crate::contract::manifest::fixtures::memcached("a=b")
        }
    }

    fn parent() -> Value {
        json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
            "metadata": {"name": "p", "namespace": "ns", "uid": "u-p", "generation": 2}})
    }

    fn config_map(name: &str, controller: Option<&str>) -> Value {
        let refs =
            controller.map(|uid| json!([{"apiVersion": "x/v1", "kind": "Owner", "name": "o", "uid": uid, "controller": true}]));
        let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}")}});
        if let Some(refs) = refs {
            cm["metadata"]["ownerReferences"] = refs;
        }
        cm
    }

    fn child(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}})
    }

    fn cache(objects: &[Value]) -> MemoryCache {
        let mut cache = MemoryCache::default();
        for o in objects {
            cache.insert(o.clone()).unwrap();
        }
        cache
    }

    fn delete(name: &str) -> ObjectRef {
        ObjectRef { api_version: "v1".into(), kind: "ConfigMap".into(), namespace: None, name: name.into() }
    }

    /// `plan` with no grants and the built-in kinds.
    fn plan_of(
        manifest: &Manifest,
        parent: &Value,
        response: Response,
        objects: &[Value],
        host_conditions: HostConditions<'_>,
    ) -> Result<Plan, PlanError> {
        let (kinds, cache) = (KnownKinds::builtin(), cache(objects));
        plan(&ReconcileContext::new(manifest, &kinds, &cache, parent), response, host_conditions)
    }

    fn run(response: Response, objects: &[Value]) -> Result<Plan, PlanError> {
        plan_of(&manifest(), &parent(), response, objects, HostConditions::always(NOW))
    }

    #[test]
    fn new_children_get_the_parent_namespace_and_the_host_owner_reference() {
        let p = run(Response { children: vec![child("new")], ..Default::default() }, &[]).unwrap();
        assert_eq!(p.apply[0]["metadata"]["namespace"], "ns");
        assert_eq!(
            p.apply[0]["metadata"]["ownerReferences"],
            json!([{"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached", "name": "p", "uid": "u-p",
                "controller": true, "blockOwnerDeletion": true}])
        );
    }

    #[test]
    fn children_carry_the_hosts_labels_over_the_plugins() {
        let mut forged = child("new");
        forged["metadata"]["labels"] = json!({"app.kubernetes.io/managed-by": "helm", "app": "x"});
        let p = run(Response { children: vec![forged], ..Default::default() }, &[]).unwrap();
        assert_eq!(
            p.apply[0]["metadata"]["labels"],
            json!({"app": "x", "app.kubernetes.io/managed-by": "wasmop", "wasmop.dev/plugin": "memcached"})
        );
    }

    #[test]
    fn a_plugin_cannot_point_a_child_at_another_owner() {
        let mut forged = child("mine");
        forged["metadata"]["ownerReferences"] =
            json!([{"apiVersion": "v1", "kind": "Owner", "name": "victim", "uid": "u-victim", "controller": true}]);
        let p = run(Response { children: vec![forged], ..Default::default() }, &[]).unwrap();
        let refs = p.apply[0]["metadata"]["ownerReferences"].as_array().unwrap();
        assert_eq!(refs.len(), 1);
        assert_eq!(refs[0]["uid"], "u-p");
    }

    #[test]
    fn children_this_parent_controls_are_applied() {
        let p = run(Response { children: vec![child("mine")], ..Default::default() }, &[config_map("mine", Some("u-p"))]);
        assert_eq!(p.unwrap().apply.len(), 1);
    }

    #[test]
    fn another_owners_child_is_already_owned() {
        let err = run(Response { children: vec![child("theirs")], ..Default::default() }, &[config_map("theirs", Some("u-q"))])
            .unwrap_err();
        assert_eq!(err.reason(), "AlreadyOwned");
        assert_eq!(
            err.to_string(),
            "v1/ConfigMap ns/theirs already exists and is controlled by Owner o (uid u-q); \
             a plugin applies only objects that do not exist yet or that its parent controls"
        );
    }

    /// `plan` under `grants` and the built-in kinds.
    fn plan_under(grants: &Grants, manifest: &Manifest, response: Response, objects: &[Value]) -> Result<Plan, PlanError> {
        let (kinds, cache, parent) = (KnownKinds::builtin(), cache(objects), parent());
        plan(&ReconcileContext::new(manifest, &kinds, &cache, &parent).grants(grants), response, HostConditions::always(NOW))
    }

    #[test]
    fn a_users_own_object_is_already_owned_unless_the_manifest_adopts_and_the_policy_grants_it() {
        let response = || Response { children: vec![child("users")], ..Default::default() };
        let objects = [config_map("users", None)];
        let err = run(response(), &objects).unwrap_err();
        assert!(matches!(err, PlanError::AlreadyOwned { control: Control::Nobody, .. }), "{err}");
        let adopting = Manifest { adopt_unowned: true, ..manifest() };
        let err = plan_of(&adopting, &parent(), response(), &objects, HostConditions::always(NOW)).unwrap_err();
        assert!(matches!(err, PlanError::AlreadyOwned { control: Control::Nobody, .. }), "the plugin's own opt-in: {err}");
        let granted = Grants { adopt_unowned: true, ..Grants::default() };
        let p = plan_under(&granted, &adopting, response(), &objects).unwrap();
        assert_eq!(p.apply[0]["metadata"]["ownerReferences"][0]["uid"], "u-p");
        let theirs = [config_map("users", Some("u-q"))];
        let err = plan_under(&granted, &adopting, response(), &theirs).unwrap_err();
        assert_eq!(err.reason(), "AlreadyOwned", "adoption never takes another owner's object");
    }

    #[test]
    fn the_hosts_own_objects_are_never_adopted() {
        let mut m = Manifest { adopt_unowned: true, ..manifest() };
        m.children.push(Kind::new("coordination.k8s.io", "v1", "Lease"));
        let lease = Kind::new("coordination.k8s.io", "v1", "Lease");
        let granted = Grants { adopt_unowned: true, escalation_kinds: [lease].into(), ..Grants::default() };
        let host_lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "wasmop", "namespace": "ns", "uid": "uid-lease"}, "spec": {"holderIdentity": "host-0"}});
        let mut forged = host_lease.clone();
        forged["spec"]["holderIdentity"] = json!("attacker");
        let err = plan_under(&granted, &m, Response { children: vec![forged], ..Default::default() }, &[host_lease]).unwrap_err();
        assert!(err.to_string().contains("is reserved for the host"), "{err}");
    }

    fn labelled(mut object: Value, plugin: &str) -> Value {
        object["metadata"]["labels"] = json!({crate::objects::PLUGIN_LABEL: plugin});
        object
    }

    #[test]
    fn another_plugins_child_of_the_same_parent_is_neither_applied_deleted_nor_pruned() {
        let victims =
            [labelled(config_map("victim", Some("u-p")), "victim"), labelled(config_map("own", Some("u-p")), "memcached")];
        let err = run(Response { children: vec![child("victim")], ..Default::default() }, &victims).unwrap_err();
        assert_eq!(
            err.to_string(),
            "v1/ConfigMap ns/victim already exists and is controlled by plugin victim (label wasmop.dev/plugin); \
             a plugin applies only objects that do not exist yet or that its parent controls"
        );
        let err = run(Response { delete: vec![delete("victim")], ..Default::default() }, &victims).unwrap_err();
        assert_eq!(err.reason(), "NotControlled");
        let p = run(Response::default(), &victims).unwrap();
        let pruned: Vec<_> = p.prune.iter().map(|d| d.object.name.as_str()).collect();
        assert_eq!(pruned, ["own"], "only its own child is pruned");
    }

    #[test]
    fn explicit_deletes_touch_only_the_parents_children() {
        let objects = [config_map("mine", Some("u-p")), config_map("theirs", Some("u-q")), config_map("users", None)];
        let p = run(Response { delete: vec![delete("mine"), delete("gone")], ..Default::default() }, &objects).unwrap();
        assert_eq!(p.delete.len(), 1, "an object already gone needs no delete");
        assert_eq!((p.delete[0].object.namespace.as_deref(), p.delete[0].uid.as_deref()), (Some("ns"), Some("uid-mine")));
        for name in ["theirs", "users"] {
            let err = run(Response { delete: vec![delete(name)], ..Default::default() }, &objects).unwrap_err();
            assert_eq!(err.reason(), "NotControlled", "{name}: {err}");
        }
    }

    #[test]
    fn prune_takes_only_controlled_children_missing_from_the_response() {
        let objects = [
            config_map("kept", Some("u-p")),
            config_map("stale", Some("u-p")),
            config_map("deleted", Some("u-p")),
            config_map("theirs", Some("u-q")),
            config_map("users", None),
        ];
        let response = Response { children: vec![child("kept")], delete: vec![delete("deleted")], ..Default::default() };
        let p = run(response, &objects).unwrap();
        let pruned: Vec<_> = p.prune.iter().map(|d| (d.object.name.as_str(), d.uid.as_deref())).collect();
        assert_eq!(pruned, [("stale", Some("uid-stale"))]);
        let no_prune = Manifest { prune: false, ..manifest() };
        let p = plan_of(&no_prune, &parent(), Response::default(), &objects, HostConditions::always(NOW)).unwrap();
        assert!(p.prune.is_empty());
    }

    #[test]
    fn scope_refusals_come_first() {
        let mut escaped = child("x");
        escaped["metadata"]["namespace"] = json!("kube-system");
        let err = run(Response { children: vec![escaped], ..Default::default() }, &[]).unwrap_err();
        assert!(
            matches!(&err, PlanError::Scope(e) if matches!(e.refusal(), Some(crate::policy::Refusal::OtherNamespace { .. }))),
            "{err}"
        );
        assert_eq!(err.reason(), "ActionRefused");
    }

    #[test]
    fn a_parent_without_uid_is_refused() {
        let mut p = parent();
        p["metadata"].as_object_mut().unwrap().remove("uid");
        let err = plan_of(&manifest(), &p, Response::default(), &[], HostConditions::always(NOW)).unwrap_err();
        assert_eq!(err, PlanError::ParentWithoutUid { parent: "p".into() });
    }

    #[test]
    fn status_events_requeue_and_finalized_pass_through() {
        let event = Event { type_: EventType::Normal, reason: "R".into(), action: "A".into(), note: "n".into() };
        let response = Response {
            status: Some(json!({"phase": "Ready"})),
            events: vec![event.clone()],
            requeue_after: Some(Duration::from_millis(1500)),
            finalized: true,
            ..Default::default()
        };
        let p = run(response, &[]).unwrap();
        let status = &p.status_patch.as_ref().unwrap()["status"];
        assert_eq!(status["phase"], "Ready");
        assert_eq!(status["conditions"][0]["type"], RECONCILED);
        assert_eq!(status["conditions"][0]["observedGeneration"], 2);
        assert_eq!(status["conditions"][0]["lastTransitionTime"], NOW);
        assert_eq!((p.events, p.requeue_after, p.finalized), (vec![event], Some(Duration::from_millis(1500)), true));
        let out = serde_json::to_value(run(Response::default(), &[]).unwrap()).unwrap();
        assert_eq!(out["requeueAfterMs"], Value::Null);
    }

    #[test]
    fn on_failure_policy_writes_no_reconciled_condition_and_clears_a_failed_one() {
        let on_failure = HostConditions { now: NOW, reconciled: ReconciledCondition::OnFailure };
        let available =
            Condition { type_: "Available".into(), status: ConditionStatus::True, reason: "Up".into(), message: String::new() };
        let response = || Response { conditions: vec![available.clone()], ..Default::default() };
        let healthy = plan_of(&manifest(), &parent(), response(), &[], on_failure).unwrap();
        let conditions = &healthy.status_patch.as_ref().unwrap()["status"]["conditions"];
        assert_eq!(conditions.as_array().unwrap().len(), 1, "{conditions}");
        assert_eq!(conditions[0]["type"], "Available");

        let mut failed = parent();
        failed["status"] = json!({"conditions": [{"type": RECONCILED, "status": "False", "reason": "GuestTrap",
            "message": "boom", "lastTransitionTime": "t0", "observedGeneration": 2}]});
        let recovered = plan_of(&manifest(), &failed, Response::default(), &[], on_failure).unwrap();
        assert_eq!(recovered.status_patch, Some(json!({"status": {"conditions": []}})));
    }
}
