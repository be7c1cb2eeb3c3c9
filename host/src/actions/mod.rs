//! Applying a plugin's response to the cluster. Data flows one way: response → [`plan`]
//! (scope and ownership checks, the writes decided) → [`Writer::execute`] (the writes made).

mod adoption;
mod applied;
mod audit;
mod context;
mod create;
mod diff;
mod events;
mod finalizer;
mod labels;
mod ownership;
mod patch;
mod plan;
mod scope;
mod status;
mod status_writes;

use std::sync::Arc;

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions};
use kube::discovery::ApiResource;
use serde_json::Value;

pub use adoption::{ADOPTION_FIELD_MANAGER, label_unlabelled_children, needs_label};
pub use applied::AppliedChildren;
pub use audit::{AUDIT_TARGET, Audit, AuditObject, Verb, parent_name};
pub use context::ReconcileContext;
pub use create::{CreateOnly, Created};
pub use diff::contains;

pub use events::EventSink;
pub use finalizer::{add_finalizer, has_finalizer, remove_finalizer};
pub use labels::{MANAGED_BY, MANAGED_BY_LABEL, PLUGIN_LABEL, add_host_labels, has_host_labels, managed_selector};
pub use ownership::Control;
pub use patch::{Target, patch, patch_answered};
pub use plan::{Deletion, Plan, PlanError, owner_reference, plan};
pub use scope::{PARENT_ANNOTATION, PARENT_UID_LABEL, ScopeError, check as check_scope};
pub use status::{HostConditions, RECONCILED, failure_status_patch, merge_conditions, status_patch, timestamp_now};
pub use status_writes::StatusWrites;

use crate::cluster::{Discovery, DiscoveryError};
use crate::contract::{Event, Kind, ObjectRef};
use crate::objects::{name_of, namespace_of};

/// Why writing a response failed. Writes already done stay done (each is idempotent); the
/// reconcile is retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum ActionError {
    /// The API server refused or failed a write.
    #[error("{action} {object}: {source}")]
    Api {
        /// What was attempted (`apply`, `delete`, `patch status`, ...).
        action: &'static str,
        /// The object.
        object: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// A child kind could not be resolved.
    #[error(transparent)]
    Discovery(#[from] DiscoveryError),
    /// A child missing from the cache (which holds only the host's labelled children) exists
    /// on the API server and this parent may not apply it ([`Control::may_apply`]): the plan's
    /// ownership rule, checked against the server before any write: nothing was written.
    #[error("response refused, nothing written: {0}")]
    Refused(#[source] PlanError),
}

/// What a response's writes did.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Written {
    /// Children server-side applied.
    pub applied: usize,
    /// Children skipped because they already matched.
    pub unchanged: usize,
    /// Children deleted (explicitly or pruned).
    pub deleted: usize,
    /// Whether the status was patched.
    pub status: bool,
    /// The parent's `resourceVersion` after the status patch, when one was made: a later
    /// optimistic write of the parent (the finalizer's removal) must name it, or it conflicts
    /// with the host's own status write.
    pub parent_resource_version: Option<String>,
    /// The children applied that the reconcile's cache did not hold (created, or adopted), as
    /// the API server answered their writes and as the watches decode objects: what the
    /// plugin has not seen yet.
    pub answered: Vec<Value>,
}

impl Written {
    /// Whether anything was written: a child applied or deleted, or the status patched.
    pub fn anything(&self) -> bool {
        self.applied > 0 || self.deleted > 0 || self.status
    }
}

/// Where one plugin's writes go, and what they remember between its reconciles; one per
/// plugin controller.
pub struct WriteTarget {
    /// The client.
    pub client: kube::Client,
    /// Kind resolution.
    pub discovery: Arc<Discovery>,
    /// The resource of the plugin's parent kind.
    pub parent_resource: ApiResource,
    /// What was last applied to each child, so an apply is skipped only when both the
    /// desired content is unchanged and the observed object still contains it.
    pub applied: AppliedChildren,
    /// The kinds whose new children may be created in one request ([`CreateOnly`]).
    pub creates: CreateOnly,
    /// The parents as the host's status writes left them, until the watch delivers those
    /// writes, so that a reconcile in between does not write the same status again.
    pub statuses: StatusWrites,
}

impl WriteTarget {
    /// Writes through `client` for a plugin whose parents are `parent_resource`, remembering
    /// nothing yet.
    pub fn new(client: kube::Client, discovery: Arc<Discovery>, parent_resource: ApiResource) -> Self {
        Self {
            client,
            discovery,
            parent_resource,
            applied: AppliedChildren::default(),
            creates: CreateOnly::default(),
            statuses: StatusWrites::default(),
        }
    }

    /// The writer of one reconcile's plan.
    pub fn writer<'a>(&'a self, context: ReconcileContext<'a>, audit: Audit<'a>) -> Writer<'a> {
        Writer { context, target: self, audit }
    }
}

impl std::fmt::Debug for WriteTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteTarget").field("parent_resource", &self.parent_resource.kind).finish_non_exhaustive()
    }
}

/// Everything needed to write on behalf of one plugin for one parent: it executes a [`Plan`]
/// and checks nothing itself (every check is [`plan`]'s). Made by [`WriteTarget::writer`].
pub struct Writer<'a> {
    /// The reconcile the writes are for (the adoption of uncached objects is checked against
    /// its grants; the cache tells unchanged applies).
    pub context: ReconcileContext<'a>,
    /// Where the writes go.
    pub target: &'a WriteTarget,
    /// Who writes for which parent: every write is audited ([`Audit`]).
    pub audit: Audit<'a>,
}

impl std::fmt::Debug for Writer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer").field("plugin", &self.context.manifest.name).finish_non_exhaustive()
    }
}

impl Writer<'_> {
    /// Server-side apply with the plugin's field manager, forced.
    ///
    /// How a plugin shares objects with other field managers: the plugin owns exactly the
    /// fields it sends. `force` takes a field the plugin sends away from any other manager that
    /// set it (controllers are expected to force: the plugin is the source of truth for what it
    /// returns, and a manual edit of such a field is reverted). A field the plugin omits is
    /// never touched, because server-side apply manages only what the applier sends: to leave
    /// a field to someone else (an HPA's `spec.replicas`), omit it. A field the plugin sent
    /// before and stops sending is removed, unless another manager also set it.
    fn params(&self) -> PatchParams {
        PatchParams::apply(&self.context.manifest.field_manager()).force()
    }

    async fn api(&self, kind: &Kind, namespace: Option<&str>) -> Result<Api<DynamicObject>, ActionError> {
        let resolved = self.target.discovery.resolve(kind, std::time::Duration::from_secs(10)).await?;
        Ok(match (resolved.scope, namespace) {
            (crate::contract::Scope::Namespaced, Some(ns)) => {
                Api::namespaced_with(self.target.client.clone(), ns, &resolved.resource)
            }
            _ => Api::all_with(self.target.client.clone(), &resolved.resource),
        })
    }

    /// Make the writes of `plan`, in order: apply its children, delete its prunes and
    /// deletes, patch the parent's status. Events and the finalizer are the caller's.
    ///
    /// Before any other write, each child the cache does not hold is checked against the API
    /// server: the cache holds only children the host labelled ([`labels`]), so such a child
    /// may still exist (a user's object of the same name, a child an older host wrote), and it
    /// is applied only if this parent may ([`Control::may_apply`], the rule [`plan`] checks
    /// against the cache). When it is the plan's only such child, it is applied on the
    /// condition that it does not exist ([`CreateOnly`]): a new child costs one request, and
    /// only an existing one is read and checked. Several are each read first, so that a
    /// refusal still comes before any write.
    ///
    /// # Errors
    /// [`ActionError::Refused`] when such a child may not be applied (nothing is written then);
    /// otherwise the first failed read or write, and the writes before it stay done (each is
    /// idempotent).
    pub async fn execute(&self, plan: &Plan) -> Result<Written, ActionError> {
        let mut written = self.execute_children(plan).await?;
        self.execute_status(plan, &mut written).await?;
        Ok(written)
    }

    /// The writes of `plan` to its children, as [`Writer::execute`] makes them: apply, prune,
    /// delete; the status is left to [`Writer::execute_status`].
    ///
    /// # Errors
    /// As [`Writer::execute`].
    pub async fn execute_children(&self, plan: &Plan) -> Result<Written, ActionError> {
        let mut written = Written::default();
        let created = self.check_uncached(&plan.apply, &mut written).await?;
        self.apply_children(&plan.apply, created, &mut written).await?;
        self.delete(&plan.prune, Verb::Prune, &mut written).await?;
        self.delete(&plan.delete, Verb::Delete, &mut written).await?;
        Ok(written)
    }

    /// The status patch of `plan`, if it has one, recorded in `written`.
    ///
    /// # Errors
    /// The API error of the patch.
    pub async fn execute_status(&self, plan: &Plan, written: &mut Written) -> Result<(), ActionError> {
        if let Some(patch) = &plan.status_patch {
            written.parent_resource_version = self.patch_status(patch).await?;
            written.status = true;
        }
        Ok(())
    }

    /// Server-side apply each child (see [`Writer::params`] for field ownership), skipping
    /// those last applied with the same content whose observed state still contains it. The
    /// skip compares only the fields the plugin sends, so a field left to another manager (and
    /// changed by it) never causes a write.
    /// The child at index `created` was created already ([`Writer::check_uncached`]).
    async fn apply_children(&self, children: &[Value], created: Option<usize>, written: &mut Written) -> Result<(), ActionError> {
        let parent_uid = self.context.parent.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default();
        for (_, child) in children.iter().enumerate().filter(|(i, _)| Some(*i) != created) {
            let r = ObjectRef::of_object(child).expect("planned children have identity");
            let kind = r.kind();
            let observed = self.context.cache.get(&kind, r.namespace.as_deref(), &r.name);
            if let Some(observed) = &observed
                && self.target.applied.unchanged(parent_uid, &r, child)
                && contains(&observed.to_value(), child)
            {
                written.unchanged += 1;
                continue;
            }
            let api = self.api(&kind, r.namespace.as_deref()).await?;
            let apply = Patch::Apply(child);
            let applied = match observed {
                Some(_) => patch::patch(&api, Target::Object, &r.name, &self.params(), &apply).await.map(drop),
                None => patch::patch_answered(&api, Target::Object, &r.name, &self.params(), &apply)
                    .await
                    .map(|stored| written.answered.push(stored)),
            };
            self.audit.wrote(Verb::Apply, AuditObject::from(&r), "", applied.as_ref().map(drop));
            applied.map_err(|source| ActionError::Api { action: "apply", object: r.to_string(), source })?;
            self.target.applied.record(parent_uid, r, child);
            written.applied += 1;
        }
        Ok(())
    }

    /// Check each child the cache does not hold against the API server; refuse the first that
    /// exists and this parent may not apply. The only such child of a plan is created if it
    /// does not exist (counted in `written`; its index is returned); otherwise each is read.
    async fn check_uncached(&self, children: &[Value], written: &mut Written) -> Result<Option<usize>, ActionError> {
        let parent_uid = self.context.parent.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default();
        let uncached: Vec<(usize, &Value, ObjectRef)> = children
            .iter()
            .enumerate()
            .map(|(i, child)| (i, child, ObjectRef::of_object(child).expect("planned children have identity")))
            .filter(|(_, _, r)| self.context.cache.get(&r.kind(), r.namespace.as_deref(), &r.name).is_none())
            .collect();
        if let [(i, child, r)] = uncached.as_slice()
            && self.target.creates.supported(&r.kind())
        {
            let kind = r.kind();
            let api = self.api(&kind, r.namespace.as_deref()).await?;
            let created = self.target.creates.apply(&api, &kind, &r.name, child, &self.params()).await;
            match &created {
                Ok(Created::Created(_)) => self.audit.wrote::<&str>(Verb::Create, AuditObject::from(r), "", Ok(())),
                Ok(Created::Exists | Created::Unsupported) => {}
                Err(e) => self.audit.wrote(Verb::Create, AuditObject::from(r), "", Err(e)),
            }
            match created.map_err(|source| ActionError::Api { action: "apply", object: r.to_string(), source })? {
                Created::Created(stored) => {
                    self.target.applied.record(parent_uid, r.clone(), child);
                    written.applied += 1;
                    written.answered.push(*stored);
                    return Ok(Some(*i));
                }
                Created::Exists | Created::Unsupported => {}
            }
        }
        for (_, _, r) in &uncached {
            let api = self.api(&r.kind(), r.namespace.as_deref()).await?;
            let existing = api.get_opt(&r.name).await.map_err(|source| ActionError::Api {
                action: "read",
                object: r.to_string(),
                source,
            })?;
            let Some(existing) = existing else { continue };
            let control =
                Control::of(&serde_json::to_value(existing).unwrap_or_default(), parent_uid, &self.context.manifest.name);
            if !control.may_apply(self.context.manifest, self.context.grants) {
                return Err(ActionError::Refused(PlanError::AlreadyOwned { object: r.to_string(), control }));
            }
        }
        Ok(None)
    }

    /// Delete objects, each on the condition that its uid is still the one checked. An object
    /// already gone, or replaced by a same-named one since (the precondition fails), is left.
    async fn delete(&self, deletions: &[Deletion], verb: Verb, written: &mut Written) -> Result<(), ActionError> {
        let parent_uid = self.context.parent.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default();
        for d in deletions {
            let r = &d.object;
            let api = self.api(&r.kind(), r.namespace.as_deref()).await?;
            self.target.applied.forget(parent_uid, r);
            let params = DeleteParams {
                preconditions: Some(Preconditions { uid: d.uid.clone(), resource_version: None }),
                ..DeleteParams::background()
            };
            let deleted = api.delete(&r.name, &params).await;
            if !matches!(&deleted, Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409) {
                self.audit.wrote(verb, AuditObject::from(r), "", deleted.as_ref().map(drop));
            }
            match deleted {
                Ok(_) => written.deleted += 1,
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    tracing::info!(object = %r, "not deleted: replaced by another object since it was checked");
                }
                Err(source) => return Err(ActionError::Api { action: "delete", object: r.to_string(), source }),
            }
        }
        Ok(())
    }

    /// Merge-patch the parent's status subresource; the parent's new `resourceVersion`. The
    /// parent as the patch left it is what the next reconcile reads until the watch delivers
    /// the patch ([`StatusWrites`]).
    ///
    /// # Errors
    /// The API error.
    pub async fn patch_status(&self, patch: &Value) -> Result<Option<String>, ActionError> {
        let api = self.parent_api();
        let name = name_of(self.context.parent).unwrap_or_default();
        let params = PatchParams { field_manager: Some(self.context.manifest.field_manager()), ..PatchParams::default() };
        let patched = patch::patch(&api, Target::Status, name, &params, &Patch::Merge(patch)).await;
        self.audit.wrote(Verb::Status, self.parent_object(), "", patched.as_ref().map(drop));
        let version = patched.map_err(|source| ActionError::Api {
            action: "patch status of",
            object: format!("{} {}", self.context.manifest.parent, name),
            source,
        })?;
        if let Some(version) = &version {
            self.target.statuses.record(self.context.parent, patch, version);
        }
        Ok(version)
    }

    /// The parent, as an audited object.
    fn parent_object(&self) -> AuditObject<'_> {
        AuditObject {
            api_version: self.context.parent["apiVersion"].as_str().unwrap_or_default(),
            kind: self.context.parent["kind"].as_str().unwrap_or_default(),
            namespace: namespace_of(self.context.parent).unwrap_or_default(),
            name: name_of(self.context.parent).unwrap_or_default(),
        }
    }

    /// Add the plugin's finalizer `finalizer` to the parent (audited).
    ///
    /// # Errors
    /// As [`add_finalizer`].
    pub async fn add_finalizer(&self, finalizer: &str) -> kube::Result<()> {
        let added =
            add_finalizer(&self.parent_api(), self.context.parent, finalizer, &self.context.manifest.field_manager()).await;
        self.audit.wrote(Verb::FinalizerAdd, self.parent_object(), finalizer, added.as_ref().map(drop));
        added
    }

    /// Remove `finalizer` from `parent` (the parent as last written; audited).
    ///
    /// # Errors
    /// As [`remove_finalizer`].
    pub async fn remove_finalizer(&self, parent: &Value, finalizer: &str) -> kube::Result<()> {
        let removed = remove_finalizer(&self.parent_api(), parent, finalizer, &self.context.manifest.field_manager()).await;
        self.audit.wrote(Verb::FinalizerRemove, self.parent_object(), finalizer, removed.as_ref().map(drop));
        removed
    }

    /// Record `event` about the parent through `sink` (audited; a failure is logged, never
    /// returned: an event is a courtesy, not part of the reconcile).
    pub async fn event(&self, sink: &EventSink, event: &Event) {
        let recorded = sink.try_publish(self.context.parent, event).await;
        let object = AuditObject { api_version: "events.k8s.io/v1", kind: "Event", ..self.parent_object() };
        self.audit.wrote(Verb::Event, object, &event.reason, recorded.as_ref().map(drop));
        if let Err(e) = recorded {
            tracing::warn!(error = %e, reason = %event.reason, "cannot record event");
        }
    }

    /// Audit the refusal of the response: nothing of it was written.
    pub fn refused(&self, refusal: &PlanError) {
        self.audit.refused(refusal.object(), refusal.reason(), &refusal.to_string());
    }

    /// The API of the parent's kind, in its namespace.
    pub fn parent_api(&self) -> Api<DynamicObject> {
        match namespace_of(self.context.parent) {
            Some(ns) => Api::namespaced_with(self.target.client.clone(), ns, &self.target.parent_resource),
            None => Api::all_with(self.target.client.clone(), &self.target.parent_resource),
        }
    }
}
