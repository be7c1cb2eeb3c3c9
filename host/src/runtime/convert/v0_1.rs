//! Conversions between the WIT 0.1.0 bindings and [`crate::contract`] types.

use super::super::bindings::v0_1::{guest, types};
use crate::contract::{
    Condition, ConditionStatus, Event, EventType, Kind, Manifest, ManifestError, ObjectRef, RawResponse, RelatedKind, Request,
    Scope,
};

fn kind(k: types::KindRef) -> Kind {
    Kind::new(k.group, k.version, k.kind)
}

/// A manifest as the plugin returned it, validated.
pub(in super::super) fn manifest(m: guest::PluginManifest) -> Result<Manifest, ManifestError> {
    let config_schema = m.config_schema.as_deref().map(super::config_schema).transpose()?;
    let manifest = Manifest {
        name: m.name,
        version: m.version,
        description: m.description,
        parent: kind(m.parent.kind),
        scope: match m.parent.scope {
            types::Scope::Namespaced => Scope::Namespaced,
            types::Scope::Cluster => Scope::Cluster,
        },
        children: m.children.into_iter().map(kind).collect(),
        related: m.related.into_iter().map(|r| RelatedKind { kind: kind(r.kind), label_selector: r.label_selector }).collect(),
        finalizer: m.finalizer,
        prune: m.prune,
        // WIT 0.1.0 has no way to opt in.
        adopt_unowned: false,
        config_schema,
        webhooks: Vec::new(),
    };
    manifest.validate()?;
    Ok(manifest)
}

/// The request record handed to the guest: each object's JSON text, serialized at most once
/// per object ([`Object::json`](crate::contract::Object::json)) and copied.
pub(in super::super) fn request(r: &Request) -> guest::Request {
    let json = |objects: &[std::sync::Arc<crate::contract::Object>]| objects.iter().map(|o| o.json().to_owned()).collect();
    guest::Request {
        parent: r.parent.json().to_owned(),
        children: json(&r.children),
        related: json(&r.related),
        finalizing: r.finalizing,
        // `serde_json::to_string` is about twice as fast as `Value`'s `Display`.
        config: serde_json::to_string(&r.config).expect("a Value always serializes"),
    }
}

/// The guest's response, not yet validated.
pub(in super::super) fn response(r: guest::Response) -> RawResponse {
    RawResponse {
        children: r.children,
        delete: r
            .delete
            .into_iter()
            .map(|d| ObjectRef { api_version: d.api_version, kind: d.kind, namespace: d.namespace, name: d.name })
            .collect(),
        status: r.status,
        conditions: r
            .conditions
            .into_iter()
            .map(|c| Condition {
                type_: c.type_,
                status: match c.status {
                    guest::ConditionStatus::True => ConditionStatus::True,
                    guest::ConditionStatus::False => ConditionStatus::False,
                    guest::ConditionStatus::Unknown => ConditionStatus::Unknown,
                },
                reason: c.reason,
                message: c.message,
            })
            .collect(),
        events: r
            .events
            .into_iter()
            .map(|e| Event {
                type_: match e.type_ {
                    guest::EventType::Normal => EventType::Normal,
                    guest::EventType::Warning => EventType::Warning,
                },
                reason: e.reason,
                action: e.action,
                note: e.note,
            })
            .collect(),
        requeue_after_ms: r.requeue_after_ms,
        finalized: r.finalized,
    }
}
