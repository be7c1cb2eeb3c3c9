//! The plugin contract as the host sees it: typed, validated forms of what crosses the WIT
//! boundary (`wit/v0.1.0`, `wit/v0.2.0` and `wit/v0.3.0`). The runtime converts to and from the
//! generated bindings of each version; everything else in the host works with these types.

mod fields;
mod kind;
pub(crate) mod manifest;
pub mod names;
mod object;
pub mod parsed_size;
mod request;
mod reserved;
mod response;
pub mod schema_bounds;
mod scopes;
mod verdict;
mod webhooks;

pub use fields::{FieldError, MAX_CONDITION_MESSAGE, MAX_EVENT_NOTE};
pub use kind::{Kind, KindError, ObjectRef, Scope};
pub use manifest::{Manifest, ManifestError, PARENT_NAME_PLACEHOLDER, RelatedKind, is_dns1123_label, selector_requirements};
pub use object::Object;
pub use request::Request;
pub use reserved::{HOST_API_GROUP, is_host_group, is_host_kind};
pub(crate) use response::serialize_millis;
pub use response::{
    Condition, ConditionStatus, Event, EventType, Failure, OutputLimits, RawFailure, RawResponse, Response, ResponseError,
};
pub use scopes::{KindInfo, KindScopes, KindsError, KnownKinds};
pub use verdict::{MAX_DENIAL_MESSAGE, MAX_MUTATED_OBJECT, MAX_WARNING, MAX_WARNINGS, RawVerdict, VerdictError};
pub use webhooks::{HOST_MATCH_CONDITION_PREFIX, HOST_MATCH_CONDITIONS, MAX_MATCH_CONDITIONS, MAX_WEBHOOKS, WebhookError};
