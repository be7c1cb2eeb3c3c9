//! Reading Kubernetes objects from YAML or JSON files, as `kubectl apply -f` does, and turning
//! fixture files into the observed objects of an offline reconcile.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::actions::{Control, owner_reference};
use crate::contract::{Manifest, ObjectRef, Scope};
use crate::objects::{Hidden, MemoryCache, Visibility, namespace_of, visible_to};
use crate::policy::Grants;

/// Every object in a file: YAML documents separated by `---` (JSON is YAML too), with
/// `kind: List` / `*List` documents expanded into their items. Empty documents are skipped.
///
/// # Errors
/// The file cannot be read, a document does not parse, or a document is not an object with
/// `apiVersion`, `kind` and `metadata.name`.
pub fn read_objects(path: &Path) -> anyhow::Result<Vec<Value>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut objects = Vec::new();
    for (i, document) in crate::yaml::documents::<Value>(&text).into_iter().enumerate() {
        let value = document.map_err(|e| anyhow::anyhow!("{}: document {} is not valid YAML: {e}", path.display(), i + 1))?;
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

/// The objects an offline reconcile observes: the fixtures as the host's watch cache would hold
/// them, and one warning for every fixture the host would not show the plugin, saying why.
#[derive(Debug, Default)]
pub struct Observed {
    /// The objects kept (standing in for the watch cache: the plugin's children, related
    /// objects and lookups read them, and the ownership checks see them).
    pub cache: MemoryCache,
    /// `<file>: <object> ...: <why>`, one per fixture dropped or not given as a child.
    pub warnings: Vec<String>,
}

/// Fill [`Observed`] for `parent` (namespace and uid already set) from child and related fixture
/// files. Objects without a namespace get the parent's.
///
/// A child fixture without `ownerReferences` is one of the parent's children: it gets the
/// parent's controller reference. With `ownerReferences` (`[]` for an object nobody controls,
/// or another controller's uid) it stays an existing object that is not the parent's: the
/// plugin does not get it as a child, and applying it is refused as `run` would refuse it.
///
/// # Errors
/// A file that cannot be read or parsed.
pub fn observe(
    manifest: &Manifest,
    grants: &Grants,
    parent: &Value,
    children: &[PathBuf],
    related: &[PathBuf],
) -> anyhow::Result<Observed> {
    let parent_ns = match manifest.scope {
        Scope::Namespaced => namespace_of(parent).map(str::to_owned),
        Scope::Cluster => None,
    };
    let seen = visible_to(manifest, grants, parent);
    let uid = parent.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default();
    let mut observed = Observed::default();
    for (file, role) in children.iter().map(|f| (f, Role::Child)).chain(related.iter().map(|f| (f, Role::Related))) {
        for mut object in read_objects(file)? {
            if let Some(ns) = &parent_ns {
                default_namespace(&mut object, ns);
            }
            let r = ObjectRef::of_object(&object).expect("read_objects checks apiVersion, kind and metadata.name");
            let verdict = match role {
                Role::Child => child_verdict(&seen, grants, uid, &mut object, parent),
                Role::Related => related_verdict(&seen, &object),
            };
            let keep = match verdict {
                Verdict::Keep => true,
                Verdict::KeepWarn(why) => {
                    observed.warnings.push(format!("{}: {r} is kept but not a child of the parent: {why}", file.display()));
                    true
                }
                Verdict::Ignore(why) => {
                    observed.warnings.push(format!("{}: {r} is ignored: {why}", file.display()));
                    false
                }
            };
            if keep {
                observed.cache.insert(object).with_context(|| file.display().to_string())?;
            }
        }
    }
    Ok(observed)
}

#[derive(Debug, Clone, Copy)]
enum Role {
    Child,
    Related,
}

/// What the host does with one fixture.
enum Verdict {
    /// Observed, as given to the plugin.
    Keep,
    /// Observed, but not what the file's role says, for this reason.
    KeepWarn(String),
    /// Never observed, for this reason.
    Ignore(String),
}

/// A child fixture as the host would hold it: what the plugin may see ([`visible_to`]), given the
/// parent's controller reference when it names no owner, and what the ownership check says.
fn child_verdict(seen: &Visibility<'_>, grants: &Grants, uid: &str, object: &mut Value, parent: &Value) -> Verdict {
    let manifest = seen.manifest();
    if let Err(hidden) = seen.child(object) {
        let hint = match &hidden {
            Hidden::NotAChildKind { kind, .. } if manifest.related.iter().any(|r| &r.kind == kind) => " (pass it with --related)",
            _ => "",
        };
        return Verdict::Ignore(format!("{hidden}{hint}"));
    }
    if object.pointer("/metadata/ownerReferences").is_none() {
        object["metadata"]["ownerReferences"] = json!([owner_reference(manifest, parent, uid)]);
        return Verdict::Keep;
    }
    match Control::of(object, uid, &manifest.name) {
        Control::ThisParent => Verdict::Keep,
        control if control.may_apply(manifest, grants) => {
            Verdict::KeepWarn(format!("it is {control}, and the plugin may adopt it"))
        }
        control => Verdict::KeepWarn(format!("it is {control}; applying it would be refused (AlreadyOwned)")),
    }
}

/// A related fixture as the host would hold it: what the plugin may see ([`visible_to`]).
fn related_verdict(seen: &Visibility<'_>, object: &Value) -> Verdict {
    let manifest = seen.manifest();
    match seen.related(object) {
        Ok(()) => Verdict::Keep,
        Err(Hidden::NotARelatedKind { kind, plugin }) => Verdict::Ignore(if kind == manifest.parent {
            format!("{kind} is the parent's kind, and a plugin sees no other object of it")
        } else if manifest.may_write(&kind) {
            format!("{kind} is declared only as a child kind of plugin {plugin} (pass it with --children)")
        } else {
            format!("plugin {plugin} does not declare {kind}")
        }),
        Err(hidden) => Verdict::Ignore(hidden.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::Kind;
    use crate::objects::ObjectCache;
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

    #[test]
    fn a_child_fixture_without_owner_references_is_the_parents_child() {
        let manifest = crate::contract::manifest::fixtures::memcached("app=m");
        let parent = serde_json::json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
            "metadata": {"name": "p", "namespace": "ns", "uid": "u-p"}});
        let f = file(
            "{apiVersion: apps/v1, kind: Deployment, metadata: {name: mine}}\n---\n\
             {apiVersion: apps/v1, kind: Deployment, metadata: {name: users, ownerReferences: []}}\n",
        );
        let observed = observe(&manifest, &Grants::default(), &parent, &[f.path().to_owned()], &[]).unwrap();
        let deployments = Kind::new("apps", "v1", "Deployment");

        let mine = observed.cache.get(&deployments, Some("ns"), "mine").unwrap();
        assert_eq!(Control::of(mine.head(), "u-p", "memcached"), Control::ThisParent);
        assert_eq!(observed.cache.controlled_by(&deployments, Some("ns"), "u-p").len(), 1);
        assert!(observed.cache.get(&deployments, Some("ns"), "users").is_some(), "kept for the ownership check");
        assert_eq!(observed.warnings.len(), 1, "{:?}", observed.warnings);
        assert!(
            observed.warnings[0]
                .contains("apps/v1/Deployment ns/users is kept but not a child of the parent: it is controlled by nobody")
        );
    }
}
