//! Resolving the kinds plugins declare to API resources, by discovery.
//!
//! [`Discovery`] is also the host's online [`KindScopes`]: once a kind is resolved (every kind a
//! plugin declares is, before the plugin starts), its scope is known without a request.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use kube::api::GroupVersionKind;
use kube::discovery::{ApiResource, Scope as DiscoveredScope, pinned_kind};

use crate::contract::{Kind, KindScopes, Scope};

/// Why a kind could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    /// The API server does not serve this kind (CRD not installed, wrong version).
    #[error("the API server does not serve {kind}: {message}")]
    NotServed {
        /// The kind.
        kind: Kind,
        /// The server's answer.
        message: String,
    },
}

/// A resolved kind: its resource (plural, version) and scope.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// What kube needs to address the kind.
    pub resource: ApiResource,
    /// Namespaced or cluster.
    pub scope: Scope,
}

/// Discovery results, cached per kind.
pub struct Discovery {
    client: kube::Client,
    cache: Mutex<HashMap<Kind, Resolved>>,
}

impl std::fmt::Debug for Discovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Discovery").field("cached", &self.cache.lock().map(|c| c.len()).unwrap_or_default()).finish()
    }
}

impl Discovery {
    /// An empty cache over `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client, cache: Mutex::default() }
    }

    /// Resolve `kind`, asking the API server on first use. Transient failures (the API server
    /// unreachable) are retried with backoff up to `patience`.
    ///
    /// # Errors
    /// [`DiscoveryError::NotServed`] when the server answers that it does not serve the kind,
    /// or stays unreachable past `patience`.
    pub async fn resolve(&self, kind: &Kind, patience: Duration) -> Result<Resolved, DiscoveryError> {
        if let Some(r) = self.cache.lock().expect("discovery lock").get(kind) {
            return Ok(r.clone());
        }
        let gvk = GroupVersionKind::gvk(&kind.group, &kind.version, &kind.kind);
        let started = tokio::time::Instant::now();
        let mut delay = Duration::from_millis(100);
        let (resource, caps) = loop {
            match pinned_kind(&self.client, &gvk).await {
                Ok(found) => break found,
                Err(e) => {
                    let transient =
                        !matches!(&e, kube::Error::Api(s) if s.code == 404) && !matches!(&e, kube::Error::Discovery(_));
                    if !transient || started.elapsed() > patience {
                        return Err(DiscoveryError::NotServed { kind: kind.clone(), message: e.to_string() });
                    }
                    tracing::warn!(%kind, error = %e, "discovery failed; retrying");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(5));
                }
            }
        };
        let scope = match caps.scope {
            DiscoveredScope::Namespaced => Scope::Namespaced,
            DiscoveredScope::Cluster => Scope::Cluster,
        };
        let resolved = Resolved { resource, scope };
        self.cache.lock().expect("discovery lock").insert(kind.clone(), resolved.clone());
        Ok(resolved)
    }
}

impl KindScopes for Discovery {
    /// The scope of `kind` if it was resolved before; `None` otherwise (no request is made).
    fn scope_of(&self, kind: &Kind) -> Option<Scope> {
        self.cache.lock().expect("discovery lock").get(kind).map(|r| r.scope)
    }

    /// The resource name of `kind` if it was resolved before; `None` otherwise.
    fn plural_of(&self, kind: &Kind) -> Option<String> {
        self.cache.lock().expect("discovery lock").get(kind).map(|r| r.resource.plural.clone())
    }
}
