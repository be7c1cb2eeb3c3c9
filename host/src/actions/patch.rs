//! Writes whose answer is read for the new `resourceVersion` only, or as the watches read objects.
//!
//! The API server answers a PATCH with the whole object as stored. The host rarely uses that
//! copy (its watches deliver the object), so decoding it — a Deployment is a few kilobytes of
//! JSON, its `managedFields` included — into a [`DynamicObject`] only to drop it is wasted
//! work on every write: measured during convergence it was about a tenth of the controller's
//! CPU. [`patch`] sends the same request as [`Api::patch`] and skips over the answer, keeping
//! only `metadata.resourceVersion`. [`patch_answered`] keeps the object, decoded as a watch
//! event is ([`WatchedObject`]), for the one write whose answer the plugin is shown: the
//! creation of a child it has not seen yet.

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::objects::WatchedObject;

/// The one field of an answer the host reads; serde skips every other field without building it.
#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    metadata: AnswerMetadata,
}

#[derive(Deserialize, Default)]
struct AnswerMetadata {
    #[serde(default, rename = "resourceVersion")]
    resource_version: Option<String>,
}

/// The part of the object a patch goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The object itself (`PATCH .../name`).
    Object,
    /// Its status subresource (`PATCH .../name/status`).
    Status,
}

/// Patch `name` through `api` like [`Api::patch`] (or [`Api::patch_status`] for
/// [`Target::Status`]); the object's new `resourceVersion`.
///
/// # Errors
/// As [`Api::patch`]: the API server's refusal ([`kube::Error::Api`]), a failed request, or
/// an answer that is not a JSON object.
pub async fn patch<P: serde::Serialize + std::fmt::Debug>(
    api: &Api<DynamicObject>,
    target: Target,
    name: &str,
    params: &PatchParams,
    patch: &Patch<P>,
) -> kube::Result<Option<String>> {
    let answer: Answer = send(api, target, name, params, patch).await?;
    Ok(answer.metadata.resource_version)
}

/// [`patch`], the object as the API server stored it returned: its fields as a watch event
/// delivers them to the cache ([`WatchedObject`]: no `managedFields`, no last-applied
/// annotation).
///
/// # Errors
/// As [`patch`].
pub async fn patch_answered<P: serde::Serialize + std::fmt::Debug>(
    api: &Api<DynamicObject>,
    target: Target,
    name: &str,
    params: &PatchParams,
    patch: &Patch<P>,
) -> kube::Result<Value> {
    let answer: WatchedObject = send(api, target, name, params, patch).await?;
    Ok(Value::Object(answer.into_fields()))
}

/// The PATCH request of [`patch`], its answer decoded as `T`.
async fn send<T: DeserializeOwned, P: serde::Serialize + std::fmt::Debug>(
    api: &Api<DynamicObject>,
    target: Target,
    name: &str,
    params: &PatchParams,
    patch: &Patch<P>,
) -> kube::Result<T> {
    let request = kube::core::Request::new(api.resource_url());
    let built = match target {
        Target::Object => request.patch(name, params, patch),
        Target::Status => request.patch_subresource("status", name, params, patch),
    };
    let mut req = built.map_err(kube::Error::BuildRequest)?;
    req.extensions_mut().insert(match target {
        Target::Object => "patch",
        Target::Status => "patch_status",
    });
    api.clone().into_client().request(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_resource_version_is_read_from_an_answer() {
        let text = r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","resourceVersion":"42",
            "managedFields":[{"manager":"m","fieldsV1":{"f:spec":{}}}]},"spec":{"replicas":1},"status":{}}"#;
        let answer: Answer = serde_json::from_str(text).unwrap();
        assert_eq!(answer.metadata.resource_version.as_deref(), Some("42"));
    }

    #[test]
    fn an_answer_without_metadata_has_no_version() {
        let answer: Answer = serde_json::from_str(r#"{"kind":"Status","status":"Success"}"#).unwrap();
        assert_eq!(answer.metadata.resource_version, None);
    }

    #[test]
    fn an_answer_that_is_not_an_object_is_an_error() {
        assert!(serde_json::from_str::<Answer>("[1, 2]").is_err());
    }
}
