//! `kubectl apply`-like helpers: server-side apply of objects and YAML files, used by
//! `wasmop dev` and by the end-to-end tests.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::discovery::pinned_kind;
use serde_json::Value;

use super::object_files::read_objects;

/// The API of a kind (resolved by discovery), in `namespace` when given.
///
/// # Errors
/// When the kind is not served.
pub async fn api_for(
    client: &kube::Client,
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
) -> anyhow::Result<Api<DynamicObject>> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let (resource, _) = pinned_kind(client, &GroupVersionKind::gvk(group, version, kind))
        .await
        .with_context(|| format!("the API server does not serve {api_version}/{kind}"))?;
    Ok(match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    })
}

/// Server-side apply one object as `field_manager`.
///
/// # Errors
/// A missing identity field or the API error.
pub async fn apply(client: &kube::Client, object: &Value, field_manager: &str) -> anyhow::Result<DynamicObject> {
    let api_version = object["apiVersion"].as_str().context("object has no apiVersion")?;
    let kind = object["kind"].as_str().context("object has no kind")?;
    let name = object.pointer("/metadata/name").and_then(Value::as_str).context("object has no metadata.name")?;
    let ns = object.pointer("/metadata/namespace").and_then(Value::as_str);
    let api = api_for(client, api_version, kind, ns).await?;
    Ok(api.patch(name, &PatchParams::apply(field_manager).force(), &Patch::Apply(object)).await?)
}

/// Apply every object of a YAML file; a CRD is waited for until the server serves its kind.
///
/// # Errors
/// Parse or API errors, or a CRD not served within 30 s.
pub async fn apply_file(client: &kube::Client, path: &Path, field_manager: &str) -> anyhow::Result<Vec<DynamicObject>> {
    let mut applied = Vec::new();
    for object in read_objects(path)? {
        applied.push(apply(client, &object, field_manager).await.with_context(|| format!("applying {}", path.display()))?);
        if object["kind"] == "CustomResourceDefinition" {
            let field = |p: &str| object.pointer(p).and_then(Value::as_str).unwrap_or_default().to_owned();
            let gvk = GroupVersionKind::gvk(&field("/spec/group"), &field("/spec/versions/0/name"), &field("/spec/names/kind"));
            let started = tokio::time::Instant::now();
            while pinned_kind(client, &gvk).await.is_err() {
                if started.elapsed() > Duration::from_secs(30) {
                    bail!("CRD {} was not served within 30 s", field("/metadata/name"));
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    Ok(applied)
}
