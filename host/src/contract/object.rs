//! [`Object`]: an observed Kubernetes object as the host shares it between its cache, the
//! requests it gathers and the plugins it calls: the JSON value, never changed once shared,
//! and the JSON text plugins receive, serialized at most once.

use std::ops::Deref;
use std::sync::OnceLock;

use serde::{Serialize, Serializer};
use serde_json::Value;

/// An observed object: its JSON value and, computed the first time a plugin is given the
/// object, its JSON text.
///
/// The value cannot be changed through an `Object` (it derefs to `&Value` only), so the text
/// always matches it; a changed object is a new `Object` (the watch cache replaces the entry),
/// with a text of its own. The text is computed on first use, not when the object is cached:
/// objects no plugin is ever given cost no memory for it.
///
/// ```
/// use wasmop::contract::Object;
/// let object = Object::from(serde_json::json!({"kind": "Pod", "metadata": {"name": "p"}}));
/// assert_eq!(object["metadata"]["name"], "p");
/// assert_eq!(object.json(), r#"{"kind":"Pod","metadata":{"name":"p"}}"#);
/// ```
#[derive(Default)]
pub struct Object {
    value: Value,
    text: OnceLock<Box<str>>,
}

impl Object {
    /// An object holding `value`; its text is not computed yet.
    pub fn new(value: Value) -> Self {
        Self { value, text: OnceLock::new() }
    }

    /// The JSON value.
    pub fn value(&self) -> &Value {
        &self.value
    }

    /// The value as compact JSON text (what `serde_json::to_string` gives), serialized on the
    /// first call and kept for the object's lifetime.
    pub fn json(&self) -> &str {
        self.text.get_or_init(|| serde_json::to_string(&self.value).expect("a Value always serializes").into_boxed_str())
    }

    /// The value, the text dropped.
    pub fn into_value(self) -> Value {
        self.value
    }
}

impl Deref for Object {
    type Target = Value;

    fn deref(&self) -> &Value {
        &self.value
    }
}

impl From<Value> for Object {
    fn from(value: Value) -> Self {
        Self::new(value)
    }
}

impl PartialEq for Object {
    fn eq(&self, other: &Self) -> bool {
        self.value == other.value
    }
}

impl std::fmt::Debug for Object {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.value.fmt(f)
    }
}

/// As the value's `Display`: compact JSON, pretty with `{:#}`.
impl std::fmt::Display for Object {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.value, f)
    }
}

impl Serialize for Object {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.value.serialize(serializer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_is_the_compact_serialization_of_the_value() {
        let value = json!({"b": [1, 2.5, null], "a": {"s": "x\"y\n"}});
        let object = Object::new(value.clone());
        assert_eq!(object.json(), serde_json::to_string(&value).unwrap());
        assert_eq!(serde_json::from_str::<Value>(object.json()).unwrap(), value);
    }

    #[test]
    fn text_is_serialized_once_and_kept() {
        let object = Object::new(json!({"a": 1}));
        let first = object.json().as_ptr();
        assert_eq!(object.json().as_ptr(), first);
    }

    #[test]
    fn objects_compare_and_serialize_by_value() {
        let (a, b) = (Object::new(json!({"a": 1})), Object::new(json!({"a": 1})));
        let _ = a.json();
        assert_eq!(a, b);
        assert_eq!(serde_json::to_value(&a).unwrap(), json!({"a": 1}));
        assert_eq!(format!("{a:?}"), format!("{:?}", json!({"a": 1})));
        assert_eq!(format!("{a} {a:#}"), format!("{0} {0:#}", json!({"a": 1})));
    }
}
