//! Reading Kubernetes objects from YAML or JSON files, as `kubectl apply -f` does.

use std::path::Path;

use anyhow::{Context, bail};
use serde::Deserialize;
use serde_json::Value;

/// Every object in a file: YAML documents separated by `---` (JSON is YAML too), with
/// `kind: List` / `*List` documents expanded into their items. Empty documents are skipped.
///
/// # Errors
/// The file cannot be read, a document does not parse, or a document is not an object with
/// `apiVersion`, `kind` and `metadata.name`.
pub fn read_objects(path: &Path) -> anyhow::Result<Vec<Value>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut objects = Vec::new();
    for (i, document) in serde_yaml::Deserializer::from_str(&text).enumerate() {
        let value = Value::deserialize(document)
            .map_err(|e| anyhow::anyhow!("{}: document {} is not valid YAML: {e}", path.display(), i + 1))?;
        match value {
            Value::Null => {}
            Value::Object(ref map) if map.get("kind").and_then(Value::as_str).is_some_and(|k| k.ends_with("List")) => {
                let items = map.get("items").and_then(Value::as_array).cloned().unwrap_or_default();
                objects.extend(items);
            }
            other => objects.push(other),
        }
    }
    for (i, object) in objects.iter().enumerate() {
        let missing = ["/apiVersion", "/kind", "/metadata/name"]
            .into_iter()
            .find(|p| object.pointer(p).and_then(Value::as_str).is_none_or(str::is_empty));
        if let Some(field) = missing {
            bail!("{}: object {} has no {}", path.display(), i + 1, field.trim_start_matches('/').replace('/', "."));
        }
    }
    Ok(objects)
}

/// Exactly one object from a file.
///
/// # Errors
/// As [`read_objects`], or when the file holds zero or several objects.
pub fn read_one(path: &Path) -> anyhow::Result<Value> {
    let mut objects = read_objects(path)?;
    match objects.len() {
        1 => Ok(objects.remove(0)),
        0 => bail!("{}: no object in the file", path.display()),
        n => bail!("{}: expected one object, found {n}", path.display()),
    }
}

/// Set `metadata.namespace` when the object has none (as `kubectl apply` defaults it).
pub fn default_namespace(object: &mut Value, namespace: &str) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.entry("namespace").or_insert_with(|| Value::String(namespace.to_owned()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file(text: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(text.as_bytes()).unwrap();
        f
    }

    #[test]
    fn reads_multi_document_yaml_and_lists() {
        let f = file(
            "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\n---\n\
             apiVersion: v1\nkind: PodList\nitems:\n- {apiVersion: v1, kind: Pod, metadata: {name: b}}\n",
        );
        let objects = read_objects(f.path()).unwrap();
        assert_eq!(objects.len(), 2);
        assert_eq!(objects[1]["metadata"]["name"], "b");
    }

    #[test]
    fn malformed_yaml_names_the_file_and_document() {
        let f = file("apiVersion: v1\nkind: [unclosed\n");
        let err = read_objects(f.path()).unwrap_err().to_string();
        assert!(err.contains("document 1 is not valid YAML"), "{err}");
    }

    #[test]
    fn objects_need_identity() {
        let f = file("apiVersion: v1\nkind: Pod\n");
        assert!(read_objects(f.path()).unwrap_err().to_string().ends_with("object 1 has no metadata.name"));
    }

    #[test]
    fn read_one_refuses_several() {
        let f = file("{apiVersion: v1, kind: Pod, metadata: {name: a}}\n---\n{apiVersion: v1, kind: Pod, metadata: {name: b}}\n");
        assert!(read_one(f.path()).unwrap_err().to_string().contains("expected one object, found 2"));
    }
}
