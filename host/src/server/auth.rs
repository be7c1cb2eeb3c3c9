//! Who may read `/metrics` when it is served securely: the bearer token of each scrape is
//! checked with a `TokenReview` (who is it?), then a `SubjectAccessReview` (may they `get` the
//! non-resource URL `/metrics`?), the way controller-runtime's
//! `WithAuthenticationAndAuthorization` checks its scrapes.
//!
//! Answers are cached per token (under its SHA-256, never the token itself) for a short
//! [`MetricsAuth::ttl`]: a Prometheus scraping every few seconds costs the API server two
//! reviews per TTL, and a role taken away stops working within one TTL. A review the API
//! server does not answer is not cached: the scrape gets 503 and the next one asks again.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use kube::api::{Api, PostParams};
use sha2::{Digest, Sha256};

/// The non-resource URL and verb a scrape must be allowed (`nonResourceURLs: [/metrics]`,
/// `verbs: [get]` in a ClusterRole such as `wasmop-metrics-reader`).
pub const METRICS_PATH: &str = "/metrics";

/// How long an answer about one token is reused by default.
pub const DEFAULT_TTL: Duration = Duration::from_secs(10);

/// At most this many tokens are remembered; expired answers are dropped first, and when every
/// one is still fresh the cache starts over (a flood of new tokens costs reviews, not memory).
const MAX_ENTRIES: usize = 1024;

/// What the host answers a scrape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The token's user may `get` `/metrics`: 200.
    Allowed {
        /// The user the token authenticates as.
        user: String,
    },
    /// No bearer token, or one the API server does not authenticate: 401.
    Unauthenticated {
        /// Why, for the response body and the log.
        reason: String,
    },
    /// An authenticated user without the right: 403.
    Forbidden {
        /// The user the token authenticates as.
        user: String,
        /// The authorizer's reason, when it gives one.
        reason: String,
    },
}

/// Why a scrape could not be checked (the API server did not answer a review).
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The `TokenReview` was refused or not answered.
    #[error("cannot review the scrape's token: {0}")]
    TokenReview(#[source] kube::Error),
    /// The `SubjectAccessReview` was refused or not answered.
    #[error("cannot review whether {user} may get /metrics: {error}")]
    AccessReview {
        /// The user the token authenticates as.
        user: String,
        /// The API error.
        #[source]
        error: kube::Error,
    },
}

/// Checks scrapes against the API server, with a small cache per token.
pub struct MetricsAuth {
    client: kube::Client,
    ttl: Duration,
    cache: Mutex<HashMap<[u8; 32], (Decision, Instant)>>,
}

impl std::fmt::Debug for MetricsAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsAuth").field("ttl", &self.ttl).finish_non_exhaustive()
    }
}

impl MetricsAuth {
    /// Check scrapes with `client`'s identity (it needs `create` on `tokenreviews` and
    /// `subjectaccessreviews`, which `wasmop rbac --metrics-secure` grants), reusing an answer
    /// about one token for `ttl`.
    pub fn new(client: kube::Client, ttl: Duration) -> Self {
        Self { client, ttl, cache: Mutex::new(HashMap::new()) }
    }

    /// How long an answer about one token is reused.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The decision for a request carrying `authorization` (the `Authorization` header's
    /// value, if any): a `Bearer` token reviewed, then its user's access to `GET /metrics`.
    ///
    /// # Errors
    /// [`AuthError`] when the API server does not answer a review (not cached).
    pub async fn check(&self, authorization: Option<&[u8]>) -> Result<Decision, AuthError> {
        let Some(token) = authorization.and_then(bearer) else {
            return Ok(Decision::Unauthenticated { reason: "no bearer token".into() });
        };
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(decision) = self.cached(&key) {
            return Ok(decision);
        }
        let decision = self.review(token).await?;
        self.remember(key, decision.clone());
        Ok(decision)
    }

    fn cached(&self, key: &[u8; 32]) -> Option<Decision> {
        let cache = self.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        cache.get(key).filter(|(_, at)| at.elapsed() < self.ttl).map(|(decision, _)| decision.clone())
    }

    fn remember(&self, key: [u8; 32], decision: Decision) {
        let mut cache = self.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if cache.len() >= MAX_ENTRIES {
            cache.retain(|_, (_, at)| at.elapsed() < self.ttl);
            if cache.len() >= MAX_ENTRIES {
                cache.clear();
            }
        }
        cache.insert(key, (decision, Instant::now()));
    }

    async fn review(&self, token: &str) -> Result<Decision, AuthError> {
        let review = TokenReview {
            spec: TokenReviewSpec { token: Some(token.to_owned()), ..TokenReviewSpec::default() },
            ..TokenReview::default()
        };
        let reviewed = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(AuthError::TokenReview)?;
        let status = reviewed.status.unwrap_or_default();
        let user = match (status.authenticated, status.user) {
            (Some(true), Some(user)) => user,
            _ => {
                let reason = status.error.filter(|e| !e.is_empty()).unwrap_or_else(|| "token not authenticated".into());
                return Ok(Decision::Unauthenticated { reason });
            }
        };
        let name = user.username.clone().unwrap_or_default();
        let access = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username,
                uid: user.uid,
                groups: user.groups,
                extra: user.extra,
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(METRICS_PATH.into()),
                    verb: Some("get".into()),
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let answered = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &access)
            .await
            .map_err(|error| AuthError::AccessReview { user: name.clone(), error })?;
        let status = answered.status.unwrap_or_default();
        if status.allowed && status.denied != Some(true) {
            Ok(Decision::Allowed { user: name })
        } else {
            let reason = status.reason.filter(|r| !r.is_empty()).unwrap_or_else(|| "no RBAC rule allows it".into());
            Ok(Decision::Forbidden { user: name, reason })
        }
    }
}

/// The token of an `Authorization: Bearer <token>` value (the scheme in any case).
fn bearer(value: &[u8]) -> Option<&str> {
    let value = std::str::from_utf8(value).ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_non_empty_bearer_token_is_taken() {
        assert_eq!(bearer(b"Bearer abc"), Some("abc"));
        assert_eq!(bearer(b"bearer  abc "), Some("abc"));
        assert_eq!(bearer(b"Basic dXNlcjpwYXNz"), None);
        assert_eq!(bearer(b"Bearer "), None);
        assert_eq!(bearer(b"Bearer"), None);
        assert_eq!(bearer(&[0xff, 0xfe]), None);
    }
}
