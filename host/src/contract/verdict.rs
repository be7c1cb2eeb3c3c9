//! What an admission call answers, as it crossed the boundary ([`RawVerdict`]), and the checks
//! that turn it into a [`Verdict`] the host may send to the API server.

use serde_json::Value;

use super::parsed_size::{PARSED_SIZE_FACTOR, parsed_size};
use super::response::OutputLimits;
use wasmop_types::{AdmissionRequest, Verdict, WebhookType};

/// Most warnings kept from one verdict; the rest are dropped.
pub const MAX_WARNINGS: usize = 16;
/// Longest warning kept, in bytes (one line; cut beyond).
pub const MAX_WARNING: usize = 256;
/// Longest denial message kept, in bytes (one line; cut beyond).
pub const MAX_DENIAL_MESSAGE: usize = 1024;
/// Largest mutated object, in bytes of JSON: the API server's own limit on a request body.
pub const MAX_MUTATED_OBJECT: usize = 3 << 20;

/// A verdict as the plugin returned it: the mutated object still JSON text.
#[derive(Debug, Clone, PartialEq)]
pub enum RawVerdict {
    /// Let the request through.
    Allowed {
        /// Warnings for the client.
        warnings: Vec<String>,
        /// The object as it should be stored, JSON; `None`: unchanged.
        mutated: Option<String>,
    },
    /// Refuse the request.
    Denied {
        /// HTTP-style status code.
        code: u16,
        /// Why.
        message: String,
        /// Warnings for the client.
        warnings: Vec<String>,
    },
}

/// Why a verdict is refused. The request is then denied with this reason (fail closed).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum VerdictError {
    /// A denial's code is not an HTTP error status (400 to 599).
    #[error("denial code {0} is not between 400 and 599")]
    InvalidCode(u16),
    /// A denial without a message: the user would not know why.
    #[error("denial has an empty message")]
    EmptyMessage,
    /// A validating webhook answered a mutated object.
    #[error("a validating webhook answered a mutated object")]
    MutationFromValidating,
    /// A mutated object for a request without an object (a DELETE or CONNECT).
    #[error("a mutated object for a {0} request, which has no object to mutate")]
    NothingToMutate(String),
    /// The mutated object is larger than [`MAX_MUTATED_OBJECT`] or the plugin's output limit.
    #[error("mutated object has {bytes} bytes, more than the limit of {limit}")]
    TooLarge {
        /// Bytes returned.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// The mutated object's JSON would parse into more than [`PARSED_SIZE_FACTOR`] times its
    /// size limit (estimated on its bytes, before parsing: [`parsed_size`]).
    #[error(
        "mutated object would take about {estimate} bytes once parsed, more than {PARSED_SIZE_FACTOR} times its limit of {limit} \
         (its JSON is dense: many small values)"
    )]
    TooDense {
        /// The estimate.
        estimate: usize,
        /// The size limit of a mutated object.
        limit: usize,
    },
    /// The mutated object is not JSON.
    #[error("mutated object is not valid JSON: {0}")]
    InvalidJson(String),
    /// The mutated object is JSON but not an object.
    #[error("mutated object is not a JSON object")]
    NotAnObject,
    /// The mutated object changes `apiVersion`, `kind`, `metadata.name` or
    /// `metadata.namespace` of the admitted object.
    #[error("mutated object changes {field} from {from} to {to}")]
    ChangedIdentity {
        /// The field.
        field: &'static str,
        /// Its value in the request's object (JSON, `null` when absent).
        from: String,
        /// Its value in the mutated object.
        to: String,
    },
}

impl RawVerdict {
    /// Bytes of every string in the verdict (the mutated object's JSON most of all), saturating.
    pub fn bytes(&self) -> usize {
        let (warnings, text) = match self {
            RawVerdict::Allowed { warnings, mutated } => (warnings, mutated.as_ref().map_or(0, String::len)),
            RawVerdict::Denied { message, warnings, .. } => (warnings, message.len()),
        };
        warnings.iter().map(String::len).fold(text, usize::saturating_add)
    }

    /// The most the host holds of this verdict while it checks it: its text plus the parsed
    /// form of its mutated object as [`parsed_size`] estimates it; only its text when the
    /// estimate is over what [`RawVerdict::validate`] parses (such an object is refused before
    /// parsing). What the response budget reserves for it.
    pub fn held_bytes(&self) -> usize {
        let parsed = match self {
            RawVerdict::Allowed { mutated: Some(text), .. } => {
                let estimate = parsed_size(text);
                if estimate > MAX_MUTATED_OBJECT.saturating_mul(PARSED_SIZE_FACTOR) { 0 } else { estimate }
            }
            _ => 0,
        };
        self.bytes().saturating_add(parsed)
    }

    /// Check the verdict against the request it answers and the webhook that asked: a denial
    /// has a code 400–599 and a message; only a mutating webhook mutates, only an object that
    /// exists, within [`MAX_MUTATED_OBJECT`] and `limits.max_bytes`, into a JSON object with
    /// the same `apiVersion`, `kind`, name and namespace. A mutated object equal to the
    /// request's is no mutation.
    ///
    /// # Errors
    /// The first [`VerdictError`] found.
    pub fn validate(
        self,
        request: &AdmissionRequest,
        webhook: WebhookType,
        limits: &OutputLimits,
    ) -> Result<Verdict, VerdictError> {
        match self {
            RawVerdict::Denied { code, message, warnings } => {
                if !(400..=599).contains(&code) {
                    return Err(VerdictError::InvalidCode(code));
                }
                if message.trim().is_empty() {
                    return Err(VerdictError::EmptyMessage);
                }
                Ok(Verdict::Denied { code, message, warnings })
            }
            RawVerdict::Allowed { warnings, mutated: None } => Ok(Verdict::Allowed { warnings, mutated: None }),
            RawVerdict::Allowed { warnings, mutated: Some(text) } => {
                if webhook == WebhookType::Validating {
                    return Err(VerdictError::MutationFromValidating);
                }
                let Some(original) = &request.object else {
                    let operation = serde_json::to_value(request.operation).ok().and_then(|v| v.as_str().map(str::to_owned));
                    return Err(VerdictError::NothingToMutate(operation.unwrap_or_default()));
                };
                let limit = MAX_MUTATED_OBJECT.min(limits.max_bytes);
                if text.len() > limit {
                    return Err(VerdictError::TooLarge { bytes: text.len(), limit });
                }
                let estimate = parsed_size(&text);
                if estimate > limit.saturating_mul(PARSED_SIZE_FACTOR) {
                    return Err(VerdictError::TooDense { estimate, limit });
                }
                let mutated: Value = serde_json::from_str(&text).map_err(|e| VerdictError::InvalidJson(e.to_string()))?;
                if !mutated.is_object() {
                    return Err(VerdictError::NotAnObject);
                }
                for (field, pointer) in IDENTITY {
                    let (from, to) = (original.pointer(pointer), mutated.pointer(pointer));
                    if from != to {
                        let show = |v: Option<&Value>| v.map_or_else(|| "null".to_owned(), Value::to_string);
                        return Err(VerdictError::ChangedIdentity { field, from: show(from), to: show(to) });
                    }
                }
                let mutated = (&mutated != original).then_some(mutated);
                Ok(Verdict::Allowed { warnings, mutated })
            }
        }
    }
}

/// The fields a mutation must keep, and where they are.
const IDENTITY: [(&str, &str); 4] = [
    ("apiVersion", "/apiVersion"),
    ("kind", "/kind"),
    ("metadata.name", "/metadata/name"),
    ("metadata.namespace", "/metadata/namespace"),
];

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use wasmop_types::{GroupVersionResource, Kind, Operation, UserInfo};

    fn request(operation: Operation, object: Option<Value>) -> AdmissionRequest {
        AdmissionRequest {
            uid: "u".into(),
            kind: Kind::new("", "v1", "Pod"),
            resource: GroupVersionResource { group: String::new(), version: "v1".into(), resource: "pods".into() },
            sub_resource: None,
            operation,
            namespace: Some("default".into()),
            name: Some("web".into()),
            object,
            old_object: None,
            user_info: UserInfo::default(),
            dry_run: false,
        }
    }

    fn pod() -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"}, "spec": {}})
    }

    fn mutate(object: &Value, webhook: WebhookType) -> Result<Verdict, VerdictError> {
        RawVerdict::Allowed { warnings: vec![], mutated: Some(object.to_string()) }.validate(
            &request(Operation::Create, Some(pod())),
            webhook,
            &OutputLimits::default(),
        )
    }

    #[test]
    fn a_mutation_keeping_the_identity_passes() {
        let mut labelled = pod();
        labelled["metadata"]["labels"] = json!({"injected": "yes"});
        let verdict = mutate(&labelled, WebhookType::Mutating).unwrap();
        assert_eq!(verdict, Verdict::Allowed { warnings: vec![], mutated: Some(labelled) });
        assert_eq!(mutate(&pod(), WebhookType::Mutating).unwrap(), Verdict::allow());
    }

    #[test]
    fn a_mutation_renaming_or_moving_the_object_is_refused_naming_the_field() {
        let mut renamed = pod();
        renamed["metadata"]["name"] = json!("other");
        assert_eq!(
            mutate(&renamed, WebhookType::Mutating).unwrap_err().to_string(),
            r#"mutated object changes metadata.name from "web" to "other""#
        );
        let mut moved = pod();
        moved["metadata"].as_object_mut().unwrap().remove("namespace");
        assert!(matches!(
            mutate(&moved, WebhookType::Mutating),
            Err(VerdictError::ChangedIdentity { field: "metadata.namespace", .. })
        ));
        let mut rekinded = pod();
        rekinded["kind"] = json!("Secret");
        assert!(matches!(mutate(&rekinded, WebhookType::Mutating), Err(VerdictError::ChangedIdentity { field: "kind", .. })));
    }

    #[test]
    fn only_a_mutating_webhook_mutates_and_only_an_existing_object() {
        assert_eq!(mutate(&pod(), WebhookType::Validating), Err(VerdictError::MutationFromValidating));
        let delete = RawVerdict::Allowed { warnings: vec![], mutated: Some(pod().to_string()) }.validate(
            &request(Operation::Delete, None),
            WebhookType::Mutating,
            &OutputLimits::default(),
        );
        assert_eq!(delete, Err(VerdictError::NothingToMutate("DELETE".into())));
    }

    #[test]
    fn a_mutated_object_must_be_a_json_object_within_the_limits() {
        let raw = |text: &str| RawVerdict::Allowed { warnings: vec![], mutated: Some(text.into()) };
        let req = request(Operation::Create, Some(pod()));
        let limits = OutputLimits { max_bytes: 100, ..OutputLimits::default() };
        assert!(matches!(raw("{").validate(&req, WebhookType::Mutating, &limits), Err(VerdictError::InvalidJson(_))));
        assert_eq!(raw("[1]").validate(&req, WebhookType::Mutating, &limits), Err(VerdictError::NotAnObject));
        let big = json!({"data": "x".repeat(200)}).to_string();
        assert_eq!(
            raw(&big).validate(&req, WebhookType::Mutating, &limits),
            Err(VerdictError::TooLarge { bytes: big.len(), limit: 100 })
        );
    }

    #[test]
    fn a_dense_mutated_object_is_refused_before_it_is_parsed_and_reserved_as_parsed() {
        let req = request(Operation::Create, Some(pod()));
        let limits = OutputLimits { max_bytes: 1 << 20, ..OutputLimits::default() };
        let mut dense = pod();
        dense["spec"]["z"] = json!(vec![0; 200_000]);
        let text = dense.to_string();
        assert!(text.len() < 1 << 20, "under the size limit: {}", text.len());
        let raw = RawVerdict::Allowed { warnings: vec![], mutated: Some(text) };
        assert!(raw.held_bytes() > 20 * raw.bytes(), "{} held for {} bytes", raw.held_bytes(), raw.bytes());
        assert!(matches!(
            raw.validate(&req, WebhookType::Mutating, &limits),
            Err(VerdictError::TooDense { limit: 1_048_576, .. })
        ));
        // An object of ordinary Kubernetes density (here a large annotation) passes.
        let mut plain = pod();
        plain["metadata"]["annotations"] = json!({"note": "x".repeat(900_000)});
        let raw = RawVerdict::Allowed { warnings: vec![], mutated: Some(plain.to_string()) };
        assert!(raw.held_bytes() < 2 * raw.bytes() + 4096);
        assert!(matches!(raw.validate(&req, WebhookType::Mutating, &limits), Ok(Verdict::Allowed { mutated: Some(_), .. })));
    }

    #[test]
    fn a_denial_needs_an_error_code_and_a_message() {
        let req = request(Operation::Create, Some(pod()));
        let deny = |code, message: &str| {
            RawVerdict::Denied { code, message: message.into(), warnings: vec!["w".into()] }.validate(
                &req,
                WebhookType::Validating,
                &OutputLimits::default(),
            )
        };
        assert_eq!(deny(403, "no"), Ok(Verdict::Denied { code: 403, message: "no".into(), warnings: vec!["w".into()] }));
        assert_eq!(deny(200, "no"), Err(VerdictError::InvalidCode(200)));
        assert_eq!(deny(422, " "), Err(VerdictError::EmptyMessage));
    }
}
