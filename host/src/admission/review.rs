//! `AdmissionReview` (`admission.k8s.io/v1`) in and out: the request the API server posts, and
//! the review the host answers with.
//!
//! Only `admission.k8s.io/v1` is accepted: the host registers its webhooks with
//! `admissionReviewVersions: [v1]`, so anything else is not the API server talking to it.

use base64::Engine as _;
use serde_json::{Value, json};
use wasmop_types::AdmissionRequest;

/// The largest review body read, in bytes: 8 MiB. The API server accepts request bodies of at
/// most 3 MiB, and an UPDATE review carries two objects (`object` and `oldObject`) of up to that
/// size plus the envelope; no review the API server sends is larger. A larger body is refused
/// before it is read whole.
pub const MAX_REVIEW_BYTES: usize = 8 * 1024 * 1024;

/// The one `apiVersion` of an `AdmissionReview` the host reads and writes.
pub const REVIEW_API_VERSION: &str = "admission.k8s.io/v1";

/// Why a body is not a review the host can answer.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum ReviewError {
    /// The body is larger than [`MAX_REVIEW_BYTES`].
    #[error("admission review too large: {size} bytes, at most {MAX_REVIEW_BYTES} accepted")]
    TooLarge {
        /// The size sent (or announced in `Content-Length`).
        size: usize,
    },
    /// The body is not JSON.
    #[error("admission review is not JSON: {0}")]
    NotJson(String),
    /// The body is JSON but not an `AdmissionReview` of the accepted version.
    #[error("not an {REVIEW_API_VERSION} AdmissionReview: apiVersion {api_version:?}, kind {kind:?}")]
    WrongType {
        /// The `apiVersion` sent.
        api_version: String,
        /// The `kind` sent.
        kind: String,
    },
    /// The review has no `request`, or its request lacks a required field.
    #[error("malformed AdmissionReview request: {0}")]
    Malformed(String),
}

/// Read the request of an `AdmissionReview` body.
///
/// # Errors
/// [`ReviewError`]: too large, not JSON, not an `admission.k8s.io/v1` `AdmissionReview`, or a
/// request that does not read as [`AdmissionRequest`] (a missing uid, kind, operation...).
pub fn parse(body: &[u8]) -> Result<AdmissionRequest, ReviewError> {
    if body.len() > MAX_REVIEW_BYTES {
        return Err(ReviewError::TooLarge { size: body.len() });
    }
    let mut review: Value = serde_json::from_slice(body).map_err(|e| ReviewError::NotJson(e.to_string()))?;
    let field = |name: &str| review.get(name).and_then(Value::as_str).unwrap_or_default().to_owned();
    let (api_version, kind) = (field("apiVersion"), field("kind"));
    if api_version != REVIEW_API_VERSION || kind != "AdmissionReview" {
        return Err(ReviewError::WrongType { api_version, kind });
    }
    let request = review.get_mut("request").map(Value::take).filter(|r| !r.is_null());
    let request = request.ok_or_else(|| ReviewError::Malformed("no request".into()))?;
    serde_json::from_value(request).map_err(|e| ReviewError::Malformed(e.to_string()))
}

/// What the host answers to one request: allowed or not, why, and the patch of a mutation.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The request's uid, copied back.
    pub uid: String,
    /// Whether the request passes.
    pub allowed: bool,
    /// HTTP-style code and message (a denial always has one).
    pub status: Option<(u16, String)>,
    /// Warnings shown to the client.
    pub warnings: Vec<String>,
    /// For an allowed mutation: the JSON Patch from the request's object to the mutated one.
    pub patch: Option<json_patch::Patch>,
}

impl Answer {
    /// Denied with `code` and `message` (a fail-closed answer of the host, or the plugin's).
    pub fn deny(uid: &str, code: u16, message: impl Into<String>) -> Self {
        Self { uid: uid.to_owned(), allowed: false, status: Some((code, message.into())), warnings: Vec::new(), patch: None }
    }

    /// The `AdmissionReview` carrying this answer, as JSON.
    pub fn to_review(&self) -> Value {
        let mut response = json!({"uid": self.uid, "allowed": self.allowed});
        if let Some((code, message)) = &self.status {
            response["status"] = json!({"code": code, "message": message});
        }
        if !self.warnings.is_empty() {
            response["warnings"] = json!(self.warnings);
        }
        if let Some(patch) = &self.patch {
            let bytes = serde_json::to_vec(patch).expect("a JSON Patch serializes");
            response["patchType"] = json!("JSONPatch");
            response["patch"] = json!(base64::engine::general_purpose::STANDARD.encode(bytes));
        }
        json!({"apiVersion": REVIEW_API_VERSION, "kind": "AdmissionReview", "response": response})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmop_types::Operation;

    fn review(request: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})).unwrap()
    }

    fn pod_create() -> Value {
        json!({
            "uid": "u-1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "operation": "CREATE", "namespace": "default", "name": "web",
            "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"}},
        })
    }

    #[test]
    fn a_v1_review_reads_into_the_request() {
        let request = parse(&review(pod_create())).unwrap();
        assert_eq!((request.uid.as_str(), request.operation), ("u-1", Operation::Create));
        assert_eq!(request.object.unwrap()["metadata"]["name"], "web");
    }

    #[test]
    fn bad_bodies_get_one_error_naming_what_is_wrong() {
        assert!(matches!(parse(b"{not json"), Err(ReviewError::NotJson(_))));
        let v1beta1 = json!({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": pod_create()});
        let err = parse(&serde_json::to_vec(&v1beta1).unwrap()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "not an admission.k8s.io/v1 AdmissionReview: apiVersion \"admission.k8s.io/v1beta1\", kind \"AdmissionReview\""
        );
        let no_request = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"});
        assert_eq!(
            parse(&serde_json::to_vec(&no_request).unwrap()).unwrap_err().to_string(),
            "malformed AdmissionReview request: no request"
        );
        let mut no_operation = pod_create();
        no_operation.as_object_mut().unwrap().remove("operation");
        let err = parse(&review(no_operation)).unwrap_err().to_string();
        assert!(err.starts_with("malformed AdmissionReview request: missing field `operation`"), "{err}");
    }

    #[test]
    fn a_body_over_the_bound_is_refused_unread() {
        let big = vec![b' '; MAX_REVIEW_BYTES + 1];
        assert_eq!(parse(&big), Err(ReviewError::TooLarge { size: MAX_REVIEW_BYTES + 1 }));
    }

    #[test]
    fn a_denial_carries_code_and_message_and_a_mutation_a_base64_json_patch() {
        let denied = Answer::deny("u-1", 403, "no sidecars here").to_review();
        assert_eq!(
            denied,
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "response": {"uid": "u-1", "allowed": false, "status": {"code": 403, "message": "no sidecars here"}}})
        );
        let patch: json_patch::Patch =
            serde_json::from_value(json!([{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}])).unwrap();
        let answer =
            Answer { uid: "u-2".into(), allowed: true, status: None, warnings: vec!["careful".into()], patch: Some(patch) };
        let review = answer.to_review();
        assert_eq!(review["response"]["patchType"], "JSONPatch");
        assert_eq!(review["response"]["warnings"], json!(["careful"]));
        let decoded = base64::engine::general_purpose::STANDARD.decode(review["response"]["patch"].as_str().unwrap()).unwrap();
        assert_eq!(
            serde_json::from_slice::<Value>(&decoded).unwrap(),
            json!([{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}])
        );
    }
}
