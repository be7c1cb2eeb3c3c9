//! Builders of the objects tests apply and reconcile, so a test says what differs instead of
//! restating a JSON literal: `memcached("a").size(3).generation(2).build()`,
//! `testbed("t").mode("lookup").build()`. Each starts in namespace `default` with only what its
//! kind needs; every setter overwrites.
//!
//! ```
//! use wasmop_e2e::objects::{memcached, testbed};
//! let m = memcached("a").size(3).generation(2).build();
//! assert_eq!(m["spec"]["size"], 3);
//! assert_eq!(m["metadata"]["generation"], 2);
//! let t = testbed("t").mode("ok").namespace("team-a").build();
//! assert_eq!((t["spec"]["mode"].as_str(), t["metadata"]["namespace"].as_str()), (Some("ok"), Some("team-a")));
//! ```

use serde_json::{Value, json};

/// An object under construction; [`build`](Self::build) hands it out.
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub struct ObjectBuilder(Value);

/// A `Memcached` (`cache.example.com/v1alpha1`, the memcached example's parent) named `name`,
/// with an empty spec.
pub fn memcached(name: &str) -> ObjectBuilder {
    object("cache.example.com/v1alpha1", "Memcached", name).spec(json!({}))
}

/// A `Testbed` (`test.wasmop.dev/v1`, the test plugin's parent) named `name`, without a spec;
/// [`mode`](ObjectBuilder::mode) picks what the plugin does (`plugins/testbed/src/mode.rs`).
pub fn testbed(name: &str) -> ObjectBuilder {
    object("test.wasmop.dev/v1", "Testbed", name)
}

/// Any object of `api_version` and `kind` named `name`.
pub fn object(api_version: &str, kind: &str, name: &str) -> ObjectBuilder {
    ObjectBuilder(json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name, "namespace": "default"}}))
}

impl ObjectBuilder {
    /// `metadata.namespace`.
    pub fn namespace(mut self, namespace: &str) -> Self {
        self.0["metadata"]["namespace"] = namespace.into();
        self
    }

    /// Without `metadata.namespace` (a cluster-scoped object).
    pub fn cluster_scoped(mut self) -> Self {
        if let Some(metadata) = self.0["metadata"].as_object_mut() {
            metadata.remove("namespace");
        }
        self
    }

    /// `metadata.uid`.
    pub fn uid(mut self, uid: &str) -> Self {
        self.0["metadata"]["uid"] = uid.into();
        self
    }

    /// `metadata.generation`.
    pub fn generation(mut self, generation: i64) -> Self {
        self.0["metadata"]["generation"] = generation.into();
        self
    }

    /// One label.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.0["metadata"]["labels"][key] = value.into();
        self
    }

    /// The whole `spec`.
    pub fn spec(mut self, spec: Value) -> Self {
        self.0["spec"] = spec;
        self
    }

    /// Each field of `fields` (an object) set in `spec`, over what is there.
    pub fn spec_fields(mut self, fields: Value) -> Self {
        if let Value::Object(fields) = fields {
            for (key, value) in fields {
                self.0["spec"][key] = value;
            }
        }
        self
    }

    /// `spec.size` (a `Memcached`'s replicas).
    pub fn size(self, size: i64) -> Self {
        self.spec_fields(json!({"size": size}))
    }

    /// `spec.mode` (what a `Testbed` makes the plugin do).
    pub fn mode(self, mode: &str) -> Self {
        self.spec_fields(json!({"mode": mode}))
    }

    /// The object.
    pub fn build(self) -> Value {
        self.0
    }
}

impl From<ObjectBuilder> for Value {
    fn from(builder: ObjectBuilder) -> Value {
        builder.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builders_make_the_objects_their_literals_spell_out() {
        assert_eq!(
            memcached("a").size(3).generation(2).uid("u").build(),
            json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
                "metadata": {"name": "a", "namespace": "default", "uid": "u", "generation": 2}, "spec": {"size": 3}})
        );
        assert_eq!(
            testbed("t").mode("lookup").spec_fields(json!({"name": "s"})).label("app", "x").namespace("ns").build(),
            json!({"apiVersion": "test.wasmop.dev/v1", "kind": "Testbed",
                "metadata": {"name": "t", "namespace": "ns", "labels": {"app": "x"}}, "spec": {"mode": "lookup", "name": "s"}})
        );
        assert_eq!(
            object("v1", "Namespace", "n").cluster_scoped().build(),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}})
        );
    }
}
