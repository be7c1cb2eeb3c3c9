//! Resolving the kinds plugins declare to API resources, by discovery.
//!
//! The first lookup reads the server's aggregated discovery (`/api` and `/apis` as
//! `APIGroupDiscoveryList`, served from Kubernetes 1.26 and GA in 1.30): two requests answer
//! every kind the server serves, however many plugins and group-versions there are, where
//! per-group discovery costs one request per group-version. A kind missing from that snapshot
//! (a CRD installed since, which aggregated discovery publishes a moment after the CRD is
//! established) is asked for on its own group-version, as is every kind of a server (or an
//! aggregated API server in front of it) that does not serve aggregated discovery.
//!
//! [`Discovery`] is also the host's online [`KindScopes`]: once a kind is resolved (every kind a
//! plugin declares is, before the plugin starts), its scope is known without a request.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use kube::api::GroupVersionKind;
use kube::discovery::{ApiCapabilities, ApiResource, Scope as DiscoveredScope, pinned_kind};

use crate::contract::{Kind, KindScopes, Manifest, Scope};

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
    /// The API server does not serve the resource a webhook's rule names.
    #[error("the API server does not serve resource {resource} of {group_version} (webhook {webhook}): {message}")]
    ResourceNotServed {
        /// The webhook whose rule names it.
        webhook: String,
        /// `group/version` (`v1` for the core group).
        group_version: String,
        /// The resource, as the rule names it (`pods`, `pods/status`).
        resource: String,
        /// The server's answer.
        message: String,
    },
}

/// Every kind a plugin declares, resolved: what its controller watches.
#[derive(Debug, Clone)]
pub struct DeclaredKinds {
    /// The parent kind.
    pub parent: Resolved,
    /// Each child kind, in the manifest's order.
    pub children: Vec<(Kind, Resolved)>,
    /// Each related kind, in the manifest's order.
    pub related: Vec<(Kind, Resolved)>,
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
    /// Whether the aggregated snapshot is still to be read (once, on the first lookup).
    snapshot: tokio::sync::Mutex<Snapshot>,
    requests: AtomicU64,
}

/// Where the aggregated snapshot stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Snapshot {
    /// Not read yet.
    Pending,
    /// Read into the cache.
    Read,
    /// The server does not serve aggregated discovery: every kind is asked for on its own.
    Unserved,
}

impl std::fmt::Debug for Discovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Discovery")
            .field("cached", &self.cache.lock().map(|c| c.len()).unwrap_or_default())
            .field("requests", &self.requests())
            .finish()
    }
}

impl Discovery {
    /// An empty cache over `client`.
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            cache: Mutex::default(),
            snapshot: tokio::sync::Mutex::new(Snapshot::Pending),
            requests: AtomicU64::new(0),
        }
    }

    /// How many discovery requests this cache has sent to the API server so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Whether the kinds came from the server's aggregated discovery (`false` before the first
    /// lookup, and for a server that does not serve it).
    pub async fn aggregated(&self) -> bool {
        *self.snapshot.lock().await == Snapshot::Read
    }

    /// Resolve `kind`, asking the API server on first use. Transient failures (the API server
    /// unreachable) are retried with backoff up to `patience`.
    ///
    /// # Errors
    /// [`DiscoveryError::NotServed`] when the server answers that it does not serve the kind,
    /// or stays unreachable past `patience`.
    pub async fn resolve(&self, kind: &Kind, patience: Duration) -> Result<Resolved, DiscoveryError> {
        if let Some(r) = self.cached(kind) {
            return Ok(r);
        }
        self.read_snapshot().await;
        if let Some(r) = self.cached(kind) {
            return Ok(r);
        }
        let gvk = GroupVersionKind::gvk(&kind.group, &kind.version, &kind.kind);
        let started = tokio::time::Instant::now();
        let mut delay = Duration::from_millis(100);
        let (resource, caps) = loop {
            self.requests.fetch_add(1, Ordering::Relaxed);
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
        let resolved = Resolved::new(resource, &caps);
        self.cache.lock().expect("discovery lock").insert(kind.clone(), resolved.clone());
        Ok(resolved)
    }

    /// Resolve every kind `manifest` declares, as a plugin's start does: the parent, each child
    /// kind, each related kind ([`Discovery::resolve`], `patience` each).
    ///
    /// # Errors
    /// Every kind that does not resolve, one [`DiscoveryError::NotServed`] each, in that order.
    pub async fn resolve_declared(&self, manifest: &Manifest, patience: Duration) -> Result<DeclaredKinds, Vec<DiscoveryError>> {
        let mut errors = Vec::new();
        let parent = match self.resolve(&manifest.parent, patience).await {
            Ok(parent) => Some(parent),
            Err(e) => {
                errors.push(e);
                None
            }
        };
        let children = self.resolve_each(&manifest.children, patience, &mut errors).await;
        let related: Vec<Kind> = manifest.related.iter().map(|r| r.kind.clone()).collect();
        let related = self.resolve_each(&related, patience, &mut errors).await;
        match parent {
            Some(parent) if errors.is_empty() => Ok(DeclaredKinds { parent, children, related }),
            _ => Err(errors),
        }
    }

    /// Resolve each of `kinds`, pushing the failures onto `errors`.
    async fn resolve_each(&self, kinds: &[Kind], patience: Duration, errors: &mut Vec<DiscoveryError>) -> Vec<(Kind, Resolved)> {
        let mut resolved = Vec::new();
        for kind in kinds {
            match self.resolve(kind, patience).await {
                Ok(r) => resolved.push((kind.clone(), r)),
                Err(e) => errors.push(e),
            }
        }
        resolved
    }

    /// Check that the server serves every resource the rules of `manifest`'s webhooks name (a
    /// `*` in a rule's group, version or resource matches whatever is served).
    ///
    /// # Errors
    /// Every resource not served, one [`DiscoveryError::ResourceNotServed`] each, in the
    /// manifest's order.
    pub async fn check_webhook_resources(&self, manifest: &Manifest) -> Result<(), Vec<DiscoveryError>> {
        self.read_snapshot().await;
        let mut errors = Vec::new();
        for (webhook, group, version, resource) in manifest.webhook_rule_resources() {
            if let Err(message) = self.serves_resource(group, version, resource).await {
                let group_version = if group.is_empty() { version.to_owned() } else { format!("{group}/{version}") };
                errors.push(DiscoveryError::ResourceNotServed {
                    webhook: webhook.to_owned(),
                    group_version,
                    resource: resource.to_owned(),
                    message,
                });
            }
        }
        if errors.is_empty() { Ok(()) } else { Err(errors) }
    }

    /// Whether `resource` (its part before a `/`) of `group`/`version` is served: from the
    /// snapshot, else from the group-version's own discovery. `Err` says why not.
    async fn serves_resource(&self, group: &str, version: &str, resource: &str) -> Result<(), String> {
        let plural = resource.split('/').next().unwrap_or(resource);
        if [group, version, plural].contains(&"*") {
            return Ok(());
        }
        let matches = |r: &ApiResource| r.group == group && r.version == version && r.plural == plural;
        if self.cache.lock().expect("discovery lock").values().any(|r| matches(&r.resource)) {
            return Ok(());
        }
        self.requests.fetch_add(1, Ordering::Relaxed);
        let gv = kube::core::GroupVersion::gv(group, version);
        let served = kube::discovery::oneshot::pinned_group(&self.client, &gv).await.map_err(|e| e.to_string())?;
        if served.versioned_resources(version).iter().any(|(r, _)| matches(r)) {
            Ok(())
        } else {
            Err(format!("the group-version serves no resource {plural}"))
        }
    }

    fn cached(&self, kind: &Kind) -> Option<Resolved> {
        self.cache.lock().expect("discovery lock").get(kind).cloned()
    }

    /// Read the server's aggregated discovery into the cache, once; concurrent first lookups
    /// wait for the one read. A failure (not served, or the server away) leaves the per-kind
    /// path: a server away is then retried there, within each lookup's patience.
    async fn read_snapshot(&self) {
        let mut snapshot = self.snapshot.lock().await;
        if *snapshot != Snapshot::Pending {
            return;
        }
        self.requests.fetch_add(2, Ordering::Relaxed);
        match kube::discovery::Discovery::new(self.client.clone()).run_aggregated().await {
            Ok(served) => {
                let mut cache = self.cache.lock().expect("discovery lock");
                for group in served.groups() {
                    for version in group.versions() {
                        for (resource, caps) in group.versioned_resources(version) {
                            let kind = Kind::new(&resource.group, &resource.version, &resource.kind);
                            cache.entry(kind).or_insert_with(|| Resolved::new(resource, &caps));
                        }
                    }
                }
                tracing::debug!(kinds = cache.len(), "read the server's aggregated discovery");
                *snapshot = Snapshot::Read;
            }
            Err(kube::Error::Api(status)) if status.code < 500 && status.code != 429 => {
                tracing::debug!(error = %status, "the server does not serve aggregated discovery; asking per kind");
                *snapshot = Snapshot::Unserved;
            }
            Err(e @ (kube::Error::SerdeError(_) | kube::Error::Discovery(_))) => {
                tracing::debug!(error = %e, "the server's aggregated discovery is unreadable; asking per kind");
                *snapshot = Snapshot::Unserved;
            }
            // The server away or overloaded: the next first lookup tries again.
            Err(e) => tracing::debug!(error = %e, "aggregated discovery failed; asking per kind this time"),
        }
    }
}

impl Resolved {
    fn new(resource: ApiResource, caps: &ApiCapabilities) -> Self {
        let scope = match caps.scope {
            DiscoveredScope::Namespaced => Scope::Namespaced,
            DiscoveredScope::Cluster => Scope::Cluster,
        };
        Self { resource, scope }
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
