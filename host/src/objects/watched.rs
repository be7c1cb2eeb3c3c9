//! [`WatchedObject`]: an object of any kind as a list or watch delivers it, decoded in one
//! pass into the fields the cache's [`Object`](crate::contract::Object) is made of.
//!
//! kube's [`DynamicObject`](kube::api::DynamicObject) decodes `metadata` into a typed
//! [`ObjectMeta`] (its `managedFields` included, only to be [`strip`](super::strip)ped) and
//! buffers every other field before decoding it again into its flattened `data`; the cache
//! then serializes the typed metadata back into JSON. Every watch event paid for all three.
//! A `WatchedObject` reads each field once into [`Value`]s, skips `managedFields` and the
//! [`LAST_APPLIED_ANNOTATION`] without building them, and keeps only the identity in typed
//! metadata (what the watcher and [`Resource`] need).

use std::borrow::Cow;
use std::fmt;

use kube::api::ObjectMeta;
use kube::core::{ApiResource, DynamicResourceScope, Resource};
use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::{Map, Value};

use super::LAST_APPLIED_ANNOTATION;

/// An object of a kind known at run time, as the cache keeps it: its JSON fields, with
/// `metadata` stripped of `managedFields` and the [`LAST_APPLIED_ANNOTATION`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WatchedObject {
    /// The identity (`name`, `namespace`, `uid`, `resourceVersion`); nothing else is set.
    identity: ObjectMeta,
    /// Every field of the object as received, `metadata` stripped.
    fields: Map<String, Value>,
}

impl WatchedObject {
    /// The object's fields (`apiVersion`, `kind`, `metadata`, `spec`, ...).
    #[must_use]
    pub fn into_fields(self) -> Map<String, Value> {
        self.fields
    }
}

impl Resource for WatchedObject {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }

    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }

    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }

    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.identity
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.identity
    }
}

impl<'de> Deserialize<'de> for WatchedObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(ObjectVisitor)
    }
}

struct ObjectVisitor;

impl<'de> Visitor<'de> for ObjectVisitor {
    type Value = WatchedObject;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Kubernetes object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<WatchedObject, A::Error> {
        let mut fields = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value =
                if key == "metadata" { Value::Object(map.next_value::<StrippedMetadata>()?.0) } else { map.next_value()? };
            fields.insert(key, value);
        }
        let identity = identity_of(fields.get("metadata"));
        Ok(WatchedObject { identity, fields })
    }
}

fn identity_of(metadata: Option<&Value>) -> ObjectMeta {
    let field = |name: &str| metadata.and_then(|m| m.get(name)).and_then(Value::as_str).map(str::to_owned);
    ObjectMeta {
        name: field("name"),
        namespace: field("namespace"),
        uid: field("uid"),
        resource_version: field("resourceVersion"),
        ..ObjectMeta::default()
    }
}

/// An object's `metadata` without `managedFields` and the [`LAST_APPLIED_ANNOTATION`] (and
/// without `annotations` when nothing else is left in it).
struct StrippedMetadata(Map<String, Value>);

impl<'de> Deserialize<'de> for StrippedMetadata {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(MetadataVisitor)
    }
}

struct MetadataVisitor;

impl<'de> Visitor<'de> for MetadataVisitor {
    type Value = StrippedMetadata;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object's metadata")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StrippedMetadata, A::Error> {
        let mut fields = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "managedFields" => {
                    map.next_value::<IgnoredAny>()?;
                }
                "annotations" => {
                    let mut annotations: Option<Map<String, Value>> = map.next_value()?;
                    if let Some(a) = annotations.as_mut() {
                        a.remove(LAST_APPLIED_ANNOTATION);
                    }
                    if let Some(a) = annotations.filter(|a| !a.is_empty()) {
                        fields.insert(key, Value::Object(a));
                    }
                }
                _ => {
                    fields.insert(key, map.next_value()?);
                }
            }
        }
        Ok(StrippedMetadata(fields))
    }
}

#[cfg(test)]
mod tests {
    use kube::api::DynamicObject;
    use serde_json::json;

    use super::*;

    fn deployment() -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "a", "uid": "u1", "resourceVersion": "7", "generation": 2,
                "labels": {"app": "web"},
                "annotations": {LAST_APPLIED_ANNOTATION: "{\"big\": true}", "note": "kept"},
                "managedFields": [{"manager": "m", "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}],
                "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "x", "uid": "p", "controller": true}]},
            "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}},
            "status": {"readyReplicas": 1}})
    }

    #[test]
    fn everything_but_managed_fields_and_the_last_applied_copy_is_kept() {
        let object: WatchedObject = serde_json::from_str(&deployment().to_string()).unwrap();
        let mut expected = deployment();
        let meta = expected["metadata"].as_object_mut().unwrap();
        meta.remove("managedFields");
        meta["annotations"].as_object_mut().unwrap().remove(LAST_APPLIED_ANNOTATION);
        assert_eq!(Value::Object(object.into_fields()), expected);
    }

    #[test]
    fn the_same_object_as_a_dynamic_object_stripped() {
        let text = deployment().to_string();
        let mut dynamic: DynamicObject = serde_json::from_str(&text).unwrap();
        super::super::strip(&mut dynamic.metadata);
        let watched: WatchedObject = serde_json::from_str(&text).unwrap();
        assert_eq!(serde_json::to_value(&dynamic).unwrap(), Value::Object(watched.into_fields()));
    }

    #[test]
    fn the_identity_is_typed_metadata_for_the_watcher() {
        let object: WatchedObject = serde_json::from_str(&deployment().to_string()).unwrap();
        let meta = object.meta();
        assert_eq!((meta.name.as_deref(), meta.namespace.as_deref()), (Some("d"), Some("a")));
        assert_eq!((meta.uid.as_deref(), meta.resource_version.as_deref()), (Some("u1"), Some("7")));
        assert_eq!(meta.managed_fields, None);
    }

    #[test]
    fn annotations_left_empty_are_dropped() {
        let text = r#"{"metadata": {"name": "n", "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}}}"#;
        let object: WatchedObject = serde_json::from_str(text).unwrap();
        assert_eq!(Value::Object(object.into_fields()), json!({"metadata": {"name": "n"}}));
    }

    #[test]
    fn a_watch_event_decodes_into_it() {
        let text = format!(r#"{{"type": "MODIFIED", "object": {}}}"#, deployment());
        let event: kube::core::WatchEvent<WatchedObject> = serde_json::from_str(&text).unwrap();
        let kube::core::WatchEvent::Modified(object) = event else { panic!("{event:?}") };
        assert_eq!(object.meta().name.as_deref(), Some("d"));
    }

    #[test]
    fn metadata_that_is_not_an_object_is_an_error() {
        assert!(serde_json::from_str::<WatchedObject>(r#"{"metadata": [1]}"#).is_err());
        assert!(serde_json::from_str::<WatchedObject>("[1]").is_err());
    }
}
