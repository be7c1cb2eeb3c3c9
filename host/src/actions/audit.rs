//! The audit trail: one structured event on the tracing target [`AUDIT_TARGET`] for every
//! write the host makes for a plugin (apply, create, prune, delete, status, event, finalizer
//! added or removed, adoption label) and for every response refused by the scope, write-gate
//! or ownership checks.
//!
//! Each event carries the plugin, its version and digest, the parent (`Kind namespace/name`),
//! the verb, the object's kind, namespace and name, the field manager, and the outcome (`ok`,
//! `error` with the API server's reason, or `refused` with the check's reason). The events are
//! off in the host's own log unless asked for (`RUST_LOG=wasmop::audit=info`); `wasmop run
//! --audit-log PATH` writes them as JSON lines ([`crate::cli::audit_log`]).

use std::fmt::Display;

use crate::contract::ObjectRef;

/// The tracing target of audit events.
pub const AUDIT_TARGET: &str = "wasmop::audit";

/// What a write did to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// A server-side apply of a child.
    Apply,
    /// A child created in one request (apply on the condition that it does not exist).
    Create,
    /// A child the response no longer lists, deleted.
    Prune,
    /// A child the response asked to delete.
    Delete,
    /// A merge patch of the parent's status subresource.
    Status,
    /// An event recorded about the parent.
    Event,
    /// The plugin's finalizer added to the parent.
    FinalizerAdd,
    /// The plugin's finalizer removed from the parent.
    FinalizerRemove,
    /// The host's labels applied to a child an older host wrote.
    Adopt,
    /// A response refused whole: nothing of it was written.
    Refuse,
}

impl Verb {
    /// The `verb` field.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Apply => "apply",
            Self::Create => "create",
            Self::Prune => "prune",
            Self::Delete => "delete",
            Self::Status => "status",
            Self::Event => "event",
            Self::FinalizerAdd => "finalizer-add",
            Self::FinalizerRemove => "finalizer-remove",
            Self::Adopt => "adopt",
            Self::Refuse => "refuse",
        }
    }
}

/// The object a write went to.
#[derive(Debug, Clone, Copy)]
pub struct AuditObject<'a> {
    /// Its `apiVersion` (`apps/v1`).
    pub api_version: &'a str,
    /// Its kind (`Deployment`).
    pub kind: &'a str,
    /// Its namespace (empty for a cluster-scoped object).
    pub namespace: &'a str,
    /// Its name.
    pub name: &'a str,
}

impl<'a> From<&'a ObjectRef> for AuditObject<'a> {
    fn from(r: &'a ObjectRef) -> Self {
        Self { api_version: &r.api_version, kind: &r.kind, namespace: r.namespace.as_deref().unwrap_or_default(), name: &r.name }
    }
}

/// Who writes, for which parent: everything an audit event carries beside the write itself.
#[derive(Debug, Clone, Copy)]
pub struct Audit<'a> {
    /// The plugin's name.
    pub plugin: &'a str,
    /// Its version (the manifest's).
    pub version: &'a str,
    /// The digest of the plugin file serving now.
    pub digest: &'a str,
    /// The parent: `Kind namespace/name` (`Kind name` when cluster-scoped).
    pub parent: &'a str,
    /// The field manager of the write (`wasmop/<plugin>`).
    pub field_manager: &'a str,
}

impl Audit<'_> {
    /// `verb` on `target` ended with `outcome`; `detail` says more (an event's reason).
    pub fn wrote<E: Display>(&self, verb: Verb, target: AuditObject<'_>, detail: &str, outcome: Result<(), E>) {
        match outcome {
            Ok(()) => tracing::info!(target: AUDIT_TARGET, plugin = self.plugin, version = self.version,
                digest = self.digest, parent = self.parent, verb = verb.as_str(), api_version = target.api_version, kind = target.kind,
                namespace = target.namespace, name = target.name, field_manager = self.field_manager,
                detail, outcome = "ok", "write"),
            Err(e) => tracing::info!(target: AUDIT_TARGET, plugin = self.plugin, version = self.version,
                digest = self.digest, parent = self.parent, verb = verb.as_str(), api_version = target.api_version, kind = target.kind,
                namespace = target.namespace, name = target.name, field_manager = self.field_manager,
                detail, outcome = "error", reason = %e, "write"),
        }
    }

    /// A response refused by a check: `object` is the first object it named, `reason` the
    /// CamelCase reason, `message` the whole refusal.
    pub fn refused(&self, object: &str, reason: &str, message: &str) {
        tracing::info!(target: AUDIT_TARGET, plugin = self.plugin, version = self.version, digest = self.digest,
            parent = self.parent, verb = Verb::Refuse.as_str(), object, field_manager = self.field_manager,
            outcome = "refused", reason, message, "refused");
    }
}

/// `Kind namespace/name` of a parent (`Kind name` when it has no namespace).
pub fn parent_name(kind: &str, namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}
