//! [`Object`]: an observed Kubernetes object as the host shares it between its cache, the
//! requests it gathers and the plugins it calls: the compact JSON text plugins receive, and
//! beside it the fields the host itself reads, decoded.

use serde::{Serialize, Serializer};
use serde_json::{Map, Value};

/// An observed object, never changed once shared: its compact JSON text and its **head** —
/// `apiVersion`, `kind` and `metadata`, decoded.
///
/// The host decides from metadata (names, labels, owners, finalizers, deletion) and hands
/// plugins JSON text; only a few paths read the rest of an object (a parent's spec against
/// its previous version, a status to merge), and they parse the text
/// ([`Object::to_value`]). Keeping the text rather than a decoded [`Value`] tree is what
/// keeps the watch cache small: a cached Pod as a `Value` tree costs several times its text.
///
/// ```
/// use wasmop::contract::Object;
/// let object = Object::from(serde_json::json!({"kind": "Pod", "metadata": {"name": "p"}, "spec": {"a": 1}}));
/// assert_eq!(object.head()["metadata"]["name"], "p");
/// assert_eq!(object.head().get("spec"), None, "the head holds apiVersion, kind and metadata only");
/// assert_eq!(object.json(), r#"{"kind":"Pod","metadata":{"name":"p"},"spec":{"a":1}}"#);
/// assert_eq!(object.to_value()["spec"]["a"], 1);
/// ```
#[derive(Default)]
pub struct Object {
    /// `apiVersion`, `kind` and `metadata`, those present (`Null` when the object is not a
    /// JSON object).
    head: Value,
    /// The whole object as compact JSON (what `serde_json::to_string` gives).
    text: Box<str>,
}

/// The top-level fields an [`Object`]'s head keeps decoded.
const HEAD_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

impl Object {
    /// An object holding `value`: its text serialized, its head taken out of it.
    pub fn new(value: Value) -> Self {
        let text = serde_json::to_string(&value).expect("a Value always serializes").into_boxed_str();
        let head = match value {
            Value::Object(mut fields) => {
                let head: Map<String, Value> = HEAD_FIELDS.iter().filter_map(|f| fields.remove_entry(*f)).collect();
                Value::Object(head)
            }
            _ => Value::Null,
        };
        Self { head, text }
    }

    /// `apiVersion`, `kind` and `metadata` (those the object has), decoded: what the host reads
    /// to decide. Every other field is only in the text.
    pub fn head(&self) -> &Value {
        &self.head
    }

    /// The whole object as compact JSON text.
    pub fn json(&self) -> &str {
        &self.text
    }

    /// The whole object, decoded from its text (a parse on every call: for the few paths that
    /// read beyond the head).
    #[must_use]
    pub fn to_value(&self) -> Value {
        serde_json::from_str(&self.text).expect("an Object's text is the serialization of a Value")
    }

    /// The whole object, decoded from its text.
    #[must_use]
    pub fn into_value(self) -> Value {
        self.to_value()
    }
}

impl From<Value> for Object {
    fn from(value: Value) -> Self {
        Self::new(value)
    }
}

/// Objects are equal when their texts are: the same value serializes to the same text.
impl PartialEq for Object {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl std::fmt::Debug for Object {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// Compact JSON (the text), pretty with `{:#}`.
impl std::fmt::Display for Object {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if f.alternate() { write!(f, "{:#}", self.to_value()) } else { f.write_str(&self.text) }
    }
}

impl Serialize for Object {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_value().serialize(serializer)
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
        assert_eq!(object.to_value(), value);
    }

    #[test]
    fn the_head_is_api_version_kind_and_metadata() {
        let object = Object::new(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}},
            "spec": {"containers": []}, "status": {"phase": "Running"}}));
        assert_eq!(*object.head(), json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}}}));
        assert_eq!(object.to_value()["status"]["phase"], "Running");
        assert_eq!(*Object::new(json!([1])).head(), Value::Null);
        assert_eq!(*Object::new(json!({"spec": 1})).head(), json!({}));
    }

    #[test]
    fn objects_compare_and_serialize_by_value() {
        let (a, b) = (Object::new(json!({"a": 1})), Object::new(json!({"a": 1})));
        assert_eq!(a, b);
        assert_ne!(a, Object::new(json!({"a": 2})));
        assert_eq!(serde_json::to_value(&a).unwrap(), json!({"a": 1}));
        assert_eq!(format!("{a:?}"), r#"{"a":1}"#);
        assert_eq!(format!("{a} {a:#}"), format!("{0} {0:#}", json!({"a": 1})));
    }
}
